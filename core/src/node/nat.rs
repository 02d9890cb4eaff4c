//! knid's own nf_tables table (`inet knid`): egress masquerade per network and the host ports
//! of the pods, rebuilt whole at start-up, on reload and by SetupNodeNetwork, in one
//! transaction that touches no other table (docs/architecture.md#nat-and-host-ports).

use knid_netops::nft::{Nft, PortMap, Ruleset, TableContents};

use crate::config::{Driver, Network};
use crate::error::{Error, Result};

/// The name of knid's table, family `inet`.
pub const TABLE: &str = "knid";

/// A socket to nf_tables in knid's own (the host's) netns: the calling thread's.
pub(crate) fn host_nft() -> Result<Nft> {
    Nft::open().map_err(|e| Error::kernel("open nf_tables socket", e))
}

/// The table `networks` and the recorded `port_maps` call for.
pub fn ruleset<'a>(
    networks: impl IntoIterator<Item = &'a Network>,
    port_maps: Vec<PortMap>,
) -> Ruleset {
    let mut masquerade = Vec::new();
    let mut hairpin_sources = Vec::new();
    let mut networks: Vec<&Network> = networks.into_iter().collect();
    networks.sort_by(|a, b| a.name.cmp(&b.name));
    for net in &networks {
        if matches!(net.driver, Driver::Bridge { .. } | Driver::Routed) {
            hairpin_sources.extend(net.subnets.iter().map(|(n, _)| *n));
        }
    }
    // Pods of the node reach each other with their own addresses, whatever their networks.
    for net in networks {
        masquerade.extend(net.masquerade_rule(&hairpin_sources));
    }
    Ruleset {
        table: TABLE.to_owned(),
        masquerade,
        hairpin_sources,
        port_maps,
    }
}

/// Replaces knid's table by what `networks` and `port_maps` call for.
pub(crate) fn apply<'a>(
    nft: &mut Nft,
    networks: impl IntoIterator<Item = &'a Network>,
    port_maps: Vec<PortMap>,
) -> Result<()> {
    let ruleset = ruleset(networks, port_maps);
    nft.replace(&ruleset)
        .map_err(|e| Error::kernel(format!("set up nf_tables table inet {TABLE}"), e))?;
    log::info!(
        "nf_tables table inet {TABLE}: {} masqueraded network(s), {} host port(s)",
        ruleset.masquerade.len(),
        ruleset.port_maps.len()
    );
    Ok(())
}

/// knid's table as the kernel has it now (its chains and host-port elements), `None` when it
/// does not exist: what Check and the reconciler compare the recorded host ports with.
pub(crate) fn read() -> Result<Option<TableContents>> {
    host_nft()?
        .table(TABLE)
        .map_err(|e| Error::kernel(format!("read nf_tables table inet {TABLE}"), e))
}
