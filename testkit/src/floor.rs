//! The floor: the kernel work of one knid attach and detach on a bridge network, done through
//! `knid_netops` directly from the bench (no IPAM, no store, no RPC, no worker thread), in the
//! same private host netns as knid but on the floor's own bridge [`BRIDGE`] with its own /16 and
//! /64, so it never meets knid's objects.
//!
//! One function per operation, each making the netops calls knid makes for it
//! (core/src/drivers/veth.rs, core/src/drivers/mod.rs, core/src/drivers/mark.rs) minus knid's
//! own checks, for either [`Shape`]. Round trips of [`Floor::attach`], knid's four:
//! RTM_NEWLINK (veth, the peer created in the sandbox netns as `eth0` with MTU and MAC, the host
//! end on the bridge and up); RTM_NEWLINK of the host end's alias (an ownership mark as long as
//! knid's) and hairpin mode; RTM_GETLINK (`eth0`'s index); one datagram of the RTM_NEWADDRs (IPv6
//! with IFA_F_NODAD), 2 × RTM_SETLINK (`eth0` and `lo` up) and the default routes' RTM_NEWROUTEs,
//! acked together; plus opening the sandbox netns and a netlink socket inside it, and the host
//! end's `disable_ipv6` written to /proc/sys before `eth0` is up, as knid does for a bridge port
//! (from a thread inside the host netns: [`Floor::in_host`]). knid does the
//! alias and hairpin last, as the completion of its attach, and creates the veth with its host end
//! in a link group: the same requests, in another order.
//!
//! A guarded floor ([`Floor::create`] with `guards`, as knid's networks are by default) also
//! does knid's source-guard work, through the same `knid_netops::nft` calls on its own `netdev`
//! tables [`GUARD_TABLE`]: the host end's guard installed in one nf_tables transaction before the
//! veth exists (knid's attach on a kernel that hooks a device by name), and removed once its link
//! is gone: right after a sandbox's own RTM_DELLINK ([`Floor::detach`]), or, for retired and
//! grouped sandboxes, in one transaction after the group's deletion ([`Floor::delete_retired`]),
//! as knid's reaper does.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ipnet::IpNet;
use knid_netops::netns::LOOPBACK_INDEX;
use knid_netops::nft::{Guard, Nft};
use knid_netops::{NetnsHandle, Route, Rtnl, Step, VethEnd, VethSpec};

/// The floor's bridge in the private host netns (not `kn…`: those names are knid's).
pub const BRIDGE: &str = "flr0";
/// Prefix of the floor's host ends: `flv<i>`.
const HOST_PREFIX: &str = "flv";
/// Link group of retired host ends, deleted by [`Floor::delete_retired`] ("flr"; knid's is
/// "knid").
const GROUP: u32 = 0x0066_6c72;
/// The prefix of the floor's source-guard tables, family `netdev`: `flor-00` to `flor-63`, as
/// knid's are `knid-NN` (`knid_netops::nft::guard_table`).
pub const GUARD_TABLE: &str = "flor";
/// The floor's ownership mark: as long as knid's (`knid:` and a 32-digit store id).
const MARK: &str = "flor:00000000000000000000000000000000";
/// The floor's subnets and gateways (knid's network is 10.88.0.0/16, the CNI peer's 10.89/16).
const SUBNET_V4: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 0);
const SUBNET_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x99, 0, 0, 0, 0, 0, 0);
const PREFIX_V4: u8 = 16;
const PREFIX_V6: u8 = 64;
const MTU: u32 = 1500;
/// Sandbox numbers the /16 has room for (network, gateway and broadcast excluded).
pub const CAPACITY: u32 = (1 << 16) - 3;

/// The address families of a sandbox's interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// One IPv4 address and one default route.
    Ipv4,
    /// An IPv4 and an IPv6 address, a default route each.
    DualStack,
}

impl Shape {
    /// How a report names it.
    pub fn label(self) -> &'static str {
        match self {
            Shape::Ipv4 => "IPv4 only",
            Shape::DualStack => "dual stack",
        }
    }
}

/// The floor's bridge and a netlink socket in the host netns. Dropping the one that created the
/// bridge deletes every link the floor made there.
pub struct Floor {
    host: Rtnl,
    bridge: u32,
    /// Whether this handle created the bridge (and cleans up on drop).
    owner: bool,
    /// The socket of the source guards' work, kept open as knid's threads keep theirs; `None`:
    /// the floor installs no guard (knid's networks with `antispoof = false`).
    nft: Option<Nft>,
    /// The guards of the sandboxes retired or grouped since the last [`Floor::delete_retired`],
    /// by this handle or any [`Floor::connect`]ed to it.
    retired: Arc<Mutex<Vec<String>>>,
    /// The host netns's path, for [`Floor::in_host`].
    host_path: PathBuf,
}

