//! doctor's checks of cluster mode: this node's pod CIDR and where it came from, the API
//! server, and each route to another node's pods, checked against the kernel's main table.

use std::net::IpAddr;

use ipnet::IpNet;
use knid_netops::route::RTPROT_KNID;
use knid_netops::Rtnl;
use knid_transport::pb;

use super::Finding;

/// Cluster mode's findings; none when it is off.
pub fn cluster(status: &pb::StatusResponse, out: &mut Vec<Finding>) {
    let Some(c) = status.cluster.as_ref() else {
        return;
    };
    const CHECK: &str = "cluster";
    out.push(if c.api_reachable {
        Finding::ok(
            CHECK,
            format!(
                "Node {} watched at {} ({} node(s), resource version {})",
                c.node_name, c.api_server, c.nodes, c.resource_version
            ),
        )
    } else {
        Finding::warn(
            CHECK,
            format!(
                "the Kubernetes API at {} does not answer: {}; pods and routes keep their last \
                 known state",
                c.api_server, c.api_message
            ),
            vec![
                "check the API server and knid's credentials (service account token, \
                 ClusterRole knid: nodes get/list/watch)"
                    .to_owned(),
            ],
        )
    });
    if !c.pod_cidr_network.is_empty() {
        out.push(if c.pod_cidrs.is_empty() {
            Finding::fail(
                "pod-cidr",
                format!(
                    "network {} waits for Node {}'s spec.podCIDRs",
                    c.pod_cidr_network, c.node_name
                ),
                vec![
                    "start kube-controller-manager with --allocate-node-cidrs and \
                     --cluster-cidr, or set the Node's spec.podCIDRs when it is created"
                        .to_owned(),
                ],
            )
        } else {
            Finding::ok(
                "pod-cidr",
                format!(
                    "network {}: {} from Node {} spec.podCIDRs{}",
                    c.pod_cidr_network,
                    c.pod_cidrs.join(", "),
                    c.node_name,
                    if c.api_reachable {
                        ""
                    } else {
                        " (as recorded; the Kubernetes API has not confirmed them since knid \
                         started or lost it)"
                    }
                ),
            )
        });
    }
    published(c, out);
    routes(c, out);
}

/// What knid wrote on its own Node, and whether its writes go through.
fn published(c: &pb::Cluster, out: &mut Vec<Finding>) {
    const CHECK: &str = "node-publish";
    let Some(p) = c.published.as_ref() else {
        return;
    };
    if !p.error.is_empty() {
        out.push(Finding::fail(
            CHECK,
            format!("knid cannot write on Node {}: {}", c.node_name, p.error),
            vec![
                "check knid's ClusterRole: nodes get/list/watch/patch and nodes/status patch                  (deploy/kubernetes/knid-daemonset.yaml)"
                    .to_owned(),
            ],
        ));
        return;
    }
    if p.network_unavailable.is_empty() {
        out.push(Finding::warn(
            CHECK,
            format!(
                "nothing written on Node {} yet: knid publishes once the Nodes are read",
                c.node_name
            ),
            Vec::new(),
        ));
        return;
    }
    let mut message = format!(
        "Node {}: NetworkUnavailable={} ({}){}",
        c.node_name,
        p.network_unavailable,
        p.condition_reason,
        if p.tainted {
            ", tainted knid.io/pod-network-full:NoSchedule (the pod network is full)"
        } else {
            ""
        }
    );
    if p.network_unavailable == "True" {
        message.push_str(&format!(": {}", p.condition_message));
        out.push(Finding::warn(
            CHECK,
            message,
            vec![
                "see the network findings above; `knictl setup-node-network` repairs the node side"
                    .to_owned(),
            ],
        ));
    } else {
        out.push(Finding::ok(CHECK, message));
    }
}

