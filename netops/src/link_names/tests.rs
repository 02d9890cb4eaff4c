use super::*;

const LISTING: &str = "\
Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:     120       2    0    0    0     0          0         0      120       2    0    0    0     0       0          0
kn0123456789ab:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0
  eth0: 9876543 12345    0    0    0     0          0         0  1234567    4321    0    0    0     0       0          0
";

#[test]
fn every_link_line_gives_its_name_and_the_headers_none() {
    let names = parse(LISTING.as_bytes()).expect("parse");
    assert_eq!(names, ["lo", "kn0123456789ab", "eth0"]);
}

#[test]
fn a_listing_of_headers_alone_has_no_link() {
    let headers: String = LISTING.lines().take(2).map(|l| format!("{l}\n")).collect();
    assert!(parse(headers.as_bytes()).expect("parse").is_empty());
}

#[test]
fn a_line_without_a_name_is_refused_and_quoted() {
    let bad = format!("{LISTING}garbage\n");
    let err = parse(bad.as_bytes()).expect_err("refused");
    assert!(err.to_string().contains("\"garbage\""), "{err}");
}

#[test]
fn the_calling_threads_namespace_is_listed() {
    // Every namespace has lo; the test's own is enough to show the file is read.
    let names = link_names().expect("list");
    assert!(names.iter().any(|n| n == "lo"), "{names:?}");
}
