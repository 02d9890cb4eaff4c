use std::path::Path;

use knid_netops::netns::is_nsfs;
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
