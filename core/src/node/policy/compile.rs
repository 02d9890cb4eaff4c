//! From objects to what the kernel enforces: for every pod knid attached on this node, whether
//! each direction is isolated (some policy of its namespace selects it for that direction) and
//! every flow the rules of those policies allow, as address ranges and port ranges, each
//! remembering the policy and rule it came from (for `explain` and `ls`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;

use super::objects::{Key, NamedPort, Peer, PodInfo, Ports, Rule, World, METADATA_NAME};
use super::ranges::{self, Range};
use super::selector::Labels;

pub use knid_netops::nft::Direction;

/// A pod knid attached on this node, as its attach named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalPod {
    /// The sandbox.
    pub sandbox: String,
    /// Its namespace and name.
    pub key: Key,
    /// The labels the attach carried: used until the Pod object is known.
    pub labels: Labels,
    /// The addresses knid gave it.
    pub ips: Vec<IpAddr>,
}

/// A protocol and an inclusive range of its ports.
pub type PortRange = (u8, u16, u16);

/// One allowed flow of a selected pod.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Grant {
    /// Its direction.
    pub direction: Direction,
    /// The selected pod's address.
    pub pod: IpAddr,
    /// The other end's addresses.
    pub peers: Range,
    /// `None`: every protocol and port.
    pub ports: Option<PortRange>,
    /// The index of the policy in [`Compiled::policies`] and of the rule in its direction.
    pub origin: (usize, usize),
}

/// Which policies select one local pod.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// The pod.
    pub key: Key,
    /// Policies isolating it for ingress.
    pub ingress: Vec<Key>,
    /// Policies isolating it for egress.
    pub egress: Vec<Key>,
}

/// What the kernel is to enforce.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Compiled {
    /// Isolated directions of pod addresses.
    pub isolated: BTreeSet<(Direction, IpAddr)>,
    /// Every allowed flow.
    pub grants: Vec<Grant>,
    /// The policies, in the order `Grant::origin` counts them.
    pub policies: Vec<Key>,
    /// What selects each local pod, by sandbox.
    pub selected: BTreeMap<String, Selection>,
}

/// One pod as peers are resolved: its namespace, labels, addresses and named ports.
struct PodView<'w> {
    labels: &'w Labels,
    ips: Vec<IpAddr>,
    ports: &'w [NamedPort],
}

/// Every known pod by namespace (the Pod objects, and the local pods the objects do not know
/// yet), and every namespace's labels.
struct Index<'w> {
    pods: BTreeMap<&'w str, Vec<PodView<'w>>>,
    namespaces: HashMap<&'w str, Labels>,
}

const NO_PORTS: &[NamedPort] = &[];

