use super::retry_busy_lock;

#[derive(Debug)]
struct Failed(&'static str);

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for Failed {}

#[test]
fn a_busy_lock_is_tried_again_and_any_other_error_is_returned_at_once() {
    let mut calls = 0;
    let opened = retry_busy_lock(|| {
        calls += 1;
        if calls < 3 {
            Err(Failed("could not acquire lock on \"db\": WouldBlock"))
        } else {
            Ok(calls)
        }
    });
    assert_eq!(opened.expect("opened on the third try"), 3);

    let mut calls = 0;
    let failed = retry_busy_lock(|| -> Result<(), Failed> {
        calls += 1;
        Err(Failed("corrupt"))
    });
    assert_eq!(failed.expect_err("not a lock").0, "corrupt");
    assert_eq!(calls, 1, "an error other than the lock is not tried again");
}
