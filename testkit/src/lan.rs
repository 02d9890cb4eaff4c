//! A shared L2 for multi-node tests: an "underlay" network namespace holding a bridge that
//! every test node's private host netns is plugged into by a veth (its `eth0`), plus stations
//! of its own (an API server's address on the bridge, an "outside" host). Nothing touches the
//! machine's own interfaces; dropping it unmounts and removes every namespace file it made.

use std::net::{IpAddr, TcpListener};
use std::path::{Path, PathBuf};

use knid_netops::NetnsHandle;
use tempfile::TempDir;

use crate::cni::tool_in;
use crate::kernel::rtnl_in;
use crate::node::TestNode;

/// The underlay's IPv4 subnet: node `i` is `.i`, the bridge `.254`, the outside `.200`.
pub const LAN_V4: &str = "192.168.100";
/// The underlay's IPv6 prefix (/64), numbered as [`LAN_V4`].
pub const LAN_V6: &str = "fd00:100::";
/// The underlay bridge.
const BRIDGE: &str = "ul0";
/// The bridge of the second segment, behind the router ([`Lan::add_segment`]).
const SEGMENT_BRIDGE: &str = "seg1";
/// The second segment's IPv4 subnet, numbered as [`LAN_V4`].
pub const SEGMENT_V4: &str = "192.168.101";
/// The second segment's IPv6 prefix (/64).
pub const SEGMENT_V6: &str = "fd00:101::";

/// A node's address on the underlay, per family.
pub fn node_addr(index: u8, v6: bool) -> IpAddr {
    segment_addr(0, index, v6)
}

/// A station's address on segment `segment`: 0 is the LAN's own, 1 the one behind the router.
pub fn segment_addr(segment: u8, index: u8, v6: bool) -> IpAddr {
    let (v4_net, v6_net) = match segment {
        0 => (LAN_V4, LAN_V6),
        _ => (SEGMENT_V4, SEGMENT_V6),
    };
    let text = if v6 {
        format!("{v6_net}{index:x}")
    } else {
        format!("{v4_net}.{index}")
    };
    text.parse().expect("an underlay address")
}

/// The underlay: its netns and the namespaces of its own stations.
pub struct Lan {
    dir: TempDir,
    mounts: Vec<PathBuf>,
    underlay: PathBuf,
}

impl Lan {
    /// The underlay netns with its bridge up, at `.254` and `::fe`.
    pub fn new() -> Lan {
        let dir = tempfile::Builder::new()
            .prefix("knid-e2e-lan-")
            .tempdir()
            .expect("create tempdir");
        let mut lan = Lan {
            underlay: dir.path().join("underlay"),
            dir,
            mounts: Vec::new(),
        };
        let underlay = lan.underlay.clone();
        lan.create_netns(&underlay);
        let ns = underlay.as_path();
        tool_in(ns, "ip", &["link", "set", "lo", "up"]);
        tool_in(ns, "ip", &["link", "add", BRIDGE, "type", "bridge"]);
        tool_in(
            ns,
            "ip",
            &["addr", "add", &format!("{LAN_V4}.254/24"), "dev", BRIDGE],
        );
        tool_in(
            ns,
            "ip",
            &[
                "addr",
                "add",
                &format!("{LAN_V6}fe/64"),
                "dev",
                BRIDGE,
                "nodad",
            ],
        );
        skip_dad(ns, BRIDGE);
        tool_in(ns, "ip", &["link", "set", BRIDGE, "up"]);
        lan
    }

    /// The underlay netns.
    pub fn underlay(&self) -> &Path {
        &self.underlay
    }

    /// A TCP listener on the underlay bridge's IPv4 address (`port` 0: any), for a server the
    /// nodes reach over the LAN.
    pub fn listen(&self, port: u16) -> TcpListener {
        let ns = NetnsHandle::open(&self.underlay).expect("open underlay");
        knid_netops::run_in(&ns, || {
            TcpListener::bind((format!("{LAN_V4}.254").as_str(), port))
        })
        .expect("enter underlay")
        .expect("bind on the underlay")
    }

