//! Source-address guards of pod interfaces: `netdev`-family tables holding one base chain per
//! guarded host link (hooked at its ingress, so it sees every frame the pod sends before the
//! bridge or the routing does), named after the link, and one named counter per reason a frame
//! is dropped. A prefix's guards are spread over [`GUARD_TABLES`] tables ([`guard_table`]):
//! the kernel (to 6.18 at least) validates every base chain of a table when a transaction adds
//! a guard's rules, so one table of 5,000 guards made each install cost 18–25 ms.
//!
//! A chain's hook names its device: the kernel (6.16 on) accepts it before the device exists
//! and hooks it when a device of that name registers, so a guard is installed before its link is
//! created and no frame ever passes an unguarded link.

use std::collections::HashSet;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::expr::{
    self, Expr, NFT_PAYLOAD_LL_HEADER as LL, NFT_PAYLOAD_NETWORK_HEADER as NH,
    NFT_PAYLOAD_TRANSPORT_HEADER as TH,
};
use super::wire::*;
use super::{cstr, Nft};
use crate::error::Result;

/// Why a guard dropped a frame: each reason has its counter in the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DropReason {
    /// A source MAC other than the interface's.
    Mac,
    /// An IPv4 or IPv6 source address the pod does not hold.
    Ip,
    /// An ARP packet whose sender (hardware or protocol address) is not the pod's.
    Arp,
    /// A neighbour advertisement for an address the pod does not hold.
    Nd,
    /// A router advertisement or redirect: a pod is no router of its network.
    Router,
    /// A DHCP or DHCPv6 server message: a pod is no server of its network's addresses.
    Dhcp,
}

impl DropReason {
    /// Every reason.
    pub const ALL: [DropReason; 6] = [
        DropReason::Mac,
        DropReason::Ip,
        DropReason::Arp,
        DropReason::Nd,
        DropReason::Router,
        DropReason::Dhcp,
    ];

    /// Its name, as metrics label it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Mac => "mac",
            Self::Ip => "ip",
            Self::Arp => "arp",
            Self::Nd => "nd",
            Self::Router => "router",
            Self::Dhcp => "dhcp",
        }
    }

    /// The name of its counter in a guard table: `drop-<name>`.
    pub(crate) fn counter(self) -> &'static str {
        match self {
            Self::Mac => "drop-mac",
            Self::Ip => "drop-ip",
            Self::Arp => "drop-arp",
            Self::Nd => "drop-nd",
            Self::Router => "drop-router",
            Self::Dhcp => "drop-dhcp",
        }
    }
}

/// What one guarded link may send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guard {
    /// The host link (veth host end, DAN tap) whose ingress is guarded; names the chain.
    pub device: String,
    /// The pod's MAC: the only Ethernet and ARP sender address allowed.
    pub mac: [u8; 6],
    /// The pod's addresses. Its link-local IPv6 address (derived from `mac`), and the
    /// unspecified addresses of DAD, ARP probes and DHCP clients, are allowed besides.
    pub addresses: Vec<IpAddr>,
}

impl Guard {
    /// The link-local IPv6 address a pod derives from its MAC (EUI-64, the kernel's default
    /// `addr_gen_mode`), which it sends neighbour discovery from.
    pub fn link_local(&self) -> Ipv6Addr {
        let m = self.mac;
        Ipv6Addr::from([
            0xfe,
            0x80,
            0,
            0,
            0,
            0,
            0,
            0,
            m[0] ^ 0x02,
            m[1],
            m[2],
            0xff,
            0xfe,
            m[3],
            m[4],
            m[5],
        ])
    }

