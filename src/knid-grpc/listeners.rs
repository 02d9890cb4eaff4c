//! The sockets knid-grpc accepts on: the unix socket always, a loopback TCP address when asked.
//! Each accepted peer is named and checked against knid's access rule before a single byte of
//! it is read; a refused peer is closed at once, as knid closes its own, and logged by name.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use knid_core::config::ApiSettings;
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::mpsc;

use crate::caller::{tcp_peer_uid, Caller};
use crate::connection::Accepted;

/// Pause after a failed accept (out of file descriptors): the next try would fail the same way.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// What the accept loops share: knid's access rule, its socket, the connection numbering and
/// where accepted connections go.
#[derive(Clone)]
pub struct Admission {
    rule: Arc<ApiSettings>,
    knid: PathBuf,
    next_id: Arc<AtomicU64>,
    accepted: mpsc::Sender<io::Result<Accepted>>,
}

impl Admission {
    /// Connections admitted under `rule`, forwarding to knid's socket `knid`, are sent to
    /// `accepted`.
    pub fn new(
        rule: ApiSettings,
        knid: PathBuf,
        accepted: mpsc::Sender<io::Result<Accepted>>,
    ) -> Self {
        Self {
            rule: Arc::new(rule),
            knid,
            next_id: Arc::new(AtomicU64::new(1)),
            accepted,
        }
    }

    /// Whether `caller` may call knid; logs the refusal naming it when not.
    fn admit(&self, caller: &Caller) -> Option<u64> {
        if !caller.allowed(&self.rule) {
            log::warn!(
                "grpc: refused connection from {caller}: neither the uid is in allowed_uids {:?} nor the gid in allowed_gids {:?}",
                self.rule.allowed_uids,
                self.rule.allowed_gids
            );
            return None;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        log::info!("grpc: connection {id} from {caller}");
        Some(id)
    }

    /// Accepts on the unix socket until the server stops taking connections.
    pub async fn serve_unix(self, listener: UnixListener) {
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(e) => {
                    log::warn!("grpc: accept on the unix socket: {e}");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            };
            let caller = match stream.peer_cred() {
                Ok(cred) => Caller::Unix {
                    pid: cred.pid().unwrap_or(0),
                    uid: cred.uid(),
                    gid: cred.gid(),
                },
                Err(e) => {
                    log::warn!(
                        "grpc: closing a connection whose peer is unknown (SO_PEERCRED: {e})"
                    );
                    continue;
                }
            };
            let Some(id) = self.admit(&caller) else {
                continue;
            };
            let accepted = Accepted::unix(stream, id, caller, &self.knid);
            if self.accepted.send(Ok(accepted)).await.is_err() {
                return;
            }
        }
    }

    /// Accepts on the loopback TCP listener until the server stops taking connections.
    pub async fn serve_tcp(self, listener: TcpListener, local: SocketAddr) {
        loop {
            let (stream, addr) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    log::warn!("grpc: accept on {local}: {e}");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            };
            // Bound to a loopback address, only this host can connect; its socket's owner is
            // the caller's uid.
            let caller = Caller::Tcp {
                addr,
                uid: tcp_peer_uid(addr, local),
            };
            let Some(id) = self.admit(&caller) else {
                continue;
            };
            let accepted = Accepted::tcp(stream, id, caller, &self.knid);
            if self.accepted.send(Ok(accepted)).await.is_err() {
                return;
            }
        }
    }
}
