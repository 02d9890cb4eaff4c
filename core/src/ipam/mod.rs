//! IP address management: one address per family per interface, round-robin from a cursor so a
//! crash-looping pod does not get the same address back at once.
//!
//! The cursor itself lives in memory. What is persisted is a mark [`MARK_AHEAD`] addresses ahead
//! of it, written with the allocation that moves the cursor past the last one: the cursor never
//! passes the mark on disk, so after a restart the scan resumes after the mark, beyond every
//! address handed out before, and an attach writes the mark once in [`MARK_AHEAD`] allocations
//! instead of a cursor with each.
//!
//! The in-memory pools are the allocator; the store's `ipam/<network>` trees are the durable truth
//! they are loaded from. An allocation marks addresses used in memory first and the caller then
//! commits the reservations; a failed commit hands them back with [`Ipam::release`]. A release is
//! applied in memory only after the store commit, so memory never offers an address the store
//! still holds.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use ipnet::IpNet;
use knid_store::Owner;

use crate::config::Network;
use crate::error::{Error, Result};
use crate::locks::LockExt;
use crate::model::{Capacity, Family};

mod subnet;

pub use subnet::{first_host, is_assignable};
use subnet::{from_u128, host_range, to_u128};

/// One address handed to an interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The address with its subnet's prefix length.
    pub address: IpNet,
    /// The subnet's gateway.
    pub gateway: IpAddr,
}

/// How far ahead of the cursor a persisted mark is set, in addresses of the subnet.
pub const MARK_AHEAD: u128 = 64;

/// The result of [`Ipam::allocate`]: leases plus the cursor marks to persist with them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allocation {
    /// One lease per family of the network.
    pub leases: Vec<Lease>,
    /// New marks of the families whose cursor moved past its mark (allocated addresses only,
    /// not static ones).
    pub marks: Vec<IpAddr>,
}

struct Pool {
    subnet: IpNet,
    gateway: IpAddr,
    /// One `Arc` per interface, shared by its addresses of both families: the pools hold an
    /// entry per address of every attached pod.
    holders: HashMap<IpAddr, Arc<Owner>>,
    /// The last address allocated.
    cursor: Option<IpAddr>,
    /// The mark persisted ahead of the cursor; `None` until one is written after a load.
    mark: Option<IpAddr>,
}

/// The allocator of every network.
#[derive(Default)]
pub struct Ipam {
    pools: Mutex<HashMap<(String, Family), Pool>>,
}

impl Pool {
    fn total(&self) -> u64 {
        let (first, last) = host_range(&self.subnet);
        // Minus the gateway when it is one of the subnet's (a routed network's link-local
        // gateway is not); saturate for IPv6 /64s.
        let hosts = last - first + 1;
        let gateway = u128::from(is_assignable(&self.subnet, self.gateway));
        u64::try_from(hosts - gateway).unwrap_or(u64::MAX)
    }

    fn family(&self) -> Family {
        Family::of(&self.subnet.addr())
    }

    fn is_free(&self, addr: IpAddr) -> bool {
        addr != self.gateway && !self.holders.contains_key(&addr)
    }

    /// Where the scan for a free address starts: after the cursor, or at the first host.
    fn scan_start(&self) -> u128 {
        let (first, last) = host_range(&self.subnet);
        match self.cursor.filter(|c| is_assignable(&self.subnet, *c)) {
            Some(c) if to_u128(c) < last => to_u128(c) + 1,
            _ => first,
        }
    }

    /// Next free address after the cursor, wrapping once around the subnet.
    fn next_free(&self) -> Option<IpAddr> {
        let family = self.family();
        let (first, last) = host_range(&self.subnet);
        let start = self.scan_start();
        // Each address of the subnet is visited once: from the cursor to the end, then from the
        // start up to the cursor.
        (start..=last)
            .chain(first..start)
            .map(|value| from_u128(family, value))
            .find(|addr| self.is_free(*addr))
    }

    /// Moves the cursor to `addr`, found by [`Pool::next_free`]; returns the new mark to persist
    /// if the scan reached the mark (or none was written since the load).
    fn advance(&mut self, addr: IpAddr) -> Option<IpAddr> {
        let (first, last) = host_range(&self.subnet);
        let start = self.scan_start();
        // Position in the scan from `start`, which wraps from `last` to `first`.
        let scanned = |value: u128| {
            if value >= start {
                value - start
            } else {
                (last - start) + 1 + (value - first)
            }
        };
        let passed = match self.mark.filter(|m| is_assignable(&self.subnet, *m)) {
            Some(mark) => scanned(to_u128(mark)) <= scanned(to_u128(addr)),
            None => true,
        };
        self.cursor = Some(addr);
        if !passed {
            return None;
        }
        let hosts = (last - first).saturating_add(1);
        let (offset, step) = (to_u128(addr) - first, MARK_AHEAD % hosts);
        // `offset + step` wrapped within the subnet, without overflowing at the top of the
        // address space.
        let ahead = if hosts - offset > step {
            offset + step
        } else {
            step - (hosts - offset)
        };
        let mark = from_u128(self.family(), first + ahead);
        self.mark = Some(mark);
        Some(mark)
    }
}

