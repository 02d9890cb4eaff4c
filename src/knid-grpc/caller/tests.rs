use super::*;

const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0
   1: 0100007F:D431 0100007F:1F90 01 00000000:00000000 00:00000000 00000000 65534        0 2 1 0 20 4 30 10 -1
";

const TCP6: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:C350 00000000000000000000000001000000:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 3 1 0 20 4 30 10 -1
   1: 0000000000000000FFFF00000100007F:C844 0000000000000000FFFF00000100007F:B80F 01 00000000:00000000 00:00000000 00000000     0        0 4 1 0 20 4 30 10 -1
";

fn addr(text: &str) -> SocketAddr {
    text.parse().expect("socket address")
}

#[test]
fn a_loopback_peer_is_named_by_the_uid_owning_its_socket() {
    let peer = addr("127.0.0.1:54321");
    let ours = addr("127.0.0.1:8080");
    assert_eq!(uid_in_table(TCP, peer, ours), Some(65534));
    assert_eq!(uid_in_table(TCP, ours, peer), None, "direction matters");
    assert_eq!(
        uid_in_table(TCP6, addr("[::1]:50000"), addr("[::1]:8080")),
        Some(1000)
    );
    // An IPv6 socket connected to 127.0.0.1:47119, as grpcio's are.
    assert_eq!(
        uid_in_table(
            TCP6,
            addr("[::ffff:127.0.0.1]:51268"),
            addr("[::ffff:127.0.0.1]:47119")
        ),
        Some(0)
    );
}

#[test]
fn a_tcp_caller_needs_its_uid_in_allowed_uids() {
    let rule = ApiSettings {
        allowed_uids: vec![0],
        allowed_gids: vec![65534],
        ..ApiSettings::default()
    };
    let tcp = |uid| Caller::Tcp {
        addr: addr("127.0.0.1:1"),
        uid,
    };
    assert!(tcp(Some(0)).allowed(&rule));
    assert!(!tcp(Some(65534)).allowed(&rule), "no gid to match over TCP");
    assert!(!tcp(None).allowed(&rule), "unknown owner refused");
    let unix = Caller::Unix {
        pid: 1,
        uid: 7,
        gid: 65534,
    };
    assert!(unix.allowed(&rule), "a unix peer matches by gid too");
    assert_eq!(unix.to_string(), "pid 1 uid 7 gid 65534");
}
