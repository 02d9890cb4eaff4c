//! Links: bridges, veth pairs, dummies, macvlan / ipvlan children, namespace moves, and the
//! generic get / set / delete operations.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, RawFd};

use netlink_packet_core::{NLM_F_CREATE, NLM_F_EXCL};
use netlink_packet_route::link::{
    InfoBridge, InfoBridgePort, InfoData, InfoIpVlan, InfoKind, InfoMacVlan, InfoPortData,
    InfoPortKind, InfoVeth, IpVlanMode, LinkAttribute, LinkExtentMask, LinkFlags, LinkInfo,
    LinkMessage, MacVlanMode,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};

use crate::error::{Error, Result};
use crate::netns::NetnsHandle;
use crate::rtnl::Rtnl;
use crate::Mac;

/// A network interface as the kernel reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Link {
    /// Interface index.
    pub index: u32,
    /// Interface name.
    pub name: String,
    /// The rtnl_link_ops kind (`bridge`, `veth`, …); `None` for physical devices and loopback.
    pub kind: Option<String>,
    /// Hardware address, when it is a 6-byte Ethernet one.
    pub mac: Option<Mac>,
    /// MTU.
    pub mtu: u32,
    /// Index of the controller (bridge) this link is a port of.
    pub controller: Option<u32>,
    /// Administrative state (IFF_UP), not whether the carrier is up.
    pub up: bool,
    /// Link group (0 is the default group).
    pub group: u32,
    /// The lower device (IFLA_LINK): a macvlan / ipvlan parent, or a veth's peer. `None` when
    /// there is none, or when it lives in another namespace (IFLA_LINK_NETNSID is set): its
    /// index would then name nothing, or the wrong link, here.
    pub parent: Option<u32>,
    /// The mode of a macvlan.
    pub macvlan_mode: Option<MacvlanMode>,
    /// The mode of an ipvlan (`None` also for l3s, which knid does not create).
    pub ipvlan_mode: Option<IpvlanMode>,
    /// The burned-in address (IFLA_PERM_ADDRESS); the kernel sends it only for devices that
    /// have one (physical NICs), not for virtual devices with a random address.
    pub permanent_mac: Option<Mac>,
    /// The link's alias (IFLA_IFALIAS), `None` when it has none.
    pub alias: Option<String>,
    /// The transmit and receive queues the link was allocated with (IFLA_NUM_TX_QUEUES,
    /// IFLA_NUM_RX_QUEUES), not how many are in use.
    pub queues: (u32, u32),
}

/// How a macvlan child reaches its siblings and the outside (MACVLAN_MODE_*).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MacvlanMode {
    /// No traffic between siblings, even hairpinned by the switch.
    Private,
    /// Sibling traffic goes out to the switch (which must hairpin it back).
    Vepa,
    /// Siblings talk to each other directly inside the kernel.
    Bridge,
    /// The only child of its parent, taking over the parent's MAC (and promiscuous mode).
    Passthru,
}

impl MacvlanMode {
    /// The name `ip link` uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Private => "private",
            Self::Vepa => "vepa",
            Self::Bridge => "bridge",
            Self::Passthru => "passthru",
        }
    }

    /// The mode named `s` (as [`MacvlanMode::as_str`] spells it), if any.
    pub fn parse(s: &str) -> Option<Self> {
        [Self::Private, Self::Vepa, Self::Bridge, Self::Passthru]
            .into_iter()
            .find(|m| m.as_str() == s)
    }

    fn to_nl(self) -> MacVlanMode {
        match self {
            Self::Private => MacVlanMode::Private,
            Self::Vepa => MacVlanMode::Vepa,
            Self::Bridge => MacVlanMode::Bridge,
            Self::Passthru => MacVlanMode::Passthrough,
        }
    }

    fn from_nl(mode: MacVlanMode) -> Option<Self> {
        match mode {
            MacVlanMode::Private => Some(Self::Private),
            MacVlanMode::Vepa => Some(Self::Vepa),
            MacVlanMode::Bridge => Some(Self::Bridge),
            MacVlanMode::Passthrough => Some(Self::Passthru),
            _ => None,
        }
    }
}

/// The layer an ipvlan child switches at (IPVLAN_MODE_*). Every child shares its parent's MAC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpvlanMode {
    /// Layer 2: the parent switches by MAC; ARP / NDP and broadcast work.
    L2,
    /// Layer 3: the parent routes by IP; no broadcast or multicast (the child is NOARP).
    L3,
}

impl IpvlanMode {
    /// The name `ip link` uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::L2 => "l2",
            Self::L3 => "l3",
        }
    }

    /// The mode named `s` (as [`IpvlanMode::as_str`] spells it), if any.
    pub fn parse(s: &str) -> Option<Self> {
        [Self::L2, Self::L3].into_iter().find(|m| m.as_str() == s)
    }

    fn to_nl(self) -> IpVlanMode {
        match self {
            Self::L2 => IpVlanMode::L2,
            Self::L3 => IpVlanMode::L3,
        }
    }

    fn from_nl(mode: IpVlanMode) -> Option<Self> {
        match mode {
            IpVlanMode::L2 => Some(Self::L2),
            IpVlanMode::L3 => Some(Self::L3),
            _ => None,
        }
    }
}