    /// Its IPv4 addresses.
    fn ipv4(&self) -> impl Iterator<Item = Ipv4Addr> + '_ {
        self.addresses.iter().filter_map(|a| match a {
            IpAddr::V4(v4) => Some(*v4),
            IpAddr::V6(_) => None,
        })
    }

    /// Its IPv6 addresses, the link-local one last.
    fn ipv6(&self) -> impl Iterator<Item = Ipv6Addr> + '_ {
        self.addresses
            .iter()
            .filter_map(|a| match a {
                IpAddr::V6(v6) => Some(*v6),
                IpAddr::V4(_) => None,
            })
            .chain(std::iter::once(self.link_local()))
    }

    /// What the chain's user data records of the guard: compared by a check with the record.
    pub fn summary(&self) -> String {
        self.to_string()
    }

    /// Whether `summary` is this guard's [`Guard::summary`], spelled out piece by piece against
    /// it: a rebuild at start-up compares thousands, none of which needs a string of its own.
    pub fn has_summary(&self, summary: &str) -> bool {
        use fmt::Write;
        let mut rest = Remaining(summary);
        write!(rest, "{self}").is_ok() && rest.0.is_empty()
    }
}

/// What is left of a text being matched by [`fmt::Write`]: a write that does not continue it
/// fails.
struct Remaining<'a>(&'a str);

impl fmt::Write for Remaining<'_> {
    fn write_str(&mut self, piece: &str) -> fmt::Result {
        self.0 = self.0.strip_prefix(piece).ok_or(fmt::Error)?;
        Ok(())
    }
}

/// `02:00:00:00:00:01 10.88.0.5 fd00:88::5`.
impl fmt::Display for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.mac;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )?;
        for a in &self.addresses {
            write!(f, " {a}")?;
        }
        Ok(())
    }
}

/// How many tables a prefix's guards are spread over. A guard's install validates the base
/// chains of its table only: with 5,000 guards, ~80 of them (one install's p50 0.51 ms in
/// benches/antispoof.rs, against 18–25 ms by `strace -T` with one table); 0.19 ms with none.
pub const GUARD_TABLES: u32 = 64;
// A table's number is spelled with two digits.
const _: () = assert!(GUARD_TABLES <= 100);

/// The table of `prefix`'s guards that holds the guard of `device`: `{prefix}-{nn}`, `nn` the
/// 32-bit FNV-1a hash of the name modulo [`GUARD_TABLES`]. Fixed: every version must find the
/// chains another made.
pub fn guard_table(prefix: &str, device: &str) -> String {
    format!("{prefix}-{:02}", table_number(device))
}

/// Whether `table` is [`guard_table`]`(prefix, device)`, without spelling it.
pub(crate) fn is_guard_table_of(prefix: &str, device: &str, table: &str) -> bool {
    let n = table_number(device);
    let digits = [b'0' + (n / 10) as u8, b'0' + (n % 10) as u8];
    table
        .strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix('-'))
        .is_some_and(|nn| nn.as_bytes() == digits)
}

/// The number of `device`'s guard table: 32-bit FNV-1a of the name modulo [`GUARD_TABLES`].
fn table_number(device: &str) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in device.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash % GUARD_TABLES
}

/// Whether `table` holds guards of `prefix`: one of its [`guard_table`]s, or `prefix` itself,
/// the single table of knid up to 0.4 (a rebuild moves its chains).
pub(crate) fn is_guard_table(prefix: &str, table: &str) -> bool {
    table == prefix
        || table
            .strip_prefix(prefix)
            .and_then(|rest| rest.strip_prefix('-'))
            .is_some_and(|n| n.len() == 2 && n.bytes().all(|b| b.is_ascii_digit()))
}

/// A guard chain as the kernel has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardChain {
    /// The table that holds it.
    pub table: String,
    /// The chain's name.
    pub name: String,
    /// The device its hook names.
    pub device: String,
    /// Its user data: [`Guard::summary`] of what it was built from.
    pub summary: String,
}

