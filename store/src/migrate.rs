//! The store's schema versions and the migrations between them. `meta/schema` names the version
//! a store was written in; a build reads every version from [`OLDEST_READABLE`] up to
//! [`crate::SCHEMA_VERSION`], migrating an older store forward at open, in one sled transaction
//! (all of a migration or none of it survives a crash), and refuses a newer one untouched.
//!
//! - 1 → 2: the `networks` tree ([`crate::NetworkRecord`]), the subnets each network last
//!   applied. A schema 1 store never recorded them, so the migration reads them off the
//!   attachments' addresses (`10.244.1.7/24` with its gateway: subnet `10.244.1.0/24`), which
//!   is what a network's pods were given out of.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use protobuf::Message;
use sled::transaction::{ConflictableTransactionError, TransactionError};
use sled::{Db, Transactional, Tree};

use crate::codec;
use crate::error::{Error, Result};
use crate::keys;
use crate::schema::{AttachmentRecord, NetworkRecord};
use crate::SCHEMA_VERSION;

/// The oldest schema this build migrates forward.
pub const OLDEST_READABLE: u32 = 1;

/// Where a migration stands, for a test's hook ([`crate::StoreConfig::on_migration_step`]):
/// called before anything is written, then once the migration's transaction is applied and
/// before it is flushed.
pub const STEPS: [&str; 2] = ["store.migrating", "store.migrated"];

/// Brings a store of schema `found` up to [`SCHEMA_VERSION`], or refuses it.
pub(crate) fn to_current(
    db: &Db,
    meta: &Tree,
    found: u32,
    on_step: Option<fn(&'static str)>,
) -> Result<()> {
    if found == SCHEMA_VERSION {
        return Ok(());
    }
    if !(OLDEST_READABLE..SCHEMA_VERSION).contains(&found) {
        return Err(Error::Schema {
            found,
            supported: SCHEMA_VERSION,
            oldest: OLDEST_READABLE,
        });
    }
    let step = |name| {
        if let Some(hook) = on_step {
            hook(name);
        }
    };
    step(STEPS[0]);
    log::warn!("store: migrating schema {found} to {SCHEMA_VERSION}");
    // Only 1 → 2 exists; a later version adds its step after this one, each in its own
    // transaction that also moves `meta/schema` one version on.
    let derived = networks_of_attachments(&db.open_tree(keys::ATTACHMENTS)?)?;
    let networks = db.open_tree(keys::NETWORKS)?;
    let mut writes = Vec::with_capacity(derived.len());
    for rec in derived.values() {
        writes.push((
            rec.name.clone(),
            codec::encode(rec, keys::NETWORKS, &rec.name)?,
        ));
    }
    let version = 2u32.to_be_bytes();
    (meta, &networks)
        .transaction(|(meta, networks)| {
            for (name, bytes) in &writes {
                networks.insert(name.as_bytes(), bytes.as_slice())?;
            }
            meta.insert(keys::META_SCHEMA, &version)?;
            Ok::<(), ConflictableTransactionError<()>>(())
        })
        .map_err(|e| match e {
            TransactionError::Storage(e) => Error::Sled(e),
            TransactionError::Abort(()) => Error::Corrupt {
                detail: "the schema migration aborted".to_owned(),
            },
        })?;
    step(STEPS[1]);
    db.flush()?;
    log::warn!(
        "store: migrated schema {found} to {SCHEMA_VERSION}: subnets of {} network(s) read off \
         their attachments{}",
        derived.len(),
        derived
            .values()
            .map(|r| format!(" ({}: {})", r.name, r.subnets.join(", ")))
            .collect::<String>()
    );
    Ok(())
}

/// Each network's subnets as its attachments' addresses spell them: one per family, with its
/// gateway. A family whose addresses disagree (two subnets), or that has only host routes
/// (/32, /128: a routed network), gives nothing.
fn networks_of_attachments(attachments: &Tree) -> Result<BTreeMap<String, NetworkRecord>> {
    // network → family (false: IPv4) → the (subnet, gateway) pairs seen
    let mut seen: BTreeMap<String, BTreeMap<bool, BTreeSet<(String, String)>>> = BTreeMap::new();
    for entry in attachments.iter() {
        let (key, value) = entry?;
        // An undecodable record is start-up recovery's to report; here it gives nothing.
        let Ok(rec) = AttachmentRecord::parse_from_bytes(&value) else {
            log::warn!(
                "store: migration skips undecodable attachment {}",
                String::from_utf8_lossy(&key)
            );
            continue;
        };
        for ip in &rec.ips {
            if ip.gateway.is_empty() {
                continue;
            }
            let Some((subnet, v6)) = subnet_of(&ip.address) else {
                continue;
            };
            seen.entry(rec.network.clone())
                .or_default()
                .entry(v6)
                .or_default()
                .insert((subnet, ip.gateway.clone()));
        }
    }
    let mut out = BTreeMap::new();
    for (name, families) in seen {
        let mut rec = NetworkRecord::new();
        rec.name = name.clone();
        rec.source = "migration".to_owned();
        rec.updated_at_ms = now_ms();
        for (v6, subnets) in families {
            if subnets.len() != 1 {
                log::warn!(
                    "store: migration: network {name}'s IPv{} addresses lie in {} subnets; \
                     none is recorded",
                    if v6 { 6 } else { 4 },
                    subnets.len()
                );
                continue;
            }
            for (subnet, gateway) in subnets {
                rec.subnets.push(subnet);
                rec.gateways.push(gateway);
            }
        }
        if !rec.subnets.is_empty() {
            out.insert(name, rec);
        }
    }
    Ok(out)
}

/// The subnet of an interface address in CIDR form (`10.244.1.7/24` → `10.244.1.0/24`) and
/// whether it is IPv6; `None` for a host route's prefix or text that is no CIDR.
pub(crate) fn subnet_of(cidr: &str) -> Option<(String, bool)> {
    let (addr, prefix) = cidr.split_once('/')?;
    let addr: IpAddr = addr.parse().ok()?;
    let prefix: u32 = prefix.parse().ok()?;
    let network = match addr {
        IpAddr::V4(a) if prefix < 32 => {
            let mask = u32::MAX.checked_shl(32 - prefix).unwrap_or(0);
            IpAddr::from((u32::from(a) & mask).to_be_bytes())
        }
        IpAddr::V6(a) if prefix < 128 => {
            let mask = u128::MAX.checked_shl(128 - prefix).unwrap_or(0);
            IpAddr::from((u128::from(a) & mask).to_be_bytes())
        }
        _ => return None,
    };
    Some((format!("{network}/{prefix}"), addr.is_ipv6()))
}

/// Milliseconds since the Unix epoch, for records' `updated_at_ms`.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests;