/// The kind of a child device and its mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildKind {
    /// A macvlan: its own MAC on the parent's wire.
    Macvlan(MacvlanMode),
    /// An ipvlan: the parent's MAC, told apart by IP.
    Ipvlan(IpvlanMode),
}

/// A macvlan / ipvlan child to create on top of a parent link.
#[derive(Debug, Clone)]
pub struct ChildSpec {
    /// Interface name (at most 15 bytes).
    pub name: String,
    /// Index of the parent link, in the socket's namespace.
    pub parent: u32,
    /// Kind and mode.
    pub kind: ChildKind,
    /// MTU; the parent's when `None`. It cannot exceed the parent's.
    pub mtu: Option<u32>,
    /// MAC address; random when `None`. Must be `None` for ipvlan and for macvlan passthru,
    /// whose kernel drivers silently replace it with the parent's.
    pub mac: Option<Mac>,
}

/// One end of a veth pair to create.
#[derive(Debug, Clone)]
pub struct VethEnd {
    /// Interface name (at most 15 bytes).
    pub name: String,
    /// MTU; the kernel default (1500) when `None`.
    pub mtu: Option<u32>,
    /// MAC address; random when `None`.
    pub mac: Option<Mac>,
}

/// A veth pair to create in one request.
#[derive(Debug)]
pub struct VethSpec<'a> {
    /// The end created in the socket's namespace.
    pub host: VethEnd,
    /// The other end.
    pub peer: VethEnd,
    /// Peer is created directly inside this netns (IFLA_NET_NS_FD in the peer message), so its
    /// name never has to be unique in the host namespace.
    pub peer_netns: Option<&'a NetnsHandle>,
    /// Host end enslaved to this bridge in the same message.
    pub host_controller: Option<u32>,
}

impl Rtnl {
    /// The link named `name`, or `None` if there is none.
    pub fn link_by_name(&mut self, name: &str) -> Result<Option<Link>> {
        let msg = RouteNetlinkMessage::GetLink(get_by_name_message(name));
        not_found_as_none(
            self.get(msg, "get link", &name)
                .map(|m| parse_link_reply(&m)),
        )
    }

    /// The index of the link named `name`, or `None` if there is none: [`Rtnl::link_by_name`]'s
    /// request, the reply's index read without parsing the ~40 attributes of the link.
    pub fn link_index_by_name(&mut self, name: &str) -> Result<Option<u32>> {
        let msg = RouteNetlinkMessage::GetLink(get_by_name_message(name));
        let op = "get link";
        not_found_as_none(self.get_raw(msg, op, &name, |bytes| {
            index_of(bytes)
                .map(Some)
                .map_err(|why| Error::protocol(op, why))
        }))
    }

    /// The link with index `index`, or `None` if there is none.
    pub fn link_by_index(&mut self, index: u32) -> Result<Option<Link>> {
        let msg = RouteNetlinkMessage::GetLink(get_by_index_message(index));
        not_found_as_none(
            self.get(msg, "get link", &format_args!("index {index}"))
                .map(|m| parse_link_reply(&m)),
        )
    }

    /// Every link in the namespace.
    pub fn links(&mut self) -> Result<Vec<Link>> {
        let msg = RouteNetlinkMessage::GetLink(dump_message(None));
        self.dump_map(msg, "dump links", &"of the namespace", |m| {
            parse_link_reply(&m)
        })
    }

    /// The ports of bridge `bridge_index` (filtered by the kernel, and again here).
    pub fn bridge_ports(&mut self, bridge_index: u32) -> Result<Vec<Link>> {
        let msg = RouteNetlinkMessage::GetLink(dump_message(Some(bridge_index)));
        let target = format_args!("of bridge index {bridge_index}");
        self.dump_map(msg, "dump ports", &target, |m| {
            parse_link_reply(&m).filter(|l| l.controller == Some(bridge_index))
        })
    }

    /// How many ports each bridge of the namespace has, by the bridge's index (bridges without
    /// a port are absent). One AF_BRIDGE dump, which carries a message per port and nothing a
    /// port's peer namespace costs: a link dump ([`Rtnl::bridge_ports`]) has the kernel look up
    /// each veth's peer namespace id by a linear scan of the namespace's ids, which makes it
    /// cost links × namespaces (hundreds of ms with 5,000 pods).
    pub fn bridge_port_counts(&mut self) -> Result<HashMap<u32, u64>> {
        let mut msg = LinkMessage::default();
        msg.header.interface_family = AddressFamily::Bridge;
        let msg = RouteNetlinkMessage::GetLink(msg);
        let op = "dump bridge ports";
        // Each port's message carries ~30 attributes of its port state; only one is read.
        let controllers = self.dump_raw(msg, op, &"of the namespace", |bytes| {
            controller_of(bytes).map_err(|why| Error::protocol(op, why))
        })?;
        let mut counts = HashMap::new();
        for controller in controllers {
            *counts.entry(controller).or_insert(0) += 1;
        }
        Ok(counts)
    }