const ETH_P_IP: u16 = 0x0800;
const ETH_P_ARP: u16 = 0x0806;
const ETH_P_IPV6: u16 = 0x86dd;
const IPPROTO_UDP: u8 = 17;
const IPPROTO_ICMPV6: u8 = 58;
const ND_ROUTER_ADVERT: u8 = 134;
const ND_NEIGHBOR_ADVERT: u8 = 136;
const ND_REDIRECT: u8 = 137;
const DHCP_SERVER_PORT: u16 = 67;
const DHCPV6_SERVER_PORT: u16 = 547;
/// Before any filter of ordinary priority on the same device.
const PRIORITY: i32 = -500;
const NLM_F_CREATE: u16 = 0x400;
const NLM_F_APPEND: u16 = 0x800;

fn request(kind: u16, flags: u16, attrs: Attrs) -> Request {
    Request {
        kind,
        flags,
        family: NFPROTO_NETDEV,
        attrs,
    }
}

/// The table and its counters, created when missing (existing counters keep their counts).
fn ensure_table(table: &str) -> Vec<Request> {
    let mut a = Attrs::default();
    a.str(NFTA_TABLE_NAME, table);
    let mut out = vec![request(NFT_MSG_NEWTABLE, NLM_F_CREATE, a)];
    for reason in DropReason::ALL {
        let mut a = Attrs::default();
        a.str(NFTA_OBJ_TABLE, table)
            .str(NFTA_OBJ_NAME, reason.counter())
            .be32(NFTA_OBJ_TYPE, NFT_OBJECT_COUNTER)
            .nested(NFTA_OBJ_DATA, |_| {});
        out.push(request(NFT_MSG_NEWOBJ, NLM_F_CREATE, a));
    }
    out
}

fn destroy_table(table: &str) -> Request {
    let mut a = Attrs::default();
    a.str(NFTA_TABLE_NAME, table);
    request(NFT_MSG_DESTROYTABLE, 0, a)
}

fn destroy_chain(table: &str, name: &str) -> Request {
    let mut a = Attrs::default();
    a.str(NFTA_CHAIN_TABLE, table).str(NFTA_CHAIN_NAME, name);
    request(NFT_MSG_DESTROYCHAIN, 0, a)
}

fn rule(table: &str, chain: &str, exprs: Vec<Expr>) -> Request {
    let mut a = Attrs::default();
    a.str(NFTA_RULE_TABLE, table).str(NFTA_RULE_CHAIN, chain);
    expr::list(&mut a, NFTA_RULE_EXPRESSIONS, &exprs);
    request(NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND, a)
}

fn with_drop(mut exprs: Vec<Expr>, reason: DropReason) -> Vec<Expr> {
    exprs.extend(expr::count_and_drop(reason.counter()));
    exprs
}

