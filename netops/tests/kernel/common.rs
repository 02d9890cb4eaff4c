//! Private namespaces for tests.

use std::io::{self, Write};
use std::thread;

use knid_netops::{NetnsHandle, Rtnl};
use nix::sched::{unshare, CloneFlags};

/// Runs `test` on a fresh thread inside a new, private network namespace, which dies with the
/// thread. When namespaces cannot be created, skips with a loud message, or fails under CI=true.
pub fn in_private_netns(name: &str, test: impl FnOnce() + Send) {
    let entered = thread::scope(|s| {
        let t = s.spawn(|| {
            unshare(CloneFlags::CLONE_NEWNET)?;
            test();
            Ok::<(), nix::Error>(())
        });
        match t.join() {
            Ok(r) => r,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    });
    if let Err(errno) = entered {
        let why = format!("{name}: cannot create a network namespace ({errno}); needs root");
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{why} (CI=true: privileged tests must run)");
        }
        // Straight to stderr: eprintln! would be swallowed by the harness for a passing test.
        let _ = writeln!(io::stderr(), "!!! SKIPPED privileged test {why}");
    }
}

/// A second private namespace (a "pod"), pinned by the returned handle. Its thread exits at
/// once; the open fd keeps the namespace alive until the handle is dropped.
pub fn new_netns() -> NetnsHandle {
    thread::spawn(|| {
        unshare(CloneFlags::CLONE_NEWNET).expect("unshare a pod netns");
        NetnsHandle::current_thread().expect("open the pod netns")
    })
    .join()
    .expect("pod netns thread")
}

/// A socket in the calling thread's namespace, with `lo` up.
pub fn rtnl() -> Rtnl {
    let mut rtnl = Rtnl::open().expect("open rtnl");
    let lo = rtnl.link_by_name("lo").expect("get lo").expect("lo exists");
    rtnl.set_up(lo.index).expect("set lo up");
    rtnl
}