/// One attached floor sandbox: what its detach needs.
pub struct Pod {
    host_name: String,
    /// Its pod end's index in the sandbox netns, as knid records it.
    pod_index: u32,
}

impl Pod {
    /// Its host end's name (`flv<i>`), which its guard's chain is named after.
    pub fn host_name(&self) -> &str {
        &self.host_name
    }
}

/// Addresses (with prefix length) of floor sandbox `i` for `shape`, IPv4 first.
pub fn addresses(i: u32, shape: Shape) -> Vec<IpNet> {
    assert!(
        i < CAPACITY,
        "the floor's /16 has room for {CAPACITY} sandboxes"
    );
    // .0 is the network, .1 the gateway.
    let host = i + 2;
    let v4 = net(
        IpAddr::V4(Ipv4Addr::from(u32::from(SUBNET_V4) + host)),
        PREFIX_V4,
    );
    let v6 = net(
        IpAddr::V6(Ipv6Addr::from(u128::from(SUBNET_V6) + u128::from(host))),
        PREFIX_V6,
    );
    match shape {
        Shape::Ipv4 => vec![v4],
        Shape::DualStack => vec![v4, v6],
    }
}

/// The gateways on [`BRIDGE`] for `shape`, IPv4 first.
pub fn gateways(shape: Shape) -> Vec<IpAddr> {
    let v4 = IpAddr::V4(Ipv4Addr::from(u32::from(SUBNET_V4) + 1));
    let v6 = IpAddr::V6(Ipv6Addr::from(u128::from(SUBNET_V6) + 1));
    match shape {
        Shape::Ipv4 => vec![v4],
        Shape::DualStack => vec![v4, v6],
    }
}

fn net(addr: IpAddr, prefix: u8) -> IpNet {
    IpNet::new(addr, prefix).expect("prefix fits the family")
}

impl Floor {
    /// Creates [`BRIDGE`] in the netns `host` with both gateways on it, up; with `guards`, each
    /// sandbox gets a source guard, as on knid's networks by default.
    pub fn create(host: &NetnsHandle, guards: bool) -> Floor {
        let mut rtnl = Rtnl::open_in(host).expect("netlink socket in the host netns");
        rtnl.create_bridge(BRIDGE, Some(MTU))
            .unwrap_or_else(|e| panic!("create {BRIDGE}: {e}"));
        let bridge = rtnl
            .link_by_name(BRIDGE)
            .expect("look up the floor bridge")
            .expect("floor bridge exists")
            .index;
        let mut floor = Floor {
            host: rtnl,
            bridge,
            owner: true,
            nft: guards.then(|| open_nft(host)),
            retired: Arc::default(),
            host_path: host.path().to_path_buf(),
        };
        for gw in gateways(Shape::DualStack) {
            let prefix = if gw.is_ipv4() { PREFIX_V4 } else { PREFIX_V6 };
            floor
                .host
                .add_address(bridge, net(gw, prefix))
                .unwrap_or_else(|e| panic!("add {gw} to {BRIDGE}: {e}"));
        }
        floor
            .host
            .set_up(bridge)
            .unwrap_or_else(|e| panic!("set {BRIDGE} up: {e}"));
        floor
    }

    /// Another handle on the same bridge with its own socket in `host`, for one more thread;
    /// dropping it deletes nothing.
    pub fn connect(&self, host: &NetnsHandle) -> Floor {
        Floor {
            host: Rtnl::open_in(host).expect("netlink socket in the host netns"),
            bridge: self.bridge,
            owner: false,
            nft: self.nft.as_ref().map(|_| open_nft(host)),
            retired: Arc::clone(&self.retired),
            host_path: host.path().to_path_buf(),
        }
    }

    /// Runs `f` with this floor on a thread inside the host netns, as knid's threads are: the
    /// attach turns IPv6 off on its host end through /proc/sys, which resolves against the
    /// calling thread's netns. Call it around a batch, outside the timed work: entering costs a
    /// thread and a setns.
    pub fn in_host<T: Send>(&mut self, f: impl FnOnce(&mut Floor) -> T + Send) -> T {
        let ns = NetnsHandle::open(&self.host_path)
            .unwrap_or_else(|e| panic!("open the host netns {}: {e}", self.host_path.display()));
        knid_netops::run_in(&ns, || f(self))
            .unwrap_or_else(|e| panic!("floor in the host netns: {e}"))
    }

    /// Whether this floor installs source guards.
    pub fn guards(&self) -> bool {
        self.nft.is_some()
    }