/// The requests that (re)build the chain of `guard`: any chain of its name goes first.
fn chain_of(table: &str, guard: &Guard) -> Vec<Request> {
    let name = guard.device.as_str();
    let mut a = Attrs::default();
    a.str(NFTA_CHAIN_TABLE, table)
        .str(NFTA_CHAIN_NAME, name)
        .nested(NFTA_CHAIN_HOOK, |h| {
            h.be32(NFTA_HOOK_HOOKNUM, NF_NETDEV_INGRESS)
                .be32(NFTA_HOOK_PRIORITY, PRIORITY as u32)
                .str(NFTA_HOOK_DEV, name);
        })
        .be32(NFTA_CHAIN_POLICY, NF_ACCEPT)
        .str(NFTA_CHAIN_TYPE, "filter")
        .bytes(NFTA_CHAIN_USERDATA, guard.summary().as_bytes());
    let mut out = vec![
        destroy_chain(table, name),
        request(NFT_MSG_NEWCHAIN, NLM_F_CREATE, a),
    ];
    let mac = guard.mac.to_vec();
    let v4: Vec<Vec<u8>> = guard
        .ipv4()
        .chain([Ipv4Addr::UNSPECIFIED])
        .map(|a| a.octets().to_vec())
        .collect();
    let v6_own: Vec<Vec<u8>> = guard.ipv6().map(|a| a.octets().to_vec()).collect();
    let mut v6 = v6_own.clone();
    v6.push(Ipv6Addr::UNSPECIFIED.octets().to_vec());
    let rules: Vec<(Vec<Expr>, DropReason)> = vec![
        // ether saddr
        (
            expr::field_not_in(LL, 6, 6, std::slice::from_ref(&mac)),
            DropReason::Mac,
        ),
        // arp saddr ether, arp saddr ip
        (
            [
                expr::protocol_is(ETH_P_ARP),
                expr::field_not_in(NH, 8, 6, std::slice::from_ref(&mac)),
            ]
            .concat(),
            DropReason::Arp,
        ),
        (
            [
                expr::protocol_is(ETH_P_ARP),
                expr::field_not_in(NH, 14, 4, &v4),
            ]
            .concat(),
            DropReason::Arp,
        ),
        // ip saddr, ip6 saddr
        (
            [
                expr::protocol_is(ETH_P_IP),
                expr::field_not_in(NH, 12, 4, &v4),
            ]
            .concat(),
            DropReason::Ip,
        ),
        (
            [
                expr::protocol_is(ETH_P_IPV6),
                expr::field_not_in(NH, 8, 16, &v6),
            ]
            .concat(),
            DropReason::Ip,
        ),
        // icmpv6 type nd-router-advert, nd-redirect
        (icmpv6_type(ND_ROUTER_ADVERT), DropReason::Router),
        (icmpv6_type(ND_REDIRECT), DropReason::Router),
        // icmpv6 type nd-neighbor-advert with a target not the pod's
        (
            [
                icmpv6_type(ND_NEIGHBOR_ADVERT),
                expr::field_not_in(TH, 8, 16, &v6_own),
            ]
            .concat(),
            DropReason::Nd,
        ),
        // udp sport 67, 547
        (udp_sport(DHCP_SERVER_PORT), DropReason::Dhcp),
        (udp_sport(DHCPV6_SERVER_PORT), DropReason::Dhcp),
    ];
    for (exprs, reason) in rules {
        out.push(rule(table, name, with_drop(exprs, reason)));
    }
    out
}

fn icmpv6_type(kind: u8) -> Vec<Expr> {
    [
        expr::protocol_is(ETH_P_IPV6),
        expr::l4proto_is(IPPROTO_ICMPV6),
        expr::field_is(TH, 0, &[kind]),
    ]
    .concat()
}

fn udp_sport(port: u16) -> Vec<Expr> {
    [
        expr::l4proto_is(IPPROTO_UDP),
        expr::field_is(TH, 0, &port.to_be_bytes()),
    ]
    .concat()
}

/// The requests that install `guards` (each replacing a chain of its name) in their tables of
/// `prefix`, each table (and its counters) created first when missing.
pub(crate) fn install(prefix: &str, guards: &[Guard]) -> Vec<Request> {
    install_beside(prefix, guards, &HashSet::new())
}

/// [`install`], without the requests that ensure the tables `known` names (made, with their
/// counters, by an earlier transaction).
pub(crate) fn install_beside(
    prefix: &str,
    guards: &[Guard],
    known: &HashSet<String>,
) -> Vec<Request> {
    let mut out = Vec::new();
    let mut ensured = HashSet::new();
    for g in guards {
        let table = guard_table(prefix, &g.device);
        if !known.contains(&table) && ensured.insert(table.clone()) {
            out.extend(ensure_table(&table));
        }
        out.extend(chain_of(&table, g));
    }
    out
}