    /// Creates a bridge. An existing link of that name is an error ([`crate::Error::is_exists`]).
    pub fn create_bridge(&mut self, name: &str, mtu: Option<u32>) -> Result<()> {
        let msg = RouteNetlinkMessage::NewLink(bridge_message(name, mtu));
        self.ack(msg, NLM_F_CREATE | NLM_F_EXCL, "create bridge", &name)
    }

    /// Creates a veth pair, the peer possibly directly in another namespace and the host end
    /// possibly already on a bridge. Neither end is set up.
    ///
    /// A peer created in a foreign namespace cannot be set up in this message (ENOTCONN): set it
    /// up through a socket opened in that namespace.
    pub fn create_veth(&mut self, spec: &VethSpec<'_>) -> Result<()> {
        self.new_veth(spec, false, None)
    }

    /// [`Rtnl::create_veth`] with the host end up in the same message: one round trip fewer.
    /// The peer stays down (see there).
    pub fn create_veth_up(&mut self, spec: &VethSpec<'_>) -> Result<()> {
        self.new_veth(spec, true, None)
    }

    /// [`Rtnl::create_veth_up`] with the host end in link group `group` from the creating
    /// message (IFLA_GROUP): a link that carries the group from the moment it exists, unlike an
    /// alias, which the kernel ignores in RTM_NEWLINK.
    pub fn create_veth_up_in_group(&mut self, spec: &VethSpec<'_>, group: u32) -> Result<()> {
        self.new_veth(spec, true, Some(group))
    }

    fn new_veth(&mut self, spec: &VethSpec<'_>, host_up: bool, group: Option<u32>) -> Result<()> {
        let fd = spec.peer_netns.map(|ns| ns.as_fd().as_raw_fd());
        let mut msg = veth_message(spec, fd);
        if host_up {
            msg.header.flags = LinkFlags::Up;
            msg.header.change_mask = LinkFlags::Up;
        }
        if let Some(group) = group {
            msg.attributes.push(LinkAttribute::Group(group));
        }
        self.ack(
            RouteNetlinkMessage::NewLink(msg),
            NLM_F_CREATE | NLM_F_EXCL,
            "create veth",
            &spec.host.name,
        )
    }

    /// Creates a macvlan / ipvlan child of `spec.parent` in the socket's namespace. An existing
    /// link of that name is an error ([`crate::Error::is_exists`]). The child is not set up.
    ///
    /// A passthru macvlan must be its parent's only child (EINVAL otherwise, either way round).
    /// macvlan, ipvlan and bridge / bond ports all claim the lower device's rx handler: a bridge
    /// port cannot be a parent, nor a macvlan parent an ipvlan one (EBUSY).
    pub fn create_child(&mut self, spec: &ChildSpec) -> Result<()> {
        let op = match spec.kind {
            ChildKind::Macvlan(_) => "create macvlan",
            ChildKind::Ipvlan(_) => "create ipvlan",
        };
        check_child(spec).map_err(|why| {
            Error::io(
                format!("{op} {}", spec.name),
                io::Error::new(io::ErrorKind::InvalidInput, why),
            )
        })?;
        let msg = RouteNetlinkMessage::NewLink(child_message(spec));
        self.ack(msg, NLM_F_CREATE | NLM_F_EXCL, op, &spec.name)
    }

    /// Creates a dummy device: a parent for macvlans in tests, or a stand-in for a host NIC.
    pub fn create_dummy(&mut self, name: &str, mtu: Option<u32>) -> Result<()> {
        let msg = RouteNetlinkMessage::NewLink(new_kind_message(name, mtu, InfoKind::Dummy));
        self.ack(msg, NLM_F_CREATE | NLM_F_EXCL, "create dummy", &name)
    }

