//! The optional plain-HTTP metrics listener (`metrics_addr`): `GET /metrics` answers the same
//! Prometheus text as the `Metrics` RPC. tiny_http parses HTTP on its own few threads; one knid
//! thread answers the requests it hands over, so a scrape never waits on the API's handlers.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use tiny_http::{Header, Method, Response, Server, StatusCode};

/// The Prometheus text format's content type.
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A running listener; [`MetricsListener::stop`] ends it.
pub struct MetricsListener {
    server: Arc<Server>,
    addr: SocketAddr,
    thread: Option<JoinHandle<()>>,
}

impl MetricsListener {
    /// Listens on `addr` and answers `GET /metrics` with `render()`.
    pub fn start(
        addr: SocketAddr,
        render: impl Fn() -> String + Send + 'static,
    ) -> io::Result<Self> {
        let server = Server::http(addr).map_err(|e| io::Error::other(e.to_string()))?;
        let bound = server
            .server_addr()
            .to_ip()
            .ok_or_else(|| io::Error::other("metrics listener has no IP address"))?;
        let server = Arc::new(server);
        let serving = Arc::clone(&server);
        let thread = std::thread::Builder::new()
            .name("knid-metrics".into())
            .spawn(move || serve(&serving, &render))?;
        Ok(Self {
            server,
            addr: bound,
            thread: Some(thread),
        })
    }

    /// The address it listens on (the port the kernel chose, for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops answering and joins the thread.
    pub fn stop(mut self) {
        self.server.unblock();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn serve(server: &Server, render: &dyn Fn() -> String) {
    // `recv` fails once `unblock` is called: the listener is stopping.
    while let Ok(request) = server.recv() {
        let path = request.url().split('?').next().unwrap_or_default();
        let response = match (request.method(), path) {
            (Method::Get | Method::Head, "/metrics") => {
                let mut response = Response::from_string(render());
                if let Ok(header) = Header::from_bytes("Content-Type", CONTENT_TYPE) {
                    response = response.with_header(header);
                }
                response
            }
            (Method::Get | Method::Head, _) => {
                Response::from_string("not found: knid serves /metrics only\n")
                    .with_status_code(StatusCode(404))
            }
            _ => Response::from_string("method not allowed\n").with_status_code(StatusCode(405)),
        };
        if let Err(e) = request.respond(response) {
            log::debug!("metrics: answer a scrape: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
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
}
