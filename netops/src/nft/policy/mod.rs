//! The data plane of Kubernetes NetworkPolicy: one `inet` table whose forward chain decides
//! each new connection between pods with a fixed number of set lookups, whatever the number
//! of pods and policies.
//!
//! ```text
//! forward (filter, hook forward, priority 0, policy accept)
//!   ct state established,related accept
//!   meta nfproto ipv4 jump policy4            (ipv6: policy6, the same with ip6)
//! policy4                                   (policy6 first accepts neighbour discovery)
//!   ip saddr @egress-isolated4 jump egress4
//!   ip daddr @ingress-isolated4 jump ingress4
//! egress4
//!   ip saddr . ip daddr @egress-any4 return
//!   ip saddr . ip daddr . meta l4proto . th dport @egress-ports4 return
//!   ip saddr vmap @egress-drops4              (pod -> goto drop-egress-<pod>: counter drop)
//!   drop
//! ingress4: the same with the pod as `ip daddr` and the peer as `ip saddr`.
//! ```
//!
//! The `any` and `ports` sets are concatenated interval sets (the kernel's pipapo backend),
//! which refuse overlapping elements: [`PolicyState::normalized`] makes them disjoint.
//! Policy applies to new connections: an established one goes on after a change denies it
//! (its conntrack entry is not deleted). Only forwarded traffic is filtered: the node's own
//! traffic to and from its pods passes. Pods on one bridge are filtered only while
//! br_netfilter hands bridged frames to the inet hooks (`net.bridge.bridge-nf-call-iptables`
//! and `-ip6tables`, on by default in a namespace, or the bridge's own `nf_call_iptables`).

use std::collections::BTreeSet;
use std::net::IpAddr;

use super::wire::{
    attrs, Attrs, NFTA_COUNTER_BYTES, NFTA_COUNTER_PACKETS, NFTA_EXPR_DATA, NFTA_EXPR_NAME,
    NFTA_RULE_CHAIN, NFTA_RULE_EXPRESSIONS, NFTA_RULE_TABLE, NFT_MSG_GETRULE,
};
use super::{cstr, ruleset, Nft};
use crate::error::Result;

mod normalize;
mod state;
mod table;

pub use state::{Allow, Direction, PolicyDrops, PolicyState, PortRange};

/// How many times [`Nft::policy_state`] reads again when a set vanished under its read.
const REREADS: u32 = 3;

impl Nft {
    /// Creates or replaces table `inet <table>` with exactly `state`, in one transaction:
    /// packets see the old table or the new one, never none. The drop counters start at zero.
    /// An allow whose pod and peers differ in family, whose range is reversed, or whose ports
    /// are not of TCP, UDP or SCTP is refused before anything is sent.
    pub fn replace_policy(&mut self, table: &str, state: &PolicyState) -> Result<()> {
        const OP: &str = "replace policy table";
        state.check(OP, table)?;
        self.transact(&table::replace(table, &state.normalized()), OP, &table)
    }

    /// Moves table `table` from `from` (what was last installed) to `to` by adding and
    /// removing only the elements and drop chains that differ, in one transaction (removals
    /// first). The counters of pods isolated in both keep counting. When the table does not
    /// hold `from`, the kernel refuses (ENOENT) and nothing changes: replace it then.
    pub fn update_policy(
        &mut self,
        table: &str,
        from: &PolicyState,
        to: &PolicyState,
    ) -> Result<()> {
        const OP: &str = "update policy table";
        to.check(OP, table)?;
        // Normalizing works pod by pod and direction by direction: only those whose allows
        // differ can differ once normalized (a 20,000-allow state takes ~15 ms whole).
        let touched: BTreeSet<(Direction, IpAddr)> = from
            .allows
            .symmetric_difference(&to.allows)
            .map(|a| (a.direction, a.pod))
            .collect();
        let part = |s: &PolicyState| {
            PolicyState {
                isolated: s.isolated.clone(),
                allows: s
                    .allows
                    .iter()
                    .filter(|a| touched.contains(&(a.direction, a.pod)))
                    .copied()
                    .collect(),
            }
            .normalized()
        };
        let requests = table::changes(table, &part(from), &part(to));
        if requests.is_empty() {
            return Ok(());
        }
        self.transact(&requests, OP, &table)
    }

