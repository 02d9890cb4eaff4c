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
