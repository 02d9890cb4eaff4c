//! Where knid serves its metrics over HTTP (`metrics_addr`): nowhere unless configured, and on
//! loopback unless an address says otherwise, since the exposition is unauthenticated.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use super::Config;
use crate::error::{Error, Result};

impl Config {
    /// The HTTP `/metrics` listener's address, if `metrics_addr` is set: `"9584"` or `":9584"`
    /// means 127.0.0.1:9584; otherwise an `ip:port` (`"[::1]:9584"`). Errors name the key.
    pub fn metrics_addr(&self) -> Result<Option<SocketAddr>> {
        let Some(text) = self.metrics_addr.as_deref() else {
            return Ok(None);
        };
        let bad = |rule: &str| Error::Config(format!("metrics_addr: {text:?} {rule}"));
        let port_only = text.strip_prefix(':').unwrap_or(text);
        let addr = match port_only.parse::<u16>() {
            Ok(port) => SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port),
            Err(_) => text.parse::<SocketAddr>().map_err(|_| {
                bad("is not a port, \":port\" or \"ip:port\" (e.g. \"127.0.0.1:9584\")")
            })?,
        };
        if addr.port() == 0 {
            return Err(bad("needs a port other than 0"));
        }
        Ok(Some(addr))
    }
}

#[cfg(test)]
mod tests;
