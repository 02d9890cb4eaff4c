use super::*;

#[test]
fn errors_leave_as_statuses_with_their_code_and_are_counted() {
    let metrics = Metrics::new();
    let result: Result<(), Error> = Err(Error::NotFound("pod-9".into()));
    match finish(&metrics, "inspect", "pod-9", Instant::now(), result) {
        Err(ttrpc::Error::RpcStatus(status)) => {
            assert_eq!(status.code(), ttrpc::Code::NOT_FOUND);
            assert_eq!(status.message, "sandbox pod-9 not found");
        }
        other => panic!("not a status: {other:?}"),
    }
    let ok: Result<u8, Error> = Ok(7);
    assert_eq!(
        finish(&metrics, "inspect", "pod-9", Instant::now(), ok).ok(),
        Some(7)
    );
    let text = metrics.render(&knid_core::metrics::Snapshot {
        ipam: Vec::new(),
        ports: Vec::new(),
        sandboxes: 0,
        host_ports: 0,
        nat_elements: 0,
        antispoof_drops: Vec::new(),
        reaper_queue: 0,
        store_bytes: None,
        cluster: None,
        policy: None,
    });
    for want in [
        "knid_operations_total{code=\"NotFound\",op=\"inspect\"} 1",
        "knid_operations_total{code=\"OK\",op=\"inspect\"} 1",
        "knid_operation_duration_seconds_count{code=\"OK\",op=\"inspect\"} 1",
    ] {
        assert!(text.contains(want), "missing {want}:\n{text}");
    }
}

/// The operation lines logged on each thread, as `op result`.
struct Captured(std::sync::Mutex<Vec<(std::thread::ThreadId, String)>>);

impl log::Log for Captured {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }

    fn log(&self, record: &log::Record<'_>) {
        let kvs = record.key_values();
        let field = |key: &str| {
            kvs.get(log::kv::Key::from(key))
                .map(|v| v.to_string())
                .unwrap_or_default()
        };
        if let Ok(mut lines) = self.0.lock() {
            lines.push((
                std::thread::current().id(),
                format!("{} {} {}", field("op"), field("sandbox"), field("result")),
            ));
        }
    }

    fn flush(&self) {}
}

static CAPTURED: Captured = Captured(std::sync::Mutex::new(Vec::new()));

/// This thread's captured lines.
fn mine() -> Vec<String> {
    let _ = log::set_logger(&CAPTURED);
    log::set_max_level(log::LevelFilter::Info);
    let me = std::thread::current().id();
    CAPTURED
        .0
        .lock()
        .map(|lines| {
            lines
                .iter()
                .filter(|(t, _)| *t == me)
                .map(|(_, l)| l.clone())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn held_lines_are_logged_in_order_when_the_outer_hold_ends_and_others_at_once() {
    assert!(mine().is_empty());
    let metrics = Metrics::new();
    let lines = hold_lines();
    let inner = hold_lines();
    let _ = finish(&metrics, "attach", "held-1", Instant::now(), Ok(()));
    drop(inner);
    assert!(mine().is_empty(), "logged before the outer hold ended");
    let missing: Result<(), Error> = Err(Error::NotFound("held-2".into()));
    let _ = finish(&metrics, "detach", "held-2", Instant::now(), missing);
    assert!(mine().is_empty(), "logged before the hold ended");
    drop(lines);
    assert_eq!(
        mine(),
        ["attach held-1 OK", "detach held-2 NotFound"],
        "held lines, in order"
    );
    // Not held: at once.
    let _ = finish(&metrics, "inspect", "held-3", Instant::now(), Ok(()));
    assert_eq!(mine().len(), 3);
    assert_eq!(mine()[2], "inspect held-3 OK");
}
