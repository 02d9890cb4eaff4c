use std::path::Path;

use knid_netops::netns::{is_nsfs, visit};
use knid_netops::{run_in, Error, NetnsHandle, Rtnl};

use crate::common::{in_private_netns, new_netns};

#[test]
fn open_of_a_regular_file_is_not_netns_and_of_a_missing_path_is_netns_missing() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plain");
    std::fs::write(&file, b"").unwrap();
    assert!(matches!(NetnsHandle::open(&file), Err(Error::NotNetns { path }) if path == file));
    assert!(!is_nsfs(&file).unwrap());

    let missing = dir.path().join("gone");
    assert!(
        matches!(NetnsHandle::open(&missing), Err(Error::NetnsMissing { path }) if path == missing)
    );
    assert!(matches!(is_nsfs(&missing), Err(Error::NetnsMissing { .. })));
}

#[test]
fn a_symlink_to_a_netns_is_refused_and_proc_magic_links_are_followed() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("sneaky");
    // The thread's own netns, as a caller might point a path at the host's.
    std::os::unix::fs::symlink("/proc/thread-self/ns/net", &link).unwrap();
    assert!(matches!(NetnsHandle::open(&link), Err(Error::NetnsSymlink { path }) if path == link));
    let own = format!(
        "/proc/{}/task/{}/ns/net",
        std::process::id(),
        nix::unistd::gettid()
    );
    let here = NetnsHandle::current_thread().unwrap().id();
    assert_eq!(NetnsHandle::open(Path::new(&own)).unwrap().id(), here);
}

#[test]
fn another_kind_of_namespace_is_not_netns() {
    // On nsfs, but a mount namespace: setns(CLONE_NEWNET) on it would fail later.
    let mnt = Path::new("/proc/thread-self/ns/mnt");
    assert!(is_nsfs(mnt).unwrap());
    assert!(matches!(
        NetnsHandle::open(mnt),
        Err(Error::NotNetns { .. })
    ));
}

#[test]
fn run_in_really_runs_in_the_target_namespace() {
    in_private_netns("run_in_really_runs_in_the_target_namespace", || {
        let here = NetnsHandle::current_thread().unwrap().id();
        let pod = new_netns();
        assert_ne!(pod.id(), here);

        let inside = run_in(&pod, || NetnsHandle::current_thread().map(|h| h.id()))
            .expect("run_in")
            .expect("id inside");
        assert_eq!(inside, pod.id());
        assert_eq!(
            NetnsHandle::current_thread().unwrap().id(),
            here,
            "caller never moved"
        );

        // Reopening by path (here /proc/<pid>/task/<tid>/ns/net would do too) finds the same id.
        let again = NetnsHandle::open(Path::new("/proc/thread-self/ns/net")).unwrap();
        assert_eq!(again.id(), here);
    });
}

#[test]
fn visit_runs_on_the_calling_thread_in_the_target_and_always_comes_back() {
    in_private_netns("visit_runs_on_the_calling_thread", || {
        let here = NetnsHandle::current_thread().unwrap().id();
        let pod = new_netns();
        let caller = std::thread::current().id();
        let (inside, thread) = visit(&pod, || {
            (
                NetnsHandle::current_thread().map(|h| h.id()),
                std::thread::current().id(),
            )
        })
        .expect("visit");
        assert_eq!(inside.expect("id inside"), pod.id());
        assert_eq!(thread, caller, "no other thread");
        assert_eq!(
            NetnsHandle::current_thread().unwrap().id(),
            here,
            "back home"
        );

        // A panic inside still brings the thread home before it unwinds further.
        let caught = std::panic::catch_unwind(|| visit(&pod, || panic!("boom in visit")));
        assert!(caught.is_err(), "the panic reaches the caller");
        assert_eq!(
            NetnsHandle::current_thread().unwrap().id(),
            here,
            "home after a panic"
        );

        // Twice in a row (the way home is opened once per thread and kept).
        for _ in 0..2 {
            let mut rt = Rtnl::open_in(&pod).unwrap();
            assert_eq!(
                rt.links().unwrap().len(),
                1,
                "a socket in the pod sees only its lo"
            );
            assert_eq!(NetnsHandle::current_thread().unwrap().id(), here);
        }
    });
}

#[test]
fn run_in_reports_a_panic_as_a_netns_error() {
    in_private_netns("run_in_reports_a_panic_as_a_netns_error", || {
        let pod = new_netns();
        let err = run_in(&pod, || -> () { panic!("boom in pod") }).expect_err("panicked");
        match err {
            Error::Netns { source, .. } => assert_eq!(source.to_string(), "boom in pod"),
            other => panic!("wrong error {other:?}"),
        }
    });
}

