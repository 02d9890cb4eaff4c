//! IP reservations: who holds which address of a network.

use std::fmt;
use std::net::IpAddr;

use crate::schema::OwnerRecord;

/// The owner of one IP reservation.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Owner {
    /// Sandbox the address belongs to.
    pub sandbox_id: String,
    /// Interface inside that sandbox.
    pub ifname: String,
}

/// One reserved address of a network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    /// Network the address belongs to.
    pub network: String,
    /// The address.
    pub addr: IpAddr,
    /// Who holds it.
    pub owner: Owner,
}

impl Owner {
    /// The owner of addresses of interface `ifname` in sandbox `sandbox_id`.
    pub fn new(sandbox_id: impl Into<String>, ifname: impl Into<String>) -> Self {
        Owner {
            sandbox_id: sandbox_id.into(),
            ifname: ifname.into(),
        }
    }

    pub(crate) fn from_record(rec: OwnerRecord) -> Self {
        Owner {
            sandbox_id: rec.sandbox_id,
            ifname: rec.ifname,
        }
    }
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.sandbox_id, self.ifname)
    }
}