    /// Moves link `index` into `target` and, when `new_name` is given, renames it there, in one
    /// RTM_SETLINK (the kernel moves first, then applies IFLA_IFNAME in the target namespace).
    ///
    /// The link arrives down and without addresses; its MTU, MAC and kind-specific settings
    /// survive. Its index stays the same unless the target already uses it, so look it up by name
    /// there. Moving is not atomic with renaming: if the current name is free in the target
    /// but `new_name` is taken, the kernel moves the link and then fails the rename. That error
    /// says so (errno EEXIST), since the link must then be cleaned up in the target under its old
    /// name.
    pub fn move_to_netns(
        &mut self,
        index: u32,
        target: &NetnsHandle,
        new_name: Option<&str>,
    ) -> Result<()> {
        let fd = target.as_fd().as_raw_fd();
        let msg = RouteNetlinkMessage::SetLink(move_message(index, fd, new_name));
        let what = format!("index {index} to {}", target.path().display());
        let err = match self.ack(msg, 0, "move link", &what) {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        let moved_anyway =
            new_name.is_some() && err.is_exists() && matches!(self.link_by_index(index), Ok(None));
        if !moved_anyway {
            return Err(err);
        }
        Err(err.explained(
            "moved, but not renamed: the name is taken in the target, where the link keeps its old name",
        ))
    }

    /// Renames link `index`. Kernels before 6.2 refuse to rename a link that is up (EBUSY):
    /// set it down first there.
    pub fn rename(&mut self, index: u32, name: &str) -> Result<()> {
        let msg = RouteNetlinkMessage::SetLink(rename_message(index, name));
        let what = format!("index {index} to {name}");
        match self.ack(msg, 0, "rename link", &what) {
            Err(e) if e.errno() == Some(libc::EBUSY) => {
                Err(e.explained("the link is up; this kernel renames only links that are down"))
            }
            other => other,
        }
    }

    /// Sets a link administratively up.
    pub fn set_up(&mut self, index: u32) -> Result<()> {
        let msg = RouteNetlinkMessage::SetLink(set_up_message(index, true));
        self.ack(msg, 0, "set up", &format_args!("index {index}"))
    }

    /// Sets a link administratively down.
    pub fn set_down(&mut self, index: u32) -> Result<()> {
        let msg = RouteNetlinkMessage::SetLink(set_up_message(index, false));
        self.ack(msg, 0, "set down", &format_args!("index {index}"))
    }

    /// Sets a link administratively down and its alias, in one request.
    pub fn set_down_with_alias(&mut self, index: u32, alias: &str) -> Result<()> {
        let msg = RouteNetlinkMessage::SetLink(alias_message(set_up_message(index, false), alias));
        self.ack(msg, 0, "set down", &format_args!("index {index}"))
    }

    /// Makes a link a port of `controller`, or of nothing (`None`: IFLA_MASTER 0, "nomaster").
    pub fn set_controller(&mut self, index: u32, controller: Option<u32>) -> Result<()> {
        let attr = LinkAttribute::Controller(controller.unwrap_or(0));
        let msg = RouteNetlinkMessage::SetLink(set_attribute_message(index, attr));
        self.ack(msg, 0, "set controller", &format_args!("index {index}"))
    }

    /// Sets a link's MTU.
    pub fn set_mtu(&mut self, index: u32, mtu: u32) -> Result<()> {
        let msg =
            RouteNetlinkMessage::SetLink(set_attribute_message(index, LinkAttribute::Mtu(mtu)));
        self.ack(msg, 0, "set mtu", &format_args!("index {index}"))
    }

    /// Makes bridge `index` hand the IPv4 and IPv6 frames it forwards between its ports to the
    /// `inet` hooks (`nf_call_iptables`, `nf_call_ip6tables`), whatever the namespace's
    /// `bridge-nf-call-*` sysctls say: the firewall (NetworkPolicy) then sees traffic between
    /// pods on one bridge, with conntrack. Needs br_netfilter in the kernel; without it the
    /// kernel keeps the setting and nothing is handed over.
    ///
    /// A bridge that already has both set as asked is left alone: a change is a netdev event
    /// on which the kernel walks the namespace's whole IPv6 routing table (a route or two per
    /// pod link), so a start with thousands of pods would pay it once per bridge.
    pub fn set_bridge_netfilter(&mut self, index: u32, on: bool) -> Result<()> {
        let msg = RouteNetlinkMessage::GetLink(get_by_index_message(index));
        let reply = self.get(msg, "get link", &format_args!("index {index}"))?;
        if bridge_netfilter(&reply) == Some((on, on)) {
            return Ok(());
        }
        let info = vec![
            LinkInfo::Kind(InfoKind::Bridge),
            LinkInfo::Data(InfoData::Bridge(vec![
                InfoBridge::NfCallIpTables(on),
                InfoBridge::NfCallIp6Tables(on),
            ])),
        ];
        let attr = LinkAttribute::LinkInfo(info);
        // Only RTM_NEWLINK (without NLM_F_CREATE) passes IFLA_INFO_DATA to the bridge's
        // changelink; RTM_SETLINK ignores it.
        let msg = RouteNetlinkMessage::NewLink(set_attribute_message(index, attr));
        self.ack(
            msg,
            0,
            "set bridge netfilter",
            &format_args!("index {index}"),
        )
    }

    /// Sets a link's MAC address.
    pub fn set_mac(&mut self, index: u32, mac: Mac) -> Result<()> {
        let attr = LinkAttribute::Address(mac.to_vec());
        let msg = RouteNetlinkMessage::SetLink(set_attribute_message(index, attr));
        self.ack(msg, 0, "set mac", &format_args!("index {index}"))
    }

    /// Sets the alias (IFLA_IFALIAS, at most 255 bytes) of the link named `name`. The kernel
    /// ignores an alias in RTM_NEWLINK, so a link gets one only by this second request.
    /// `Ok(false)` when there is no such link.
    pub fn set_alias_by_name(&mut self, name: &str, alias: &str) -> Result<bool> {
        let msg = RouteNetlinkMessage::SetLink(alias_message(by_name(name), alias));
        gone_as_false(self.ack(msg, 0, "set alias", &name))
    }

    /// Sets the bridge-port hairpin mode of the link named `name`, a bridge port: frames may go
    /// back out of the port they came in on, so a pod reaches itself through an address the node
    /// translates (a Service VIP). An RTM_NEWLINK without NLM_F_CREATE: the kernel applies port
    /// settings (IFLA_INFO_SLAVE_DATA) only there; `alias` (IFLA_IFALIAS), when given, is set in
    /// the same request. `Ok(false)` when there is no such link.
    pub fn set_hairpin_by_name(
        &mut self,
        name: &str,
        on: bool,
        alias: Option<&str>,
    ) -> Result<bool> {
        let mut msg = hairpin_message(by_name(name), on);
        if let Some(alias) = alias {
            msg = alias_message(msg, alias);
        }
        gone_as_false(self.ack(RouteNetlinkMessage::NewLink(msg), 0, "set hairpin", &name))
    }

    /// Sets the alias and the link group of the link named `name` and, with `hairpin`, its
    /// bridge-port hairpin mode, in one RTM_NEWLINK without NLM_F_CREATE (as
    /// [`Rtnl::set_hairpin_by_name`]). `Ok(false)` when there is no such link.
    pub fn set_alias_group_by_name(
        &mut self,
        name: &str,
        alias: &str,
        group: u32,
        hairpin: Option<bool>,
    ) -> Result<bool> {
        let msg = alias_group_message(by_name(name), alias, group, hairpin);
        gone_as_false(self.ack(RouteNetlinkMessage::NewLink(msg), 0, "set alias", &name))
    }

    /// Takes the link named `name` off its controller (IFLA_MASTER 0) and into link group
    /// `group` in one RTM_SETLINK, leaving it up: unlike [`Rtnl::retire_by_name`] it does not
    /// close the link, which costs the kernel an RCU grace period under the RTNL lock.
    /// `Ok(false)` when there is no such link.
    pub fn release_port_by_name(&mut self, name: &str, group: u32) -> Result<bool> {
        let mut msg = group_message(by_name(name), group);
        msg.attributes.push(LinkAttribute::Controller(0));
        gone_as_false(self.ack(RouteNetlinkMessage::SetLink(msg), 0, "release port", &name))
    }

    /// Moves a link into link group `group`.
    pub fn set_group(&mut self, index: u32, group: u32) -> Result<()> {
        let attr = LinkAttribute::Group(group);
        let msg = RouteNetlinkMessage::SetLink(set_attribute_message(index, attr));
        self.ack(msg, 0, "set group", &format_args!("index {index}"))
    }

    /// Takes a link out of service in one request: administratively down, detached from its
    /// controller, and moved into link group `group` (for a later [`Rtnl::delete_group`]).
    /// `Ok(false)` when the link was already gone.
    pub fn retire(&mut self, index: u32, group: u32) -> Result<bool> {
        let msg = RouteNetlinkMessage::SetLink(retire_message(by_index(index), group));
        gone_as_false(self.ack(msg, 0, "retire link", &format_args!("index {index}")))
    }

    /// [`Rtnl::retire`] by name, saving the lookup round trip. `Ok(false)` when there is none.
    pub fn retire_by_name(&mut self, name: &str, group: u32) -> Result<bool> {
        let msg = RouteNetlinkMessage::SetLink(retire_message(by_name(name), group));
        gone_as_false(self.ack(msg, 0, "retire link", &name))
    }

    /// Deletes a link. `Ok(false)` when it was already gone.
    pub fn delete_link(&mut self, index: u32) -> Result<bool> {
        let msg = RouteNetlinkMessage::DelLink(by_index(index));
        gone_as_false(self.ack(msg, 0, "delete link", &format_args!("index {index}")))
    }

    /// Deletes a link by name. `Ok(false)` when there was none.
    pub fn delete_link_by_name(&mut self, name: &str) -> Result<bool> {
        let msg = RouteNetlinkMessage::DelLink(by_name(name));
        gone_as_false(self.ack(msg, 0, "delete link", &name))
    }

    /// Deletes every link in `group` with one RTM_DELLINK: the kernel batches the
    /// unregistration, so its RCU waits are paid once, not per link. Ok when the group is empty.
    pub fn delete_group(&mut self, group: u32) -> Result<()> {
        let msg = RouteNetlinkMessage::DelLink(delete_group_message(group));
        // An empty group answers ENODEV.
        gone_as_false(self.ack(msg, 0, "delete link group", &group)).map(drop)
    }
}

fn not_found_as_none<T>(r: Result<Option<T>>) -> Result<Option<T>> {
    match r {
        Err(e) if e.is_not_found() => Ok(None),
        other => other,
    }
}

fn gone_as_false(r: Result<()>) -> Result<bool> {
    match r {
        Ok(()) => Ok(true),
        Err(e) if e.is_not_found() => Ok(false),
        Err(e) => Err(e),
    }
}

fn by_index(index: u32) -> LinkMessage {
    let mut msg = LinkMessage::default();
    msg.header.index = index;
    msg
}

fn by_name(name: &str) -> LinkMessage {
    let mut msg = LinkMessage::default();
    msg.attributes.push(LinkAttribute::IfName(name.to_owned()));
    msg
}

/// Replies without statistics: smaller, and we never read them.
fn skip_stats() -> LinkAttribute {
    LinkAttribute::ExtMask(vec![LinkExtentMask::SkipStats])
}

pub(crate) fn get_by_name_message(name: &str) -> LinkMessage {
    let mut msg = by_name(name);
    msg.attributes.push(skip_stats());
    msg
}

pub(crate) fn get_by_index_message(index: u32) -> LinkMessage {
    let mut msg = by_index(index);
    msg.attributes.push(skip_stats());
    msg
}

/// A link dump request, kernel-filtered by controller when given (needs strict checking).
pub(crate) fn dump_message(controller: Option<u32>) -> LinkMessage {
    let mut msg = LinkMessage::default();
    msg.attributes.push(skip_stats());
    if let Some(c) = controller {
        msg.attributes.push(LinkAttribute::Controller(c));
    }
    msg
}

pub(crate) fn bridge_message(name: &str, mtu: Option<u32>) -> LinkMessage {
    new_kind_message(name, mtu, InfoKind::Bridge)
}

/// A create request for a device kind that needs nothing but a name (bridge, dummy).
pub(crate) fn new_kind_message(name: &str, mtu: Option<u32>, kind: InfoKind) -> LinkMessage {
    let mut msg = by_name(name);
    if let Some(mtu) = mtu {
        msg.attributes.push(LinkAttribute::Mtu(mtu));
    }
    msg.attributes
        .push(LinkAttribute::LinkInfo(vec![LinkInfo::Kind(kind)]));
    msg
}

/// Refuses a MAC where the kernel would silently replace it with the parent's.
pub(crate) fn check_child(spec: &ChildSpec) -> std::result::Result<(), &'static str> {
    match (spec.kind, spec.mac) {
        (ChildKind::Ipvlan(_), Some(_)) => {
            Err("an ipvlan shares its parent's mac; it cannot have its own")
        }
        (ChildKind::Macvlan(MacvlanMode::Passthru), Some(_)) => {
            Err("a passthru macvlan takes its parent's mac; it cannot have its own")
        }
        _ => Ok(()),
    }
}