    /// Attaches floor sandbox `i` in the netns at `netns`: with guards, the source guard of
    /// `flv<i>` first; veth `flv<i>` on the bridge and up, its peer `eth0` (MTU 1500, a fixed
    /// MAC) created in the netns, IPv6 turned off on the host end (as knid's), its alias
    /// and hairpin mode, addresses
    /// [`addresses`]`(i, shape)`, `eth0` and `lo` up, default routes via [`gateways`]`(shape)`.
    /// On error the veth and the guard are deleted again.
    pub fn attach(&mut self, i: u32, netns: &Path, shape: Shape) -> Result<Pod, String> {
        let ns = NetnsHandle::open(netns).map_err(|e| chain("open the sandbox netns", &e))?;
        let mut pod = Rtnl::open_in(&ns).map_err(|e| chain("netlink socket in the netns", &e))?;
        let host_name = format!("{HOST_PREFIX}{i}");
        let octets = i.to_be_bytes();
        let mac = [0x02, 0x66, octets[0], octets[1], octets[2], octets[3]];
        if let Some(nft) = &mut self.nft {
            let guard = Guard {
                device: host_name.clone(),
                mac,
                addresses: addresses(i, shape).iter().map(IpNet::addr).collect(),
            };
            nft.add_guards(GUARD_TABLE, &[guard])
                .map_err(|e| chain("install the source guard", &e))?;
        }
        let created = self
            .host
            .create_veth_up(&VethSpec {
                host: VethEnd {
                    name: host_name.clone(),
                    mtu: Some(MTU),
                    mac: None,
                },
                peer: VethEnd {
                    name: "eth0".to_owned(),
                    mtu: Some(MTU),
                    mac: Some(mac),
                },
                peer_netns: Some(&ns),
                host_controller: Some(self.bridge),
            })
            .map_err(|e| chain("create the veth", &e));
        if let Err(e) = created {
            self.unguard(&host_name);
            return Err(e);
        }
        let configured = self.configure(&host_name, &mut pod, i, shape);
        if configured.is_err() {
            let _ = self.host.delete_link_by_name(&host_name);
            self.unguard(&host_name);
        }
        configured
    }

    /// Removes the source guard of `host_name`, if this floor installs guards: one transaction.
    fn unguard(&mut self, host_name: &str) {
        if let Some(nft) = &mut self.nft {
            nft.remove_guards(GUARD_TABLE, &[host_name])
                .unwrap_or_else(|e| panic!("remove the source guard of {host_name}: {e}"));
        }
    }

    /// The rest of [`Floor::attach`], once the veth exists (its host end up from creation).
    fn configure(
        &mut self,
        host_name: &str,
        pod: &mut Rtnl,
        i: u32,
        shape: Shape,
    ) -> Result<Pod, String> {
        // As knid does with a bridge port: IPv6 turned off, before `eth0` is up.
        let off = knid_netops::sysctl::disable_ipv6(host_name)
            .map_err(|e| chain("turn IPv6 off on the host end", &e))?;
        if !off {
            return Err(format!(
                "floor: no IPv6 settings of {host_name} in this thread's netns: gone, or the \
                 floor is not called inside the host netns (Floor::in_host)"
            ));
        }
        let marked = self
            .host
            .set_hairpin_by_name(host_name, true, Some(MARK))
            .map_err(|e| chain("mark the host end and set its hairpin mode", &e))?;
        if !marked {
            return Err(format!("floor: {host_name} vanished"));
        }
        let eth0 = index(pod, "eth0")?;
        let mut steps: Vec<Step> = addresses(i, shape)
            .into_iter()
            .map(|net| Step::Address { index: eth0, net })
            .collect();
        steps.push(Step::Up(eth0));
        steps.push(Step::Up(LOOPBACK_INDEX));
        for gw in gateways(shape) {
            let mut route = Route::default_via(gw, eth0);
            // As knid does: the gateway is in eth0's own subnet.
            route.onlink = true;
            steps.push(Step::Route(route));
        }
        pod.apply_steps(&steps)
            .map_err(|f| chain(&format!("configure eth0 (step {})", f.step), &f.error))?;
        Ok(Pod {
            host_name: host_name.to_owned(),
            pod_index: eth0,
        })
    }

    /// Detaches one sandbox: one RTM_DELLINK of its host end (the kernel deletes the pair),
    /// then its guard's removal.
    pub fn detach(&mut self, pod: Pod) {
        let deleted = self
            .host
            .delete_link_by_name(&pod.host_name)
            .expect("delete the host end");
        assert!(deleted, "the floor's host end {} was gone", pod.host_name);
        self.unguard(&pod.host_name);
    }