impl<'w> Index<'w> {
    fn new(world: &'w World, local: &'w [LocalPod]) -> Index<'w> {
        let mut pods: BTreeMap<&str, Vec<PodView>> = BTreeMap::new();
        let local_by_key: HashMap<&Key, &LocalPod> = local.iter().map(|l| (&l.key, l)).collect();
        for (key, pod) in &world.pods {
            let mut ips = pod.ips.clone();
            if let Some(l) = local_by_key.get(key) {
                for ip in &l.ips {
                    if !ips.contains(ip) {
                        ips.push(*ip);
                    }
                }
            }
            pods.entry(key.0.as_str()).or_default().push(PodView {
                labels: &pod.labels,
                ips,
                ports: &pod.ports,
            });
        }
        for l in local.iter().filter(|l| !world.pods.contains_key(&l.key)) {
            pods.entry(l.key.0.as_str()).or_default().push(PodView {
                labels: &l.labels,
                ips: l.ips.clone(),
                ports: NO_PORTS,
            });
        }
        let mut namespaces: HashMap<&str, Labels> = world
            .namespaces
            .iter()
            .map(|(n, l)| (n.as_str(), l.clone()))
            .collect();
        for ns in pods.keys() {
            namespaces
                .entry(ns)
                .or_insert_with(|| Labels::from([(METADATA_NAME.into(), (*ns).to_owned())]));
        }
        Index { pods, namespaces }
    }

    /// The pods a `Peer::Pods` of a policy in `namespace` stands for.
    fn peer_pods<'i>(&'i self, peer: &'i Peer, namespace: &'i str) -> Vec<&'i PodView<'w>> {
        let Peer::Pods { pods, namespaces } = peer else {
            return Vec::new();
        };
        let in_namespace = |ns: &str| match namespaces {
            None => ns == namespace,
            Some(sel) => self.namespaces.get(ns).is_some_and(|l| sel.matches(l)),
        };
        self.pods
            .iter()
            .filter(|(ns, _)| in_namespace(ns))
            .flat_map(|(_, list)| list.iter())
            .filter(|p| pods.matches(p.labels))
            .collect()
    }

    /// The addresses of `rule`'s peers, for a policy in `namespace`.
    fn peer_ranges(&self, rule: &Rule, namespace: &str) -> Vec<Range> {
        let Some(peers) = &rule.peers else {
            return vec![ranges::everything(false), ranges::everything(true)];
        };
        let mut out = Vec::new();
        for peer in peers {
            match peer {
                Peer::Block { cidr, except } => out.extend(ranges::net_except(cidr, except)),
                Peer::Pods { .. } => {
                    for pod in self.peer_pods(peer, namespace) {
                        out.extend(pod.ips.iter().map(|ip| ranges::single(*ip)));
                    }
                }
            }
        }
        out
    }

    /// Every known pod address in `peers` with its named ports: where an egress rule's named
    /// port is resolved (against the destination pod).
    fn pods_in(&self, peers: &[Range]) -> Vec<(IpAddr, &[NamedPort])> {
        let mut out = Vec::new();
        for pod in self.pods.values().flatten() {
            for ip in &pod.ips {
                if peers.iter().any(|r| ranges::contains(r, *ip)) {
                    out.push((*ip, pod.ports));
                }
            }
        }
        out
    }
}

/// The port ranges `rule` allows toward a pod with `named` ports; `None` when it allows every
/// protocol and port.
fn port_ranges(rule: &Rule, named: &[NamedPort]) -> Option<Vec<PortRange>> {
    if rule.ports.is_empty() {
        return None;
    }
    Some(
        rule.ports
            .iter()
            .filter_map(|p| match &p.ports {
                Ports::All => Some((p.protocol, 0, u16::MAX)),
                Ports::Range(first, last) => Some((p.protocol, *first, *last)),
                Ports::Named(name) => named
                    .iter()
                    .find(|n| &n.name == name && n.protocol == p.protocol)
                    .map(|n| (p.protocol, n.port, n.port)),
            })
            .collect(),
    )
}

/// Compiles the policies of `world` for the pods of `local`.
pub fn compile(world: &World, local: &[LocalPod]) -> Compiled {
    compile_for(world, local, local)
}