pub(crate) fn child_message(spec: &ChildSpec) -> LinkMessage {
    let mut msg = by_name(&spec.name);
    if let Some(mtu) = spec.mtu {
        msg.attributes.push(LinkAttribute::Mtu(mtu));
    }
    if let Some(mac) = spec.mac {
        msg.attributes.push(LinkAttribute::Address(mac.to_vec()));
    }
    msg.attributes.push(LinkAttribute::Link(spec.parent));
    let (kind, data) = match spec.kind {
        ChildKind::Macvlan(mode) => (
            InfoKind::MacVlan,
            InfoData::MacVlan(vec![InfoMacVlan::Mode(mode.to_nl())]),
        ),
        ChildKind::Ipvlan(mode) => (
            InfoKind::IpVlan,
            InfoData::IpVlan(vec![InfoIpVlan::Mode(mode.to_nl())]),
        ),
    };
    msg.attributes.push(LinkAttribute::LinkInfo(vec![
        LinkInfo::Kind(kind),
        LinkInfo::Data(data),
    ]));
    msg
}

/// Addressed by index, so IFLA_IFNAME is the new name, applied in the target namespace.
pub(crate) fn move_message(index: u32, netns_fd: RawFd, new_name: Option<&str>) -> LinkMessage {
    let mut msg = by_index(index);
    msg.attributes.push(LinkAttribute::NetNsFd(netns_fd));
    if let Some(name) = new_name {
        msg.attributes.push(LinkAttribute::IfName(name.to_owned()));
    }
    msg
}

