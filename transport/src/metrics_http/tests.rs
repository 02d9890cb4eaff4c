use std::io::{Read, Write};
use std::net::TcpStream;

use super::*;

fn get(addr: SocketAddr, request: &str) -> String {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.write_all(request.as_bytes()).expect("write");
    let mut out = String::new();
    stream.read_to_string(&mut out).expect("read");
    out
}

#[test]
fn serves_metrics_and_refuses_other_paths_and_methods() {
    let loopback: SocketAddr = "127.0.0.1:0".parse().expect("addr");
    let listener =
        MetricsListener::start(loopback, || "knid_sandboxes 3\n".to_owned()).expect("start");
    let addr = listener.local_addr();
    assert_ne!(addr.port(), 0);

    let ok = get(
        addr,
        "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
    assert!(ok.contains("version=0.0.4"), "{ok}");
    assert!(ok.ends_with("knid_sandboxes 3\n"), "{ok}");

    let missing = get(addr, "GET /other HTTP/1.1\r\nConnection: close\r\n\r\n");
    assert!(missing.starts_with("HTTP/1.1 404"), "{missing}");
    let post = get(addr, "POST /metrics HTTP/1.1\r\nConnection: close\r\n\r\n");
    assert!(post.starts_with("HTTP/1.1 405"), "{post}");

    listener.stop();
    // tiny_http's accept thread leaves after the server is dropped: give it a moment.
    let closed = (0..100).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(10));
        TcpStream::connect(addr).is_err()
    });
    assert!(closed, "the port is closed once stopped");
}
