//! Who may call knid's socket and how much one caller may ask of it (docs/security.md#limits-of-the-api-server).

use std::time::Duration;

use super::{parse_duration, Config};
use crate::error::{Error, Result};

/// ttrpc's own cap on a message; knid's `max_request_bytes` may only be smaller.
pub const TTRPC_MESSAGE_MAX: usize = 4 << 20;
/// The smallest `max_request_bytes`: room for the largest valid Attach's header fields.
pub const MIN_REQUEST_BYTES: usize = 4 << 10;

pub(super) fn default_allowed_uids() -> Vec<u32> {
    vec![0]
}
pub(super) fn default_max_connections() -> usize {
    1024
}
pub(super) fn default_max_request_bytes() -> usize {
    1 << 20
}
/// `request_timeout`'s default, in seconds.
const DEFAULT_REQUEST_TIMEOUT_SECS: u64 = 120;

pub(super) fn default_request_timeout() -> String {
    format!("{DEFAULT_REQUEST_TIMEOUT_SECS}s")
}

/// The API socket's access rule and limits, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiSettings {
    /// Peer uids let in (SO_PEERCRED).
    pub allowed_uids: Vec<u32>,
    /// Peer primary gids let in, whatever the uid.
    pub allowed_gids: Vec<u32>,
    /// Connections held open at once; more are accepted and closed at once.
    pub max_connections: usize,
    /// Largest request frame; larger ones are answered ResourceExhausted and discarded.
    pub max_request_bytes: usize,
    /// Deadline of a request that carries none, and the longest one a request may carry.
    pub request_timeout: Duration,
}

impl ApiSettings {
    /// Whether a peer with `uid` and primary `gid` may call knid.
    pub fn allows(&self, uid: u32, gid: u32) -> bool {
        self.allowed_uids.contains(&uid) || self.allowed_gids.contains(&gid)
    }
}

impl Default for ApiSettings {
    fn default() -> Self {
        Self {
            allowed_uids: default_allowed_uids(),
            allowed_gids: Vec::new(),
            max_connections: default_max_connections(),
            max_request_bytes: default_max_request_bytes(),
            request_timeout: Duration::from_secs(DEFAULT_REQUEST_TIMEOUT_SECS),
        }
    }
}

impl Config {
    /// The API socket's settings, each checked; errors name the key and the rule.
    pub fn api(&self) -> Result<ApiSettings> {
        let bad = |key: &str, rule: String| Error::Config(format!("{key}: {rule}"));
        if self.allowed_uids.is_empty() && self.allowed_gids.is_empty() {
            return Err(bad(
                "allowed_uids",
                "allowed_uids and allowed_gids are both empty: nobody could call knid".into(),
            ));
        }
        if self.max_connections == 0 || self.max_connections > 65_536 {
            return Err(bad(
                "max_connections",
                format!("{} must be 1..=65536", self.max_connections),
            ));
        }
        if !(MIN_REQUEST_BYTES..=TTRPC_MESSAGE_MAX).contains(&self.max_request_bytes) {
            return Err(bad(
                "max_request_bytes",
                format!(
                    "{} must be {MIN_REQUEST_BYTES}..={TTRPC_MESSAGE_MAX} (ttrpc's own cap)",
                    self.max_request_bytes
                ),
            ));
        }
        let request_timeout = parse_duration(&self.request_timeout).map_err(|rule| {
            bad(
                "request_timeout",
                format!("{:?} {rule}", self.request_timeout),
            )
        })?;
        if request_timeout.is_zero() {
            return Err(bad("request_timeout", "must be more than 0".into()));
        }
        Ok(ApiSettings {
            allowed_uids: self.allowed_uids.clone(),
            allowed_gids: self.allowed_gids.clone(),
            max_connections: self.max_connections,
            max_request_bytes: self.max_request_bytes,
            request_timeout,
        })
    }
}

#[cfg(test)]
mod tests;
