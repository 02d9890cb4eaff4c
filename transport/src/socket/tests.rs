use super::*;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;

fn sock_path(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("run/knid/knid.sock")
}

#[test]
fn missing_directory_is_created_0750_and_socket_gets_mode_and_group() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = sock_path(&dir);
    let listener = bind_listener(&path, 0o660, Some(4242)).expect("bind");
    let parent = path.parent().expect("parent");
    let dir_mode = fs::metadata(parent).expect("stat dir").mode() & 0o777;
    // The umask may only remove bits.
    assert_eq!(dir_mode & !DIR_MODE, 0, "dir mode {dir_mode:o}");
    let meta = fs::metadata(&path).expect("stat socket");
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.mode() & 0o777, 0o660);
    assert_eq!(meta.gid(), 4242);
    UnixStream::connect(&path).expect("connect to the new socket");
    drop(listener);
}

#[test]
fn stale_socket_is_replaced() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = sock_path(&dir);
    fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    // A bound then dropped listener leaves the socket file behind with nobody listening.
    drop(UnixListener::bind(&path).expect("bind old"));
    assert!(
        UnixStream::connect(&path).is_err(),
        "old socket still answers"
    );

    let listener = bind_listener(&path, 0o660, None).expect("replace stale socket");
    UnixStream::connect(&path).expect("connect to the new socket");
    drop(listener);
}

#[test]
fn socket_that_accepts_but_never_answers_is_stale() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = sock_path(&dir);
    fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    // Listening but never accepting: connect succeeds via the backlog, Status times out.
    let mute = UnixListener::bind(&path).expect("bind mute");
    let started = std::time::Instant::now();
    let listener = bind_listener(&path, 0o660, None).expect("replace mute socket");
    assert!(started.elapsed() >= PROBE_TIMEOUT);
    drop((mute, listener));
}

#[test]
fn a_world_writable_directory_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::set_permissions(dir.path(), Permissions::from_mode(0o1777)).expect("chmod");
    let err = bind_listener(&dir.path().join("knid.sock"), 0o660, None)
        .expect_err("world-writable dir accepted");
    assert!(
        matches!(err, SocketError::UnsafeDir { mode: 0o1777, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("chmod o-w"), "{err}");
    assert!(!dir.path().join("knid.sock").exists());
}

#[test]
fn regular_file_is_refused_and_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("knid.sock");
    fs::write(&path, b"precious").expect("write file");
    let err = bind_listener(&path, 0o660, None).expect_err("regular file accepted");
    assert!(matches!(err, SocketError::NotSocket { .. }), "{err:?}");
    assert_eq!(fs::read(&path).expect("read file"), b"precious");
}

#[test]
fn live_ttrpc_server_is_refused_even_without_services() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = sock_path(&dir);
    fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    let mut server = ttrpc::Server::new()
        .bind(&format!("unix://{}", path.display()))
        .expect("bind ttrpc server");
    server.start().expect("start ttrpc server");

    let err = bind_listener(&path, 0o660, None).expect_err("live socket replaced");
    assert!(matches!(err, SocketError::InUse { .. }), "{err:?}");
    assert!(fs::symlink_metadata(&path).is_ok(), "live socket removed");
    server.shutdown();
}
