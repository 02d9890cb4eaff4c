//! The lookout over a real epoll instance standing in for the role's, with an eventfd in it as
//! the role's event source.

use std::os::fd::AsFd;

use super::*;

/// A role's epoll instance with one event source in it, not ready yet.
struct Role {
    epoll: Epoll,
    source: EventFd,
}

impl Role {
    fn new() -> Role {
        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).expect("epoll");
        let source = EventFd::from_flags(EfdFlags::EFD_NONBLOCK).expect("eventfd");
        epoll
            .add(&source, EpollEvent::new(EpollFlags::EPOLLIN, 7))
            .expect("watch the source");
        Role { epoll, source }
    }

    /// The role and a lookout over it.
    fn watched() -> (Role, Lookout) {
        let role = Role::new();
        let lookout = Lookout::new(role.epoll.0.as_fd()).expect("lookout");
        (role, lookout)
    }

    /// An event waits for the role.
    fn event(&self) {
        self.source.write(1).expect("event");
    }
}

/// Long enough that a wait ending before it was woken; short enough for a test that expects
/// nothing.
const QUIET: Duration = Duration::from_millis(50);
const LONG: Duration = Duration::from_secs(30);

#[test]
fn a_parked_roles_event_wakes_the_follower_once() {
    let (role, lookout) = Role::watched();
    lookout.park(None).expect("park");
    role.event();
    assert_eq!(lookout.wait(LONG).expect("wait"), Sighted::Something);
    // One-shot: the event still waits for the role, but the lookout saw it already.
    assert_eq!(lookout.wait(QUIET).expect("wait"), Sighted::Nothing);
}

#[test]
fn an_event_waiting_when_the_role_is_parked_is_seen() {
    let (role, lookout) = Role::watched();
    role.event();
    lookout.park(None).expect("park");
    assert_eq!(lookout.wait(LONG).expect("wait"), Sighted::Something);
}

#[test]
fn a_role_held_again_wakes_nobody() {
    let (role, lookout) = Role::watched();
    lookout.park(Some(Duration::from_millis(5))).expect("park");
    lookout.unpark();
    role.event();
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(lookout.wait(QUIET).expect("wait"), Sighted::Nothing);
}

#[test]
fn a_parked_roles_deadline_wakes_the_follower() {
    let (_role, lookout) = Role::watched();
    lookout.park(Some(Duration::from_millis(5))).expect("park");
    assert_eq!(lookout.wait(LONG).expect("wait"), Sighted::Something);
    // A deadline already past still wakes it.
    lookout.unpark();
    lookout.park(Some(Duration::ZERO)).expect("park again");
    assert_eq!(lookout.wait(LONG).expect("wait"), Sighted::Something);
}

#[test]
fn an_expired_deadline_is_cleared_when_the_role_is_taken_back() {
    let (_role, lookout) = Role::watched();
    lookout.park(Some(Duration::from_millis(1))).expect("park");
    std::thread::sleep(Duration::from_millis(20));
    lookout.unpark();
    assert_eq!(lookout.wait(QUIET).expect("wait"), Sighted::Nothing);
}

#[test]
fn the_bell_wakes_the_follower_and_is_taken() {
    let (_role, lookout) = Role::watched();
    lookout.ring();
    lookout.ring();
    assert_eq!(lookout.wait(LONG).expect("wait"), Sighted::Something);
    assert_eq!(lookout.wait(QUIET).expect("wait"), Sighted::Nothing);
}

#[test]
fn an_unparked_role_is_not_watched() {
    let (role, lookout) = Role::watched();
    role.event();
    assert_eq!(lookout.wait(QUIET).expect("wait"), Sighted::Nothing);
}