impl Ipam {
    /// An allocator with no networks.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<(String, Family), Pool>> {
        // A panic while holding the lock cannot leave a pool half-updated (each update is one
        // insert or remove), so a poisoned lock is safe to reuse.
        self.pools.acquire()
    }

    /// Loads (or reloads) a network's pools from its reservations and the marks persisted ahead
    /// of its cursors (`marks`: the scan resumes after them). A reload of a subnet the network
    /// had keeps what its pool holds besides: an attach between its plan and its intent holds an
    /// address the store does not have yet, and the next attach must not get it again; an address
    /// a release has not returned yet goes when it does.
    pub fn load_network(
        &self,
        network: &Network,
        reservations: Vec<(IpAddr, Owner)>,
        marks: &[IpAddr],
    ) {
        // Each interface's owner once, whatever the number of its addresses.
        let mut owners: HashMap<Owner, Arc<Owner>> = HashMap::new();
        let mut holders: Vec<HashMap<IpAddr, Arc<Owner>>> =
            network.subnets.iter().map(|_| HashMap::new()).collect();
        for (addr, owner) in reservations {
            let Some(i) = network.subnets.iter().position(|(s, _)| s.contains(&addr)) else {
                continue;
            };
            let owner = match owners.get(&owner) {
                Some(shared) => Arc::clone(shared),
                None => {
                    let shared = Arc::new(owner.clone());
                    owners.insert(owner, Arc::clone(&shared));
                    shared
                }
            };
            holders[i].insert(addr, owner);
        }
        drop(owners);
        let mut pools = self.lock();
        for ((subnet, gateway), mut holders) in network.subnets.iter().zip(holders) {
            holders.shrink_to_fit();
            let family = Family::of(&subnet.addr());
            // The scan resumes after the persisted mark; the next allocation writes a new one.
            let (mut cursor, mut mark) = (marks.iter().copied().find(|m| subnet.contains(m)), None);
            if let Some(old) = pools.get(&(network.name.clone(), family)) {
                if old.subnet == *subnet {
                    for (addr, owner) in &old.holders {
                        holders.entry(*addr).or_insert_with(|| Arc::clone(owner));
                    }
                    // A reload keeps its place: the mark on disk is still ahead of it.
                    (cursor, mark) = (old.cursor, old.mark);
                }
            }
            pools.insert(
                (network.name.clone(), family),
                Pool {
                    subnet: *subnet,
                    gateway: *gateway,
                    holders,
                    cursor,
                    mark,
                },
            );
        }
    }

    /// Forgets a network's pools (it left the configuration and holds no address).
    pub fn remove_network(&self, network: &str) {
        self.lock().retain(|(name, _), _| name != network);
    }

    /// Allocates one address per family of `network` for `owner`. A static address replaces the
    /// allocation of its family. All or nothing: on error nothing stays marked.
    pub fn allocate(
        &self,
        network: &Network,
        owner: &Owner,
        static_ips: &[IpAddr],
    ) -> Result<Allocation> {
        let mut pools = self.lock();
        let mut out = Allocation::default();
        let mut marked: Vec<(Family, IpAddr)> = Vec::new();
        let shared = Arc::new(owner.clone());
        let result = (|| {
            for (subnet, _) in &network.subnets {
                let family = Family::of(&subnet.addr());
                let pool = pools
                    .get_mut(&(network.name.clone(), family))
                    .ok_or_else(|| {
                        Error::Unavailable(format!("network {} not loaded", network.name))
                    })?;
                let wanted = static_ips.iter().copied().find(|a| Family::of(a) == family);
                let addr = match wanted {
                    Some(addr) => {
                        if let Some(holder) = pool.holders.get(&addr) {
                            if **holder != *owner {
                                return Err(Error::AddressInUse {
                                    network: network.name.clone(),
                                    addr,
                                    holder: holder.sandbox_id.clone(),
                                });
                            }
                        } else if addr == pool.gateway {
                            return Err(Error::AddressInUse {
                                network: network.name.clone(),
                                addr,
                                holder: "gateway".to_owned(),
                            });
                        }
                        addr
                    }
                    None => {
                        let addr = pool.next_free().ok_or_else(|| Error::Exhausted {
                            network: network.name.clone(),
                            family: family.as_str(),
                        })?;
                        out.marks.extend(pool.advance(addr));
                        addr
                    }
                };
                pool.holders.insert(addr, Arc::clone(&shared));
                marked.push((family, addr));
                out.leases.push(Lease {
                    address: IpNet::new(addr, subnet.prefix_len())
                        .map_err(|e| Error::Config(e.to_string()))?,
                    gateway: pool.gateway,
                });
            }
            Ok(())
        })();
        if let Err(e) = result {
            for (family, addr) in marked {
                if let Some(pool) = pools.get_mut(&(network.name.clone(), family)) {
                    pool.holders.remove(&addr);
                    // A mark this allocation moved is not written.
                    pool.mark = None;
                }
            }
            return Err(e);
        }
        Ok(out)
    }

    /// Forgets the marks of `network`'s pools, for an allocation whose marks were not (or may
    /// not have been) written: the next allocation of each family writes one again.
    pub fn forget_marks(&self, network: &str) {
        for ((name, _), pool) in self.lock().iter_mut() {
            if name == network {
                pool.mark = None;
            }
        }
    }

    /// Hands addresses back (after the store released them).
    pub fn release(&self, network: &str, addrs: &[IpAddr]) {
        let mut pools = self.lock();
        for addr in addrs {
            if let Some(pool) = pools.get_mut(&(network.to_owned(), Family::of(addr))) {
                pool.holders.remove(addr);
            }
        }
    }

    /// Capacity per family of a network.
    pub fn capacity(&self, network: &str) -> Vec<Capacity> {
        let pools = self.lock();
        let mut out: Vec<Capacity> = pools
            .iter()
            .filter(|((name, _), _)| name == network)
            .map(|((_, family), pool)| {
                let total = pool.total();
                let used = pool.holders.len() as u64;
                Capacity {
                    family: *family,
                    total,
                    used,
                    free: total.saturating_sub(used),
                }
            })
            .collect();
        out.sort_by_key(|c| c.family);
        out
    }
}

#[cfg(test)]
mod tests;
