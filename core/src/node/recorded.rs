//! The subnets each network applies, kept in the store (`networks` tree) whenever they change,
//! so that what a network's pods were given out of survives a restart: the network marked
//! `pod_cidr_from_node` comes back with its pod CIDR before the Kubernetes API answers, and the
//! Node's pod CIDR, when it comes, is compared with it.

use std::collections::HashMap;

use ipnet::IpNet;
use knid_store::{NetworkRecord, Store};

use crate::config::Network;
use crate::error::{Error, Result};

/// Records the subnets of every network in `applied` whose record differs, and forgets the
/// records of networks that apply none or are gone (`held` names the networks still holding
/// addresses: their records stay, whatever they apply now).
pub(crate) fn save(
    store: &Store,
    applied: &HashMap<String, Network>,
    held: &[String],
) -> Result<()> {
    let recorded = store.networks()?;
    for net in applied.values() {
        if net.cni().is_some() {
            continue;
        }
        let subnets: Vec<String> = net.subnets.iter().map(|(s, _)| s.to_string()).collect();
        let gateways: Vec<String> = net.subnets.iter().map(|(_, g)| g.to_string()).collect();
        let old = recorded.iter().find(|r| r.name == net.name);
        if old.is_some_and(|r| r.subnets == subnets && r.gateways == gateways) {
            continue;
        }
        if subnets.is_empty() {
            if old.is_some() && !held.contains(&net.name) {
                store.remove_network(&net.name)?;
            }
            continue;
        }
        let mut rec = NetworkRecord::new();
        rec.name = net.name.clone();
        rec.subnets = subnets;
        rec.gateways = gateways;
        rec.source = if net.pod_cidr_from_node {
            "node"
        } else {
            "config"
        }
        .to_owned();
        rec.updated_at_ms = crate::model::now_ms();
        store.put_network(&rec)?;
    }
    for rec in &recorded {
        if !applied.contains_key(&rec.name) && !held.contains(&rec.name) {
            store.remove_network(&rec.name)?;
        }
    }
    Ok(())
}

/// The subnets network `name` last applied, as recorded; `None` when nothing is.
pub(crate) fn subnets(store: &Store, name: &str) -> Result<Option<Vec<IpNet>>> {
    match store.network(name)? {
        Some(rec) => parse(&rec.subnets, &format!("networks/{name}")).map(Some),
        None => Ok(None),
    }
}

/// The cluster's pod CIDRs cluster mode last recorded; `None` when it never did.
pub(crate) fn cluster_cidrs(store: &Store) -> Result<Option<Vec<IpNet>>> {
    match store.cluster_cidrs()? {
        Some(cidrs) => parse(&cidrs, "meta/cluster").map(Some),
        None => Ok(None),
    }
}

fn parse(cidrs: &[String], at: &str) -> Result<Vec<IpNet>> {
    cidrs
        .iter()
        .map(|s| {
            s.parse::<IpNet>().map_err(|e| {
                Error::Store(knid_store::Error::Corrupt {
                    detail: format!("{at} holds subnet {s:?}: {e}"),
                })
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
