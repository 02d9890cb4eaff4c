//! A node's VXLAN endpoint (VTEP) as the other nodes see it: its MAC, VNI and port, published
//! on its own Node as the `knid.io/vxlan` annotation, and its address per family (the first
//! address of its pod CIDR of that family, as flannel numbers them).

use std::net::IpAddr;

use ipnet::IpNet;
use knid_netops::Mac;
use serde::{Deserialize, Serialize};

use crate::model::MacAddr;

/// The annotation with a node's VXLAN endpoint.
pub const ANNOTATION: &str = "knid.io/vxlan";
/// The version of its JSON (its `version` field).
pub const VERSION: u32 = 1;

/// What a node publishes of its endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vtep {
    /// VNI.
    pub vni: u32,
    /// UDP port.
    pub port: u16,
    /// The MAC of its VXLAN devices.
    pub mac: Mac,
}

#[derive(Serialize, Deserialize)]
struct Json {
    version: u32,
    vni: u32,
    port: u16,
    mac: String,
}

impl Vtep {
    /// Node `node`'s endpoint: its MAC is derived from its name, so it stays the same across
    /// restarts, upgrades and a lost state directory.
    pub fn of(node: &str, vni: u32, port: u16) -> Vtep {
        let hash = crate::drivers::names::stable_hash(&["vtep", node]).to_be_bytes();
        Vtep {
            vni,
            port,
            // Locally administered, unicast.
            mac: [0x0a, hash[0], hash[1], hash[2], hash[3], hash[4]],
        }
    }

    /// The annotation's value: `{"version":1,"vni":1,"port":8472,"mac":"0a:.."}`.
    pub fn annotation(&self) -> String {
        serde_json::to_string(&Json {
            version: VERSION,
            vni: self.vni,
            port: self.port,
            mac: MacAddr(self.mac).to_string(),
        })
        .unwrap_or_default()
    }

    /// An annotation's value read back; what is wrong with it otherwise.
    pub fn parse(text: &str) -> Result<Vtep, String> {
        let json: Json = serde_json::from_str(text)
            .map_err(|e| format!("annotation {ANNOTATION} is not knid's VXLAN endpoint: {e}"))?;
        if json.version != VERSION {
            return Err(format!(
                "annotation {ANNOTATION} has version {}; this knid reads version {VERSION}",
                json.version
            ));
        }
        let mac = MacAddr::parse(&json.mac)
            .map_err(|e| format!("annotation {ANNOTATION}: mac {:?}: {}", json.mac, e.rule))?;
        Ok(Vtep {
            vni: json.vni,
            port: json.port,
            mac: mac.0,
        })
    }
}

/// A node's VTEP address in the family of `pod_cidr`: the CIDR's first address.
pub fn address(pod_cidr: &IpNet) -> IpAddr {
    pod_cidr.network()
}