    /// Puts a sandbox's host end into the floor's link group for [`Floor::delete_retired`], as if
    /// it had been created there: one RTM_SETLINK, no change of state (the deletion then removes
    /// its bridge port too). Its guard goes with the next [`Floor::delete_retired`].
    pub fn group(&mut self, pod: Pod) {
        self.host
            .set_alias_group_by_name(&pod.host_name, MARK, GROUP, None)
            .map(|found| assert!(found, "the floor's host end {} was gone", pod.host_name))
            .expect("move the host end into the link group");
        self.leave_guard(pod);
    }

    /// Leaves `pod`'s guard, if any, to the next [`Floor::delete_retired`].
    fn leave_guard(&mut self, pod: Pod) {
        if self.nft.is_some() {
            self.retired
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(pod.host_name);
        }
    }

    /// Retires a sandbox for [`Floor::delete_retired`] as knid's detach retires its host end:
    /// one RTM_SETLINK taking it off the bridge and into the floor's link group, up; its guard
    /// goes with the next [`Floor::delete_retired`].
    pub fn retire(&mut self, pod: Pod) {
        self.host
            .release_port_by_name(&pod.host_name, GROUP)
            .map(|found| assert!(found, "the floor's host end {} was gone", pod.host_name))
            .expect("move the host end into the link group");
        self.leave_guard(pod);
    }

    /// Retires a sandbox as knid's detach does, pod end included: opens the sandbox netns and a
    /// netlink socket in it, sets `eth0` down by the index its attach found, with a retired alias,
    /// in one RTM_SETLINK (an RCU grace period), then [`Floor::retire`]s the host end.
    pub fn retire_with_pod_end(&mut self, pod: Pod, netns: &Path) -> Result<(), String> {
        let ns = NetnsHandle::open(netns).map_err(|e| chain("open the sandbox netns", &e))?;
        let mut rtnl = Rtnl::open_in(&ns).map_err(|e| chain("netlink socket in the netns", &e))?;
        let alias = format!("flor-retired:{}", pod.host_name);
        rtnl.set_down_with_alias(pod.pod_index, &alias)
            .map_err(|e| chain("set eth0 down", &e))?;
        self.retire(pod);
        Ok(())
    }

    /// Detaches every retired sandbox with one RTM_DELLINK of the link group, then removes
    /// their guards in one transaction (as knid's reaper does).
    pub fn delete_retired(&mut self) {
        self.host
            .delete_group(GROUP)
            .expect("delete the floor's link group");
        let retired = std::mem::take(&mut *self.retired.lock().unwrap_or_else(|p| p.into_inner()));
        if let Some(nft) = &mut self.nft {
            let names: Vec<&str> = retired.iter().map(String::as_str).collect();
            nft.remove_guards(GUARD_TABLE, &names)
                .expect("remove the retired sandboxes' guards");
        }
    }
}

/// A socket to nf_tables in `host`.
fn open_nft(host: &NetnsHandle) -> Nft {
    Nft::open_in(host).expect("nf_tables socket in the host netns")
}

/// The index of link `name`, which must exist.
fn index(rtnl: &mut Rtnl, name: &str) -> Result<u32, String> {
    rtnl.link_by_name(name)
        .map_err(|e| chain("look up a link", &e))?
        .map(|l| l.index)
        .ok_or_else(|| format!("{name} missing"))
}

/// `what`, then `err` and each of its sources.
fn chain(what: &str, err: &dyn std::error::Error) -> String {
    let mut text = format!("floor: {what}: {err}");
    let mut source = err.source();
    while let Some(e) = source {
        text.push_str(&format!(": {e}"));
        source = e.source();
    }
    text
}

impl Drop for Floor {
    /// Deletes the floor's host ends (a failed run may leave some), their guards and its bridge,
    /// if this handle created it.
    fn drop(&mut self) {
        if !self.owner {
            return;
        }
        let mut leftovers = Vec::new();
        match self.host.links() {
            Ok(links) => leftovers.extend(
                links
                    .into_iter()
                    .filter(|l| l.name.starts_with(HOST_PREFIX))
                    .map(|l| (l.index, l.name)),
            ),
            Err(e) => eprintln!("warning: list the floor's links: {e}"),
        }
        for index in leftovers
            .iter()
            .map(|(index, _)| *index)
            .chain([self.bridge])
        {
            if let Err(e) = self.host.delete_link(index) {
                eprintln!("warning: delete the floor's link {index}: {e}");
            }
        }
        // Once their links are gone: a guard never leaves a link that could still carry frames.
        if let Some(nft) = &mut self.nft {
            let names: Vec<&str> = leftovers.iter().map(|(_, name)| name.as_str()).collect();
            if let Err(e) = nft.remove_guards(GUARD_TABLE, &names) {
                eprintln!("warning: remove the floor's leftover guards: {e}");
            }
        }
    }
}
