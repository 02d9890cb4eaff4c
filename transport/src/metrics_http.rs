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
mod tests;