#[test]
fn a_socket_opened_in_a_namespace_keeps_acting_there() {
    in_private_netns("a_socket_opened_in_a_namespace_keeps_acting_there", || {
        let pod = new_netns();
        let mut in_pod = Rtnl::open_in(&pod).unwrap();
        in_pod.create_bridge("kns0", None).unwrap();

        let mut here = Rtnl::open().unwrap();
        assert_eq!(here.link_by_name("kns0").unwrap(), None);
        let seen_inside = run_in(&pod, || {
            let mut rt = Rtnl::open().unwrap();
            rt.link_by_name("kns0").unwrap().map(|l| l.kind)
        })
        .unwrap();
        assert_eq!(seen_inside, Some(Some("bridge".to_owned())));

        // The socket is Send: it acts in the pod from any thread.
        let deleted =
            std::thread::scope(|s| s.spawn(move || in_pod.delete_link_by_name("kns0")).join());
        assert!(deleted.unwrap().unwrap());
    });
}

#[test]
fn create_bound_makes_a_new_namespace_with_loopback_up_and_remove_bound_takes_it_away() {
    in_private_netns("create_bound_makes_a_new_namespace", || {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pod-a");
        let id = knid_netops::netns::create_bound(&path)
            .expect("create_bound")
            .id();
        assert!(is_nsfs(&path).unwrap(), "a netns is mounted on the path");
        let ns = NetnsHandle::open(&path).unwrap();
        assert_eq!(
            ns.id(),
            id,
            "the mount outlives the handle and is the same namespace"
        );
        assert_ne!(
            id,
            NetnsHandle::current_thread().unwrap().id(),
            "a new namespace"
        );
        let mut inside = Rtnl::open_in(&ns).unwrap();
        let links = inside.links().unwrap();
        assert_eq!(links.len(), 1, "only lo: {links:?}");
        assert!(links[0].up, "lo is up");

        // The path is taken: a second create fails and leaves the first mount alone.
        assert!(knid_netops::netns::create_bound(&path).is_err());
        assert!(is_nsfs(&path).unwrap());

        drop(ns);
        assert!(knid_netops::netns::remove_bound(&path).unwrap());
        assert!(!path.exists(), "mount point file removed");
        assert!(
            !knid_netops::netns::remove_bound(&path).unwrap(),
            "idempotent"
        );

        // A plain file (no mount) is simply removed.
        std::fs::write(&path, b"").unwrap();
        assert!(knid_netops::netns::remove_bound(&path).unwrap());
        assert!(!path.exists());
    });
}

#[test]
fn an_unbound_netns_dies_with_its_handle_unless_bound() {
    in_private_netns("an_unbound_netns_dies_with_its_handle", || {
        let dir = tempfile::tempdir().unwrap();
        let spare = knid_netops::netns::create_unbound().expect("create_unbound");
        let id = spare.id();
        let path = dir.path().join("later");
        let bound = knid_netops::netns::bind(spare, &path).expect("bind");
        assert_eq!(bound.path(), path.as_path());
        drop(bound);
        assert_eq!(NetnsHandle::open(&path).unwrap().id(), id);
        // Binding onto a taken path fails and leaves that path alone.
        let other = knid_netops::netns::create_unbound().unwrap();
        assert!(knid_netops::netns::bind(other, &path).is_err());
        assert_eq!(NetnsHandle::open(&path).unwrap().id(), id);
        assert!(knid_netops::netns::remove_bound(&path).unwrap());
    });
}

#[test]
fn a_netns_claim_holds_its_namespace_alone_and_ends_with_its_socket() {
    in_private_netns(
        "a_netns_claim_holds_its_namespace_alone_and_ends_with_its_socket",
        || {
            const NAME: &str = "knid-test/claim";
            let held = knid_netops::netns_claim::claim(NAME).expect("first claim");
            // A second claim in the namespace, here from the same process, is refused by name.
            match knid_netops::netns_claim::claim(NAME) {
                Err(Error::NetnsClaimed { name }) => assert_eq!(name, NAME),
                other => panic!("second claim in the same netns: {other:?}"),
            }
            // Another name, or the same name in another namespace, is another claim.
            let other_name = knid_netops::netns_claim::claim("knid-test/other").expect("other");
            let pod = new_netns();
            let there = run_in(&pod, || knid_netops::netns_claim::claim(NAME))
                .expect("run_in")
                .expect("the same name in another netns");
            drop((other_name, there));
            // Gone with its socket: claimable again at once.
            drop(held);
            let again = knid_netops::netns_claim::claim(NAME).expect("claim after release");
            drop(again);
        },
    );
}
