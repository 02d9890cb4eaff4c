//! The compiled rules as the kernel's policy table holds them.

use knid_netops::nft::{Allow, PolicyState, PortRange};

use super::compile::Compiled;

/// The table's content for `compiled` (normalized: what the kernel reads back).
pub fn state(compiled: &Compiled) -> PolicyState {
    let state = PolicyState {
        isolated: compiled.isolated.clone(),
        allows: compiled
            .grants
            .iter()
            .filter(|g| compiled.isolated.contains(&(g.direction, g.pod)))
            .map(|g| Allow {
                direction: g.direction,
                pod: g.pod,
                peers: g.peers,
                ports: g.ports.map(|(protocol, first, last)| PortRange {
                    protocol,
                    first,
                    last,
                }),
            })
            .collect(),
    };
    state.normalized()
}
