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

/// Each route knid reports, and whether the kernel has it.
fn routes(c: &pb::Cluster, out: &mut Vec<Finding>) {
    const CHECK: &str = "node-route";
    let kernel = kernel_routes();
    for r in &c.routes {
        let what = format!("node {} {}", r.node, r.dst);
        out.push(match r.state.as_str() {
            "installed" => match &kernel {
                Err(e) => Finding::warn(CHECK, format!("{what}: read routes: {e}"), vec![]),
                Ok(kernel) if has(kernel, &r.dst, &r.via) => {
                    Finding::ok(CHECK, format!("{what} via {}", r.via))
                }
                Ok(_) => Finding::fail(
                    CHECK,
                    format!("{what} via {}: not in the kernel's main table", r.via),
                    vec![format!(
                        "knid puts it back within its route_resync; meanwhile: ip route replace \
                         {} via {} proto {RTPROT_KNID}",
                        r.dst, r.via
                    )],
                ),
            },
            "unreachable" => Finding::fail(
                CHECK,
                format!("{what}: {}", r.message),
                vec![
                    "routes to other nodes (host-gw) need the nodes on one L2: give the node an \
                     InternalIP on this node's subnet, or use an overlay network"
                        .to_owned(),
                ],
            ),
            _ => Finding::fail(
                CHECK,
                format!("{what}: {}", r.message),
                vec!["remove the other route to that destination, or see knid's log".to_owned()],
            ),
        });
    }
}

/// knid's routes in the kernel's main table: (destination, gateway).
fn kernel_routes() -> Result<Vec<(IpNet, Option<IpAddr>)>, String> {
    let mut rtnl = Rtnl::open().map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for v6 in [false, true] {
        for r in rtnl.routes(v6).map_err(|e| e.to_string())? {
            if r.protocol == RTPROT_KNID {
                out.push((r.dst, r.gateway));
            }
        }
    }
    Ok(out)
}

fn has(kernel: &[(IpNet, Option<IpAddr>)], dst: &str, via: &str) -> bool {
    let (Ok(dst), Ok(via)) = (dst.parse::<IpNet>(), via.parse::<IpAddr>()) else {
        return false;
    };
    kernel.contains(&(dst, Some(via)))
}
