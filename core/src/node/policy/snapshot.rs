//! The last known objects, kept in the store (`meta/policy`) so the policy table is rebuilt at
//! start-up before knid serves, whether or not the API server answers.

use serde::{Deserialize, Serialize};

use super::objects::{Key, PodInfo, Policy, World};
use super::selector::Labels;

/// The format of the recorded JSON.
const VERSION: u32 = 1;

/// [`World`] as recorded (JSON objects cannot have pair keys).
#[derive(Serialize, Deserialize)]
struct Recorded {
    version: u32,
    policies: Vec<Policy>,
    namespaces: Vec<(String, Labels)>,
    pods: Vec<(Key, PodInfo)>,
}

/// `world` as the store keeps it.
pub fn encode(world: &World) -> Vec<u8> {
    let recorded = Recorded {
        version: VERSION,
        policies: world.policies.values().cloned().collect(),
        namespaces: world
            .namespaces
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        pods: world
            .pods
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    };
    serde_json::to_vec(&recorded).unwrap_or_default()
}

/// The world recorded in `json`; an error names what cannot be read.
pub fn decode(json: &[u8]) -> Result<World, String> {
    let recorded: Recorded =
        serde_json::from_slice(json).map_err(|e| format!("meta/policy: {e}"))?;
    if recorded.version != VERSION {
        return Err(format!(
            "meta/policy: format {} (this knid reads {VERSION})",
            recorded.version
        ));
    }
    Ok(World {
        policies: recorded
            .policies
            .into_iter()
            .map(|p| (p.key(), p))
            .collect(),
        namespaces: recorded.namespaces.into_iter().collect(),
        pods: recorded.pods.into_iter().collect(),
    })
}
