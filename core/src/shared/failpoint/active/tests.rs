use super::*;

#[test]
fn parses_names_and_actions_and_names_what_is_wrong() {
    let map = parse("attach.pending=abort, detach.retired=error,attach.routed=sleep(250)").unwrap();
    assert_eq!(map.get("attach.pending"), Some(&Action::Abort));
    assert_eq!(map.get("detach.retired"), Some(&Action::Error));
    assert_eq!(
        map.get("attach.routed"),
        Some(&Action::Sleep(std::time::Duration::from_millis(250)))
    );
    assert!(parse("").unwrap().is_empty());
    assert!(parse("attach.pendin=abort")
        .unwrap_err()
        .contains("attach.pendin"));
    assert!(parse("attach.pending=explode")
        .unwrap_err()
        .contains("explode"));
    assert!(parse("attach.pending=sleep(soon)")
        .unwrap_err()
        .contains("sleep(soon)"));
    assert!(parse("attach.pending")
        .unwrap_err()
        .contains("attach.pending"));
}