    /// Makes the underlay netns a router between the LAN and a second segment (bridge `seg1`,
    /// [`SEGMENT_V4`]`.254` and [`SEGMENT_V6`]`fe`): it forwards both families between its
    /// two subnets and has no route to anything else (no pod CIDR).
    pub fn add_segment(&self) {
        let ns = self.underlay.as_path();
        tool_in(ns, "ip", &["link", "add", SEGMENT_BRIDGE, "type", "bridge"]);
        tool_in(
            ns,
            "ip",
            &[
                "addr",
                "add",
                &format!("{SEGMENT_V4}.254/24"),
                "dev",
                SEGMENT_BRIDGE,
            ],
        );
        tool_in(
            ns,
            "ip",
            &[
                "addr",
                "add",
                &format!("{SEGMENT_V6}fe/64"),
                "dev",
                SEGMENT_BRIDGE,
                "nodad",
            ],
        );
        skip_dad(ns, SEGMENT_BRIDGE);
        tool_in(ns, "ip", &["link", "set", SEGMENT_BRIDGE, "up"]);
        let handle = NetnsHandle::open(ns).expect("open underlay");
        knid_netops::run_in(&handle, || {
            knid_netops::sysctl::write("net/ipv4/ip_forward", "1")?;
            knid_netops::sysctl::write("net/ipv6/conf/all/forwarding", "1")
        })
        .expect("enter underlay")
        .expect("turn on forwarding in the router");
    }

    /// Plugs `host` (a netns) into the underlay as station `index`: a veth `eth0` there with
    /// `.index` and `::index`, up.
    pub fn plug(&self, host: &Path, index: u8) {
        self.plug_at(host, index, 0, false);
    }

    /// Plugs `host` into segment `segment` (0: the LAN, 1: behind the router of
    /// [`Lan::add_segment`]) as station `index`, with default routes via the router when
    /// `routed`.
    pub fn plug_at(&self, host: &Path, index: u8, segment: u8, routed: bool) {
        let port = format!("ul{index}");
        let peer = format!("lan{index}");
        let bridge = if segment == 0 { BRIDGE } else { SEGMENT_BRIDGE };
        let ns = self.underlay.as_path();
        tool_in(
            ns,
            "ip",
            &["link", "add", &port, "type", "veth", "peer", "name", &peer],
        );
        tool_in(ns, "ip", &["link", "set", &port, "master", bridge, "up"]);
        let target = NetnsHandle::open(host).expect("open station netns");
        let mut rtnl = rtnl_in(ns);
        let link = rtnl
            .link_by_name(&peer)
            .expect("look up")
            .expect("the veth peer");
        rtnl.move_to_netns(link.index, &target, Some("eth0"))
            .expect("move the veth into the station");
        for (v6, prefix) in [(false, 24), (true, 64)] {
            let addr = format!("{}/{prefix}", segment_addr(segment, index, v6));
            let mut args = vec!["addr", "add", &addr, "dev", "eth0"];
            if v6 {
                args.push("nodad");
            }
            tool_in(host, "ip", &args);
        }
        skip_dad(host, "eth0");
        tool_in(host, "ip", &["link", "set", "eth0", "up"]);
        tool_in(host, "ip", &["link", "set", "lo", "up"]);
        if routed {
            for v6 in [false, true] {
                let router = segment_addr(segment, 254, v6).to_string();
                let family = if v6 { "-6" } else { "-4" };
                tool_in(
                    host,
                    "ip",
                    &[
                        family, "route", "add", "default", "via", &router, "dev", "eth0",
                    ],
                );
            }
        }
    }

    /// Plugs a test node's private host netns in as station `index`.
    pub fn plug_node(&self, node: &TestNode, index: u8) {
        self.plug(node.host_path(), index);
    }

    /// A namespace of the LAN's own, plugged in as station `index` (an "outside" host).
    pub fn station(&mut self, name: &str, index: u8) -> PathBuf {
        self.station_at(name, index, 0, false)
    }

    /// A namespace of the LAN's own on segment `segment`, routed as [`Lan::plug_at`] says.
    pub fn station_at(&mut self, name: &str, index: u8, segment: u8, routed: bool) -> PathBuf {
        let path = self.dir.path().join(name);
        self.create_netns(&path);
        self.plug_at(&path, index, segment, routed);
        path
    }

    fn create_netns(&mut self, path: &Path) {
        knid_netops::netns::create_bound(path)
            .unwrap_or_else(|e| panic!("create netns {}: {e}", path.display()));
        self.mounts.push(path.to_owned());
    }
}

impl Default for Lan {
    fn default() -> Self {
        Lan::new()
    }
}

impl Drop for Lan {
    fn drop(&mut self) {
        for path in self.mounts.drain(..).rev() {
            let _ = knid_netops::netns::remove_bound(&path);
        }
    }
}

/// Turns DAD off on `ifname` in netns `ns` before it comes up, as knid does on its bridges: a
/// node forwards with its link-local address as the source of its neighbour solicitations, and
/// sends none while DAD holds that address tentative (docs/architecture.md, "Networks and
/// device kinds").
fn skip_dad(ns: &Path, ifname: &str) {
    let handle = NetnsHandle::open(ns).expect("open netns");
    knid_netops::run_in(&handle, || knid_netops::sysctl::skip_dad(ifname))
        .expect("enter netns")
        .unwrap_or_else(|e| panic!("turn off DAD on {ifname}: {e}"));
}