/// Addressed by index, so IFLA_IFNAME is the new name (by name it would select the link).
pub(crate) fn rename_message(index: u32, name: &str) -> LinkMessage {
    set_attribute_message(index, LinkAttribute::IfName(name.to_owned()))
}

/// One queue each way for either end. Unasked, the kernel allocates a veth as many queues as
/// there are CPUs and then cuts the ones in use to one, which costs an RCU grace period under
/// the RTNL lock (`netif_set_real_num_tx_queues` as it disables queues): 0.1–0.2 ms of every
/// attach, and of every other attach and detach on the node waiting for the lock. A pod's veth
/// uses one queue either way.
fn end_attributes(msg: &mut LinkMessage, end: &VethEnd) {
    msg.attributes.push(LinkAttribute::IfName(end.name.clone()));
    msg.attributes.push(LinkAttribute::NumTxQueues(1));
    msg.attributes.push(LinkAttribute::NumRxQueues(1));
    if let Some(mtu) = end.mtu {
        msg.attributes.push(LinkAttribute::Mtu(mtu));
    }
    if let Some(mac) = end.mac {
        msg.attributes.push(LinkAttribute::Address(mac.to_vec()));
    }
}

/// The veth create request; `peer_netns_fd` is the fd behind `spec.peer_netns`.
pub(crate) fn veth_message(spec: &VethSpec<'_>, peer_netns_fd: Option<RawFd>) -> LinkMessage {
    let mut peer = LinkMessage::default();
    end_attributes(&mut peer, &spec.peer);
    if let Some(fd) = peer_netns_fd {
        peer.attributes.push(LinkAttribute::NetNsFd(fd));
    }
    let mut msg = LinkMessage::default();
    end_attributes(&mut msg, &spec.host);
    if let Some(controller) = spec.host_controller {
        msg.attributes.push(LinkAttribute::Controller(controller));
    }
    msg.attributes.push(LinkAttribute::LinkInfo(vec![
        LinkInfo::Kind(InfoKind::Veth),
        LinkInfo::Data(InfoData::Veth(InfoVeth::Peer(peer))),
    ]));
    msg
}

