//! One accepted gRPC connection: its socket, who is at the other end, and the ttrpc connection
//! to knid its calls go over. tonic hands [`GrpcConnection`] to every request of the connection;
//! when the connection ends, the last of them drops it and the ttrpc connection closes with it.

use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpStream, UnixStream};
use tonic::transport::server::Connected;

use crate::caller::Caller;
use crate::upstream::Upstream;

/// What every request of one gRPC connection knows about it.
pub struct GrpcConnection {
    /// Numbered in accept order, for the logs.
    pub id: u64,
    /// Who connected.
    pub caller: Caller,
    /// Where its calls go.
    pub upstream: Upstream,
}

/// An accepted socket, unix or loopback TCP, with its [`GrpcConnection`].
pub struct Accepted {
    stream: Stream,
    conn: Arc<GrpcConnection>,
}

enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Accepted {
    /// A unix-socket connection.
    pub fn unix(stream: UnixStream, id: u64, caller: Caller, knid: &Path) -> Self {
        Self::new(Stream::Unix(stream), id, caller, knid)
    }

    /// A TCP connection.
    pub fn tcp(stream: TcpStream, id: u64, caller: Caller, knid: &Path) -> Self {
        Self::new(Stream::Tcp(stream), id, caller, knid)
    }

    fn new(stream: Stream, id: u64, caller: Caller, knid: &Path) -> Self {
        Self {
            stream,
            conn: Arc::new(GrpcConnection {
                id,
                caller,
                upstream: Upstream::new(knid),
            }),
        }
    }
}

impl Connected for Accepted {
    type ConnectInfo = Arc<GrpcConnection>;

    fn connect_info(&self) -> Self::ConnectInfo {
        Arc::clone(&self.conn)
    }
}

impl AsyncRead for Accepted {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match &mut self.get_mut().stream {
            Stream::Unix(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tcp(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Accepted {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().stream {
            Stream::Unix(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tcp(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().stream {
            Stream::Unix(s) => Pin::new(s).poll_flush(cx),
            Stream::Tcp(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().stream {
            Stream::Unix(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tcp(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}
