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
    let line = with_record(format_args!(""), &fields, |r| text_line(TS, r));
    assert_eq!(
        line,
        "[2026-11-22T10:00:00.123Z INFO  knid_transport::operation] op=attach sandbox=pod-1 \
         duration_ms=1.5 result=OK"
    );
    let forged = operation_fields("x\nINFO fake=1");
    let line = with_record(format_args!(""), &forged, |r| text_line(TS, r));
    assert!(line.contains(r#"sandbox="x\nINFO fake=1""#), "{line}");
    assert!(!line.contains('\n'), "{line}");
    let line = with_record(format_args!("knid serving"), &[], |r| text_line(TS, r));
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