pub(crate) fn set_up_message(index: u32, up: bool) -> LinkMessage {
    let mut msg = by_index(index);
    if up {
        msg.header.flags = LinkFlags::Up;
    }
    msg.header.change_mask = LinkFlags::Up;
    msg
}

pub(crate) fn set_attribute_message(index: u32, attr: LinkAttribute) -> LinkMessage {
    let mut msg = by_index(index);
    msg.attributes.push(attr);
    msg
}

/// Sets IFLA_IFALIAS on the link `msg` addresses (by index or name).
pub(crate) fn alias_message(mut msg: LinkMessage, alias: &str) -> LinkMessage {
    msg.attributes
        .push(LinkAttribute::IfAlias(alias.to_owned()));
    msg
}

/// Bridge-port hairpin mode on or off for the link `msg` addresses.
pub(crate) fn hairpin_message(mut msg: LinkMessage, on: bool) -> LinkMessage {
    msg.attributes.push(LinkAttribute::LinkInfo(vec![
        LinkInfo::PortKind(InfoPortKind::Bridge),
        LinkInfo::PortData(InfoPortData::BridgePort(vec![InfoBridgePort::HairpinMode(
            on,
        )])),
    ]));
    msg
}

/// The link group of the link `msg` addresses.
pub(crate) fn group_message(mut msg: LinkMessage, group: u32) -> LinkMessage {
    msg.attributes.push(LinkAttribute::Group(group));
    msg
}

/// Alias, link group and (when given) bridge-port hairpin mode of the link `msg` addresses.
pub(crate) fn alias_group_message(
    msg: LinkMessage,
    alias: &str,
    group: u32,
    hairpin: Option<bool>,
) -> LinkMessage {
    let msg = group_message(alias_message(msg, alias), group);
    match hairpin {
        Some(on) => hairpin_message(msg, on),
        None => msg,
    }
}

/// Down, nomaster and into `group`, in one RTM_SETLINK addressed by `target` (index or name).
pub(crate) fn retire_message(mut msg: LinkMessage, group: u32) -> LinkMessage {
    msg.header.change_mask = LinkFlags::Up;
    msg.attributes.push(LinkAttribute::Controller(0));
    msg.attributes.push(LinkAttribute::Group(group));
    msg
}

/// Index 0 and no name: the kernel deletes by IFLA_GROUP.
pub(crate) fn delete_group_message(group: u32) -> LinkMessage {
    let mut msg = LinkMessage::default();
    msg.attributes.push(LinkAttribute::Group(group));
    msg
}

/// A link message's bytes, its netlink header included, checked to be one: its index (struct
/// ifinfomsg's) and its attributes' bytes. An error says what is malformed.
fn link_message(msg: &[u8]) -> std::result::Result<(u32, &[u8]), &'static str> {
    /// struct nlmsghdr, then struct ifinfomsg (linux/netlink.h, linux/rtnetlink.h).
    const HEADERS: usize = 16 + 16;
    /// RTM_NEWLINK (linux/rtnetlink.h).
    const NEWLINK: u16 = 16;
    if msg.len() < HEADERS || u16::from_ne_bytes([msg[4], msg[5]]) != NEWLINK {
        return Err("not a link message");
    }
    // ifi_index, after ifi_family, a pad byte and ifi_type; a C int, as `parse_link` reads it.
    let index = u32::from_ne_bytes([msg[20], msg[21], msg[22], msg[23]]);
    Ok((index, &msg[HEADERS..]))
}