/// Compiles the policies of `world` for `targets` only, with `local` (the pods attached here)
/// among the peers.
pub fn compile_for(world: &World, local: &[LocalPod], targets: &[LocalPod]) -> Compiled {
    let index = Index::new(world, local);
    let mut out = Compiled::default();
    let mut policy_index: HashMap<&Key, usize> = HashMap::new();
    // Peer addresses per (policy, direction, rule): the same for every local pod.
    let mut peers_of: HashMap<(usize, Direction, usize), Vec<Range>> = HashMap::new();
    for l in targets {
        let object = world.pods.get(&l.key);
        let labels = object.map_or(&l.labels, |p| &p.labels);
        let named = object.map_or(NO_PORTS, |p| p.ports.as_slice());
        let mut selection = Selection {
            key: l.key.clone(),
            ..Selection::default()
        };
        let selecting = world
            .policies
            .range((l.key.0.clone(), String::new())..)
            .take_while(|((ns, _), _)| *ns == l.key.0)
            .filter(|(_, p)| p.selector.matches(labels));
        for (key, policy) in selecting {
            let next = policy_index.len();
            let at = *policy_index.entry(key).or_insert_with(|| {
                out.policies.push(key.clone());
                next
            });
            for (direction, rules) in [
                (Direction::Ingress, &policy.ingress),
                (Direction::Egress, &policy.egress),
            ] {
                let Some(rules) = rules else { continue };
                match direction {
                    Direction::Ingress => selection.ingress.push(key.clone()),
                    Direction::Egress => selection.egress.push(key.clone()),
                }
                for ip in &l.ips {
                    out.isolated.insert((direction, *ip));
                }
                for (r, rule) in rules.iter().enumerate() {
                    let peers = peers_of
                        .entry((at, direction, r))
                        .or_insert_with(|| index.peer_ranges(rule, &policy.namespace));
                    let rule_at = RuleAt {
                        origin: (at, r),
                        rule,
                        direction,
                    };
                    grant(&mut out.grants, &index, &rule_at, l, peers, named);
                }
            }
        }
        if !selection.ingress.is_empty() || !selection.egress.is_empty() {
            out.selected.insert(l.sandbox.clone(), selection);
        }
    }
    out.grants.sort();
    out.grants.dedup();
    out
}

/// A rule and where it is.
struct RuleAt<'p> {
    origin: (usize, usize),
    rule: &'p Rule,
    direction: Direction,
}

/// Adds the grants of one rule for local pod `l`, whose own named ports are `named`.
fn grant(
    grants: &mut Vec<Grant>,
    index: &Index,
    at: &RuleAt,
    l: &LocalPod,
    peers: &[Range],
    named: &[NamedPort],
) {
    let RuleAt {
        origin,
        rule,
        direction,
    } = *at;
    let named_only = Rule {
        peers: None,
        ports: rule
            .ports
            .iter()
            .filter(|p| matches!(p.ports, Ports::Named(_)))
            .cloned()
            .collect(),
    };
    let egress_named = direction == Direction::Egress && !named_only.ports.is_empty();
    for ip in &l.ips {
        let same_family = |r: &&Range| r.0.is_ipv6() == ip.is_ipv6();
        let mut push = |peers: Range, ports: Option<PortRange>| {
            grants.push(Grant {
                direction,
                pod: *ip,
                peers,
                ports,
                origin,
            })
        };
        // Ingress: named ports are the selected pod's own. Egress: numbered ports here, named
        // ones below against each destination pod.
        let own = if direction == Direction::Ingress {
            named
        } else {
            NO_PORTS
        };
        match port_ranges(rule, own) {
            None => peers
                .iter()
                .filter(same_family)
                .for_each(|r| push(*r, None)),
            Some(ports) => {
                for r in peers.iter().filter(same_family) {
                    for p in &ports {
                        push(*r, Some(*p));
                    }
                }
            }
        }
        if egress_named {
            let family: Vec<Range> = peers.iter().filter(same_family).copied().collect();
            for (peer, their_ports) in index.pods_in(&family) {
                for p in port_ranges(&named_only, their_ports).unwrap_or_default() {
                    push(ranges::single(peer), Some(p));
                }
            }
        }
    }
}

/// The pod of `key` as policy sees it: its Pod object if known, else its local attach.
pub fn pod_view(world: &World, local: &[LocalPod], key: &Key) -> Option<PodInfo> {
    let object = world.pods.get(key);
    let attached = local.iter().find(|l| &l.key == key);
    match (object, attached) {
        (Some(o), Some(l)) => {
            let mut info = o.clone();
            for ip in &l.ips {
                if !info.ips.contains(ip) {
                    info.ips.push(*ip);
                }
            }
            Some(info)
        }
        (Some(o), None) => Some(o.clone()),
        (None, Some(l)) => Some(PodInfo {
            labels: l.labels.clone(),
            ips: l.ips.clone(),
            ..PodInfo::default()
        }),
        (None, None) => None,
    }
}
