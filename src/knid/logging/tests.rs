use super::*;

const TS: &str = "2026-11-22T10:00:00.123Z";

fn with_record<R>(
    message: std::fmt::Arguments<'_>,
    fields: &[(&str, Value<'_>)],
    f: impl FnOnce(&Record<'_>) -> R,
) -> R {
    f(&Record::builder()
        .level(log::Level::Info)
        .target("knid_transport::operation")
        .args(message)
        .key_values(&fields)
        .build())
}

/// The text line of `record`, alone.
fn text(ts: &str, record: &Record<'_>) -> String {
    let mut line = String::new();
    text_line(&mut line, &ts, record);
    line
}

fn operation_fields(sandbox: &str) -> Vec<(&str, Value<'_>)> {
    vec![
        ("op", Value::from("attach")),
        ("sandbox", Value::from(sandbox)),
        ("duration_ms", Value::from(1.5f64)),
        ("result", Value::from("OK")),
    ]
}

#[test]
fn text_lines_carry_the_fields_and_quote_what_is_not_a_token() {
    let fields = operation_fields("pod-1");
    let line = with_record(format_args!(""), &fields, |r| text(TS, r));
    assert_eq!(
        line,
        "[2026-11-22T10:00:00.123Z INFO  knid_transport::operation] op=attach sandbox=pod-1 \
         duration_ms=1.5 result=OK"
    );
    let forged = operation_fields("x\nINFO fake=1");
    let line = with_record(format_args!(""), &forged, |r| text(TS, r));
    assert!(line.contains(r#"sandbox="x\nINFO fake=1""#), "{line}");
    assert!(!line.contains('\n'), "{line}");
    let line = with_record(format_args!("knid serving"), &[], |r| text(TS, r));
    assert!(line.ends_with("] knid serving"), "{line}");
}

#[test]
fn json_lines_are_objects_with_typed_fields() {
    let fields = operation_fields("pod \"1\"");
    let line = with_record(format_args!(""), &fields, |r| json_line(TS, r));
    let v: serde_json::Value = serde_json::from_str(&line).expect("valid JSON");
    assert_eq!(v["ts"], TS);
    assert_eq!(v["level"], "INFO");
    assert_eq!(v["target"], "knid_transport::operation");
    assert_eq!(v["op"], "attach");
    assert_eq!(v["sandbox"], "pod \"1\"");
    assert_eq!(v["duration_ms"], 1.5);
    assert_eq!(v["result"], "OK");
    assert!(v.get("msg").is_none(), "no empty msg: {line}");
    let line = with_record(format_args!("reaper: {} left", 3), &[], |r| {
        json_line(TS, r)
    });
    let v: serde_json::Value = serde_json::from_str(&line).expect("valid JSON");
    assert_eq!(v["msg"], "reaper: 3 left");
}

#[test]
fn text_lines_format_messages_and_leave_out_an_empty_one() {
    let line = with_record(format_args!("reaper: {} left", 3), &[], |r| text(TS, r));
    assert!(line.ends_with("] reaper: 3 left"), "{line}");
    let empty = "";
    let fields = [("n", Value::from(2u64)), ("empty", Value::from(""))];
    let line = with_record(format_args!("{empty}"), &fields, |r| text(TS, r));
    assert_eq!(
        line,
        r#"[2026-11-22T10:00:00.123Z INFO  knid_transport::operation] n=2 empty="""#
    );
}

#[test]
fn a_thread_reuses_its_line_but_not_inside_a_line_or_past_a_long_one() {
    let outer = with_line(|line| {
        line.push_str("outer");
        let inner = with_line(|inner| {
            assert!(
                inner.is_empty(),
                "a line being built is not handed out again"
            );
            inner.push_str("inner");
            inner.clone()
        });
        assert_eq!(inner, "inner");
        line.clone()
    });
    assert_eq!(outer, "outer", "the inner line left the outer one alone");
    with_line(|line| {
        assert!(line.is_empty(), "each line starts empty");
        assert!(line.capacity() >= 5, "the buffer is kept for the next line");
        line.push_str(&"x".repeat(LINE_KEPT * 2));
    });
    with_line(|line| {
        assert!(
            line.capacity() <= LINE_KEPT,
            "a long line's memory is given back"
        );
    });
}