/// The controller (IFLA_MASTER) named by a link message's bytes, its netlink header included,
/// read without parsing its other attributes; `None` when it has none. An error says what is
/// malformed.
pub(crate) fn controller_of(msg: &[u8]) -> std::result::Result<Option<u32>, &'static str> {
    /// IFLA_MASTER (linux/if_link.h).
    const MASTER: u16 = 10;
    /// The nested and byte-order flags of an attribute's type (linux/netlink.h).
    const TYPE_MASK: u16 = !(1 << 15 | 1 << 14);
    let u16_at = |b: &[u8], at: usize| u16::from_ne_bytes([b[at], b[at + 1]]);
    let (_, mut attrs) = link_message(msg)?;
    while !attrs.is_empty() {
        if attrs.len() < 4 {
            return Err("an attribute cut short");
        }
        let len = usize::from(u16_at(attrs, 0));
        if len < 4 || len > attrs.len() {
            return Err("an attribute's length out of bounds");
        }
        if u16_at(attrs, 2) & TYPE_MASK == MASTER {
            let value = attrs
                .get(4..8)
                .filter(|_| len == 8)
                .ok_or("an IFLA_MASTER that is not 4 bytes")?;
            let index = u32::from_ne_bytes([value[0], value[1], value[2], value[3]]);
            return Ok((index != 0).then_some(index));
        }
        attrs = attrs.get(len.next_multiple_of(4)..).unwrap_or_default();
    }
    Ok(None)
}

/// The index of the link a link message's bytes (its netlink header included) describe, read
/// without parsing its attributes. An error says what is malformed.
pub(crate) fn index_of(msg: &[u8]) -> std::result::Result<u32, &'static str> {
    link_message(msg).map(|(index, _)| index)
}

/// A bridge's `nf_call_iptables` and `nf_call_ip6tables` from a link reply; `None` when the
/// reply is not a bridge's or lacks either.
fn bridge_netfilter(msg: &RouteNetlinkMessage) -> Option<(bool, bool)> {
    let RouteNetlinkMessage::NewLink(m) = msg else {
        return None;
    };
    let data = m.attributes.iter().find_map(|a| match a {
        LinkAttribute::LinkInfo(info) => info.iter().find_map(|i| match i {
            LinkInfo::Data(InfoData::Bridge(data)) => Some(data),
            _ => None,
        }),
        _ => None,
    })?;
    let v4 = data.iter().find_map(|d| match d {
        InfoBridge::NfCallIpTables(on) => Some(*on),
        _ => None,
    })?;
    let v6 = data.iter().find_map(|d| match d {
        InfoBridge::NfCallIp6Tables(on) => Some(*on),
        _ => None,
    })?;
    Some((v4, v6))
}

pub(crate) fn parse_link_reply(msg: &RouteNetlinkMessage) -> Option<Link> {
    match msg {
        RouteNetlinkMessage::NewLink(m) => Some(parse_link(m)),
        _ => None,
    }
}

pub(crate) fn parse_link(msg: &LinkMessage) -> Link {
    let mut link = Link {
        index: msg.header.index,
        name: String::new(),
        kind: None,
        mac: None,
        mtu: 0,
        controller: None,
        up: msg.header.flags.contains(LinkFlags::Up),
        group: 0,
        parent: None,
        macvlan_mode: None,
        ipvlan_mode: None,
        permanent_mac: None,
        alias: None,
        queues: (0, 0),
    };
    let mut lower_elsewhere = false;
    for attr in &msg.attributes {
        match attr {
            LinkAttribute::IfName(n) => link.name.clone_from(n),
            LinkAttribute::IfAlias(a) if !a.is_empty() => link.alias = Some(a.clone()),
            LinkAttribute::Mtu(m) => link.mtu = *m,
            LinkAttribute::Controller(c) if *c != 0 => link.controller = Some(*c),
            LinkAttribute::Group(g) => link.group = *g,
            LinkAttribute::NumTxQueues(n) => link.queues.0 = *n,
            LinkAttribute::NumRxQueues(n) => link.queues.1 = *n,
            LinkAttribute::Address(a) => link.mac = Mac::try_from(a.as_slice()).ok(),
            LinkAttribute::PermAddress(a) => link.permanent_mac = Mac::try_from(a.as_slice()).ok(),
            LinkAttribute::Link(l) if *l != msg.header.index => link.parent = Some(*l),
            LinkAttribute::LinkNetNsId(_) => lower_elsewhere = true,
            LinkAttribute::LinkInfo(infos) => parse_link_info(&mut link, infos),
            _ => {}
        }
    }
    if lower_elsewhere {
        link.parent = None;
    }
    link
}

fn parse_link_info(link: &mut Link, infos: &[LinkInfo]) {
    for info in infos {
        match info {
            LinkInfo::Kind(k) => link.kind = Some(k.to_string()),
            LinkInfo::Data(InfoData::MacVlan(data)) => {
                link.macvlan_mode = data.iter().find_map(|d| match d {
                    InfoMacVlan::Mode(m) => MacvlanMode::from_nl(*m),
                    _ => None,
                });
            }
            LinkInfo::Data(InfoData::IpVlan(data)) => {
                link.ipvlan_mode = data.iter().find_map(|d| match d {
                    InfoIpVlan::Mode(m) => IpvlanMode::from_nl(*m),
                    _ => None,
                });
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests;
