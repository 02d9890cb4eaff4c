use super::*;

#[test]
fn owner_locks_hold_one_owner_and_leave_other_stripes_free() {
    let locks = OwnerLocks::new();
    let held = locks.lock("pod-a");
    assert!(
        locks.stripe("pod-a").try_lock().is_err(),
        "pod-a's stripe held"
    );
    let other = (0..64)
        .map(|i| format!("pod-{i}"))
        .find(|o| !std::ptr::eq(locks.stripe(o), locks.stripe("pod-a")))
        .expect("an owner on another stripe");
    drop(locks.lock(&other));
    drop(held);
    assert!(locks.stripe("pod-a").try_lock().is_ok(), "released");
}
