//! CNI spec versions knid speaks: 0.3.1 through 1.1.0.

use std::fmt;

use crate::cni::error::{CniError, INCOMPATIBLE_VERSION};

/// A supported CNI spec version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Version {
    /// 0.3.0 (same result format as 0.3.1).
    V0_3_0,
    /// 0.3.1.
    V0_3_1,
    /// 0.4.0: CHECK, prevResult on DEL.
    V0_4_0,
    /// 1.0.0: lists only, no `version` in `ips`.
    V1_0_0,
    /// 1.1.0: STATUS, GC, route and interface extras.
    V1_1_0,
}

/// Every supported version, oldest first (VERSION's `supportedVersions`).
pub const SUPPORTED: [Version; 5] = [
    Version::V0_3_0,
    Version::V0_3_1,
    Version::V0_4_0,
    Version::V1_0_0,
    Version::V1_1_0,
];

impl Version {
    /// The newest version knid speaks.
    pub const LATEST: Version = Version::V1_1_0;

    /// Parses a `cniVersion` value; an unsupported one is error code 1 naming it.
    pub fn parse(text: &str) -> Result<Self, CniError> {
        SUPPORTED
            .into_iter()
            .find(|v| v.as_str() == text)
            .ok_or_else(|| {
                CniError::new(
                    INCOMPATIBLE_VERSION,
                    format!(
                        "unsupported cniVersion {text:?}: knid supports {}",
                        supported_list()
                    ),
                )
            })
    }

    /// The spelling in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::V0_3_0 => "0.3.0",
            Self::V0_3_1 => "0.3.1",
            Self::V0_4_0 => "0.4.0",
            Self::V1_0_0 => "1.0.0",
            Self::V1_1_0 => "1.1.0",
        }
    }

    /// Whether CHECK exists (0.4.0 and later).
    pub fn has_check(self) -> bool {
        self >= Self::V0_4_0
    }

    /// Whether STATUS and GC exist (1.1.0).
    pub fn has_status_and_gc(self) -> bool {
        self >= Self::V1_1_0
    }

    /// Whether result `ips` carry a `version` field (before 1.0.0).
    pub fn ips_carry_version(self) -> bool {
        self < Self::V1_0_0
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `0.3.0, 0.3.1, …` for messages.
pub fn supported_list() -> String {
    SUPPORTED.map(Version::as_str).join(", ")
}

#[cfg(test)]
mod tests;
