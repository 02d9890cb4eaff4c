use super::*;

#[test]
fn panic_text_reads_str_and_string_payloads() {
    assert_eq!(panic_text(&"boom"), "boom");
    assert_eq!(panic_text(&String::from("bang")), "bang");
    assert_eq!(panic_text(&42u8), "non-string panic payload");
}

#[test]
fn current_thread_handle_is_a_netns_with_its_path() {
    let ns = NetnsHandle::current_thread().expect("own netns");
    assert_eq!(ns.path(), Path::new("/proc/thread-self/ns/net"));
    assert_ne!(ns.id().ino, 0);
    assert!(is_nsfs(Path::new("/proc/thread-self/ns/net")).expect("statfs"));
}