    /// What table `table` holds, normalized; `None` when it does not exist. A pod counts as
    /// isolated when both its isolation element and its drop counter's map element are in.
    pub fn policy_state(&mut self, table: &str) -> Result<Option<PolicyState>> {
        // The table and its sets are separate requests: a table replaced between them (one
        // transaction, knid's repair or anyone's) can make a set's read find nothing. The
        // whole read starts again then; a table that is gone is `None`, not an error.
        let mut again = REREADS;
        loop {
            match self.read_policy_state(table) {
                Err(e) if e.is_not_found() && again > 0 => again -= 1,
                read => return read,
            }
        }
    }

    /// One read of [`Nft::policy_state`].
    fn read_policy_state(&mut self, table: &str) -> Result<Option<PolicyState>> {
        const OP: &str = "list policy table";
        match self.query(&ruleset::get_table(table), false, OP, table) {
            Err(e) if e.is_not_found() => return Ok(None),
            other => other?,
        };
        let mut state = PolicyState::default();
        for v6 in [false, true] {
            for direction in Direction::ALL {
                let set = |kind| table::set_name(kind, direction, v6);
                let isolated = self.dump_set(table, &set(table::SetKind::Isolated), OP)?;
                let counted = self.dump_set(table, &set(table::SetKind::Drops), OP)?;
                let counted: BTreeSet<Vec<u8>> = counted.into_iter().map(|e| e.key).collect();
                state.isolated.extend(
                    isolated
                        .into_iter()
                        .filter(|e| counted.contains(&e.key))
                        .filter_map(|e| table::addr_from(&e.key, v6))
                        .map(|pod| (direction, pod)),
                );
                for kind in [table::SetKind::Any, table::SetKind::Ports] {
                    for e in self.dump_set(table, &set(kind), OP)? {
                        let allow = table::allow_from(kind, direction, v6, &e);
                        state.allows.extend(allow);
                    }
                }
            }
        }
        Ok(Some(state.normalized()))
    }

    /// The drop counter of each isolated pod and direction of table `table`; empty when the
    /// table does not exist.
    pub fn policy_drops(&mut self, table: &str) -> Result<Vec<PolicyDrops>> {
        let mut a = Attrs::default();
        a.str(NFTA_RULE_TABLE, table);
        let msgs = match self.query(
            &ruleset::request(NFT_MSG_GETRULE, 0, a),
            true,
            "list policy drop counters",
            table,
        ) {
            Err(e) if e.is_not_found() => return Ok(Vec::new()),
            other => other?,
        };
        let mut out = Vec::new();
        for msg in msgs {
            let (mut in_table, mut owner, mut counts) = (false, None, None);
            for (kind, value) in attrs(&msg) {
                match kind {
                    NFTA_RULE_TABLE => in_table = cstr(value) == table,
                    NFTA_RULE_CHAIN => owner = table::drop_chain_owner(&cstr(value)),
                    NFTA_RULE_EXPRESSIONS => counts = counter_of(value),
                    _ => {}
                }
            }
            if let (true, Some((direction, pod)), Some((packets, bytes))) =
                (in_table, owner, counts)
            {
                out.push(PolicyDrops {
                    direction,
                    pod,
                    packets,
                    bytes,
                });
            }
        }
        out.sort();
        Ok(out)
    }
}

/// (packets, bytes) of the `counter` among a rule's expressions.
fn counter_of(list: &[u8]) -> Option<(u64, u64)> {
    attrs(list).find_map(|(_, one)| {
        let mut name = String::new();
        let mut data: &[u8] = &[];
        for (k, v) in attrs(one) {
            match k {
                NFTA_EXPR_NAME => name = cstr(v),
                NFTA_EXPR_DATA => data = v,
                _ => {}
            }
        }
        if name != "counter" {
            return None;
        }
        let (mut packets, mut bytes) = (0, 0);
        for (k, v) in attrs(data) {
            let n = v.try_into().ok().map(u64::from_be_bytes);
            match k {
                NFTA_COUNTER_PACKETS => packets = n?,
                NFTA_COUNTER_BYTES => bytes = n?,
                _ => {}
            }
        }
        Some((packets, bytes))
    })
}

#[cfg(test)]
mod tests;