/// Each route knid reports, and whether the kernel has it (and, through the overlay, its FDB
/// entry and neighbour).
fn routes(c: &pb::Cluster, out: &mut Vec<Finding>) {
    const CHECK: &str = "node-route";
    let mut kernel = Kernel::read();
    for r in &c.routes {
        let what = format!("node {} {} ({})", r.node, r.dst, dash(&r.backend));
        out.push(match r.state.as_str() {
            "installed" => match &mut kernel {
                Err(e) => Finding::warn(CHECK, format!("{what}: read routes: {e}"), vec![]),
                Ok(kernel) => match kernel.missing(r) {
                    None if r.device.is_empty() => {
                        Finding::ok(CHECK, format!("{what} via {}", r.via))
                    }
                    None => Finding::ok(
                        CHECK,
                        format!(
                            "{what} via {} dev {}: FDB {} -> {} and neighbour in the kernel",
                            r.via, r.device, r.vtep_mac, r.underlay
                        ),
                    ),
                    Some(missing) => Finding::fail(
                        CHECK,
                        format!("{what} via {}: {missing}", r.via),
                        vec![format!(
                            "knid puts it back within its route_resync; meanwhile: {}",
                            repair(r)
                        )],
                    ),
                },
            },
            "unreachable" => Finding::fail(
                CHECK,
                format!("{what}: {}", r.message),
                vec![
                    "give the node an InternalIP of that family; under cluster.backend = \
                     \"host-gw\" nodes must share a subnet (\"auto\" reaches the others over \
                     VXLAN)"
                        .to_owned(),
                ],
            ),
            "awaiting-vtep" => Finding::fail(
                CHECK,
                format!("{what}: {}", r.message),
                vec![format!(
                    "check that knid runs on node {} with cluster.backend auto or vxlan, and \
                     can patch its Node (kubectl get node {} -o \
                     jsonpath='{{.metadata.annotations.knid\\.io/vxlan}}')",
                    r.node, r.node
                )],
            ),
            _ => Finding::fail(
                CHECK,
                format!("{what}: {}", r.message),
                vec!["remove the other route to that destination, or see knid's log".to_owned()],
            ),
        });
    }
}

fn dash(s: &str) -> &str {
    if s.is_empty() {
        "-"
    } else {
        s
    }
}

/// The commands that put a route (and its overlay entries) back by hand.
fn repair(r: &pb::NodeRoute) -> String {
    if r.device.is_empty() {
        return format!(
            "ip route replace {} via {} proto {RTPROT_KNID}",
            r.dst, r.via
        );
    }
    format!(
        "bridge fdb replace {mac} dev {dev} dst {ul} self permanent; ip neigh replace {via} \
         lladdr {mac} dev {dev} nud permanent; ip route replace {dst} via {via} dev {dev} \
         onlink proto {RTPROT_KNID}",
        mac = r.vtep_mac,
        dev = r.device,
        ul = r.underlay,
        via = r.via,
        dst = r.dst
    )
}

/// knid's routes in the kernel's main table, and the socket to read overlay entries with.
struct Kernel {
    rtnl: Rtnl,
    routes: Vec<(IpNet, Option<IpAddr>, Option<u32>)>,
}

impl Kernel {
    fn read() -> Result<Kernel, String> {
        let mut rtnl = Rtnl::open().map_err(|e| e.to_string())?;
        let mut routes = Vec::new();
        for v6 in [false, true] {
            for r in rtnl.routes(v6).map_err(|e| e.to_string())? {
                if r.protocol == RTPROT_KNID {
                    routes.push((r.dst, r.gateway, r.oif));
                }
            }
        }
        Ok(Kernel { rtnl, routes })
    }

    /// What of `r` the kernel lacks; `None` when it has all of it.
    fn missing(&mut self, r: &pb::NodeRoute) -> Option<String> {
        let (Ok(dst), Ok(via)) = (r.dst.parse::<IpNet>(), r.via.parse::<IpAddr>()) else {
            return Some("not a route".to_owned());
        };
        let route = self
            .routes
            .iter()
            .find(|(d, g, _)| *d == dst && *g == Some(via));
        if r.device.is_empty() {
            return route
                .is_none()
                .then(|| "not in the kernel's main table".to_owned());
        }
        let dev = match self.rtnl.link_by_name(&r.device) {
            Ok(Some(link)) => link,
            Ok(None) => return Some(format!("overlay device {} is missing", r.device)),
            Err(e) => return Some(format!("look up {}: {e}", r.device)),
        };
        let mut gone = Vec::new();
        if route.is_none_or(|(_, _, oif)| *oif != Some(dev.index)) {
            gone.push(format!("the route via {} dev {}", r.via, r.device));
        }
        let mac = knid_core::MacAddr::parse(&r.vtep_mac).map(|m| m.0).ok();
        let underlay = r.underlay.parse::<IpAddr>().ok();
        let fdb = self.rtnl.fdb(dev.index).unwrap_or_default();
        if !fdb.iter().any(|e| Some(e.mac) == mac && e.dst == underlay) {
            gone.push(format!("the FDB entry {} -> {}", r.vtep_mac, r.underlay));
        }
        let neighbours = self
            .rtnl
            .neighbours(dev.index, via.is_ipv6())
            .unwrap_or_default();
        if !neighbours.iter().any(|n| n.ip == via && n.mac == mac) {
            gone.push(format!("the neighbour {via} -> {}", r.vtep_mac));
        }
        (!gone.is_empty()).then(|| format!("not in the kernel: {}", gone.join(", ")))
    }
}