/// The requests that make `prefix`'s tables hold exactly `guards`, their chains being `found`:
/// a chain found as wanted (in its table, its hook's device and its summary,
/// [`Guard::summary`], which is what a check compares) is left as it is, a chain no guard wants
/// is removed, the others are (re)made. A restart with thousands of pods guarded sends nothing
/// but the old table's removal, where remaking every chain sent twelve requests per pod before
/// knid could serve. The single table of knid up to 0.4 (named `prefix`) goes last: its guards
/// are remade in their own tables first, in the same transaction, so no link is unguarded
/// between.
pub(crate) fn rebuild(prefix: &str, found: &[GuardChain], guards: &[Guard]) -> Vec<Request> {
    let mut requests = Vec::new();
    let wanted: std::collections::HashMap<&str, &Guard> =
        guards.iter().map(|g| (g.device.as_str(), g)).collect();
    let mut kept = std::collections::HashSet::new();
    for chain in found.iter().filter(|c| c.table != prefix) {
        match wanted.get(chain.name.as_str()) {
            Some(g) if is_guard_table_of(prefix, &g.device, &chain.table) => {
                if chain.device == g.device && g.has_summary(&chain.summary) {
                    kept.insert(chain.name.as_str());
                }
                // Otherwise remade below, which replaces it.
            }
            _ => requests.push(destroy_chain(&chain.table, &chain.name)),
        }
    }
    let remade: Vec<Guard> = guards
        .iter()
        .filter(|g| !kept.contains(g.device.as_str()))
        .cloned()
        .collect();
    requests.extend(install(prefix, &remade));
    requests.push(destroy_table(prefix));
    requests
}

/// The requests that remove the chains `names` from their tables of `prefix` (absent ones are
/// fine).
pub(crate) fn remove(prefix: &str, names: &[&str]) -> Vec<Request> {
    names
        .iter()
        .map(|n| destroy_chain(&guard_table(prefix, n), n))
        .collect()
}

impl Nft {
    /// Installs `guards` in their tables of `prefix` ([`guard_table`], family `netdev`) in one
    /// transaction, each replacing a chain of its name; creates a table and its counters when
    /// missing.
    ///
    /// A table this handle made before is not ensured again (seven requests per transaction);
    /// if it has been deleted since (by hand), the transaction is refused (ENOENT) and sent again
    /// with every table ensured.
    pub fn add_guards(&mut self, prefix: &str, guards: &[Guard]) -> Result<()> {
        let op = "add source guards";
        let tables: Vec<String> = guards
            .iter()
            .map(|g| guard_table(prefix, &g.device))
            .collect();
        let known = std::mem::take(&mut self.known_guard_tables);
        let skipped = tables.iter().any(|t| known.contains(t));
        let mut made = match self.transact(&install_beside(prefix, guards, &known), op, &prefix) {
            Err(e) if skipped && e.is_not_found() => {
                log::debug!("nf_tables: {op}: a guard table is gone, ensuring every one: {e}");
                self.transact(&install(prefix, guards), op, &prefix)?;
                HashSet::new()
            }
            other => other.map(|()| known)?,
        };
        made.extend(tables);
        self.known_guard_tables = made;
        Ok(())
    }

    /// Makes `guards` the only chains of `prefix`'s tables, in one transaction: the chains of
    /// `found` (a listing by [`Nft::guard_chains`], taken before `guards` were decided, so a
    /// guard installed meanwhile is among `guards`) of other names go; the counters keep their
    /// counts, but those of the single table of knid up to 0.4, which goes.
    pub fn replace_guards(
        &mut self,
        prefix: &str,
        found: &[GuardChain],
        guards: &[Guard],
    ) -> Result<()> {
        self.transact(
            &rebuild(prefix, found, guards),
            "rebuild source guards",
            &prefix,
        )
    }

    /// Removes the guard chains `names` from their tables of `prefix` in one transaction; absent
    /// ones are fine.
    pub fn remove_guards(&mut self, prefix: &str, names: &[&str]) -> Result<()> {
        if names.is_empty() {
            return Ok(());
        }
        match self.transact(&remove(prefix, names), "remove source guards", &prefix) {
            // A chain's table is missing (never made, or deleted): the kernel refuses to destroy
            // a chain there, so only those whose table exists are sent again.
            Err(e) if e.is_not_found() => {
                let tables = self.guard_tables(prefix)?;
                let present: Vec<&str> = names
                    .iter()
                    .copied()
                    .filter(|n| tables.contains(&guard_table(prefix, n)))
                    .collect();
                if present.is_empty() {
                    return Ok(());
                }
                self.transact(&remove(prefix, &present), "remove source guards", &prefix)
            }
            other => other,
        }
    }

    /// The chains of `prefix`'s guard tables (family `netdev`), by name; `None` when there is no
    /// such table. One dump of the family's chains.
    pub fn guard_chains(&mut self, prefix: &str) -> Result<Option<Vec<GuardChain>>> {
        let msgs = match self.query(
            &request(NFT_MSG_GETCHAIN, 0, Attrs::default()),
            true,
            "list guard chains",
            prefix,
        ) {
            Err(e) if e.is_not_found() => return Ok(None),
            other => other?,
        };
        let mut out = Vec::new();
        for msg in msgs {
            let mut chain = GuardChain {
                table: String::new(),
                name: String::new(),
                device: String::new(),
                summary: String::new(),
            };
            for (kind, value) in attrs(&msg) {
                match kind {
                    NFTA_CHAIN_TABLE => chain.table = cstr(value),
                    NFTA_CHAIN_NAME => chain.name = cstr(value),
                    NFTA_CHAIN_USERDATA => {
                        chain.summary = String::from_utf8_lossy(value).into_owned()
                    }
                    NFTA_CHAIN_HOOK => {
                        for (k, v) in attrs(value) {
                            if k == NFTA_HOOK_DEV {
                                chain.device = cstr(v);
                            }
                        }
                    }
                    _ => {}
                }
            }
            if is_guard_table(prefix, &chain.table) {
                out.push(chain);
            }
        }
        if out.is_empty() && self.guard_tables(prefix)?.is_empty() {
            return Ok(None);
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Some(out))
    }

    /// The names of `prefix`'s guard tables.
    fn guard_tables(&mut self, prefix: &str) -> Result<Vec<String>> {
        let msgs = match self.query(
            &request(NFT_MSG_GETTABLE, 0, Attrs::default()),
            true,
            "list guard tables",
            prefix,
        ) {
            Err(e) if e.is_not_found() => return Ok(Vec::new()),
            other => other?,
        };
        Ok(msgs
            .iter()
            .filter_map(|msg| {
                attrs(msg)
                    .find(|(kind, _)| *kind == NFTA_TABLE_NAME)
                    .map(|(_, value)| cstr(value))
            })
            .filter(|name| is_guard_table(prefix, name))
            .collect())
    }

    /// The packets each reason's counters in `prefix`'s guard tables counted, summed over the
    /// tables; empty when there is none. One dump of the family's counters.
    pub fn guard_drops(&mut self, prefix: &str) -> Result<Vec<(DropReason, u64)>> {
        let mut a = Attrs::default();
        a.be32(NFTA_OBJ_TYPE, NFT_OBJECT_COUNTER);
        let msgs = match self.query(
            &request(NFT_MSG_GETOBJ, 0, a),
            true,
            "list guard counters",
            prefix,
        ) {
            Err(e) if e.is_not_found() => return Ok(Vec::new()),
            other => other?,
        };
        let mut sums = std::collections::BTreeMap::new();
        for msg in msgs {
            let (mut ours, mut name, mut packets) = (false, String::new(), None);
            for (kind, value) in attrs(&msg) {
                match kind {
                    NFTA_OBJ_TABLE => ours = is_guard_table(prefix, &cstr(value)),
                    NFTA_OBJ_NAME => name = cstr(value),
                    NFTA_OBJ_DATA => {
                        for (k, v) in attrs(value) {
                            if k == NFTA_COUNTER_PACKETS {
                                packets = v.try_into().ok().map(u64::from_be_bytes);
                            }
                        }
                    }
                    _ => {}
                }
            }
            let reason = DropReason::ALL.into_iter().find(|r| r.counter() == name);
            if let (true, Some(reason), Some(packets)) = (ours, reason, packets) {
                *sums.entry(reason).or_insert(0u64) += packets;
            }
        }
        Ok(sums.into_iter().collect())
    }
}
