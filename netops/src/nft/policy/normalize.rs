//! Disjoint elements for the kernel's interval sets that allow exactly the flows of a state:
//! pipapo refuses an element that overlaps another, and one flow may be allowed by many
//! policies.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::state::{ordinal, Allow, Direction, PolicyState, PortRange};

/// An inclusive range of addresses or ports, as numbers.
type Span = (u128, u128);

impl PolicyState {
    /// The same allowed flows, as elements the kernel's interval sets take: per pod and
    /// direction, the any-port peer ranges merged into disjoint ranges; per pod, direction and
    /// protocol, the (peers × ports) rectangles cut into disjoint ones, without what an
    /// any-port range already allows. Allows the kernel cannot hold (see
    /// [`crate::nft::Nft::replace_policy`]) are left out. The result is its own normalized form.
    pub fn normalized(&self) -> PolicyState {
        normalized(self)
    }
}

fn address(v6: bool, n: u128) -> IpAddr {
    if v6 {
        IpAddr::V6(Ipv6Addr::from(n))
    } else {
        IpAddr::V4(Ipv4Addr::from(n as u32))
    }
}

/// The spans sorted, those that overlap or touch joined.
fn merged(mut spans: Vec<Span>) -> Vec<Span> {
    spans.sort_unstable();
    let mut out: Vec<Span> = Vec::with_capacity(spans.len());
    for s in spans {
        match out.last_mut() {
            Some(last) if s.0 <= last.1.saturating_add(1) => last.1 = last.1.max(s.1),
            _ => out.push(s),
        }
    }
    out
}

/// Whether `x` lies in one of `spans` (sorted, disjoint).
fn covered(spans: &[Span], x: u128) -> bool {
    let i = spans.partition_point(|s| s.0 <= x);
    i > 0 && spans[i - 1].1 >= x
}

/// The points of the (peers × ports) `rects` outside the peers of `any` (sorted, disjoint), as
/// peer spans in order, disjoint, each with its disjoint port spans: the peer axis is cut at
/// every rectangle's and `any` span's edge, each slice takes the merged ports of the rectangles
/// over it, and neighbouring slices with the same ports are joined.
fn disjoint(rects: &[(Span, Span)], any: &[Span]) -> Vec<(Span, Vec<Span>)> {
    let mut starts: Vec<(u128, Span)> = rects.iter().map(|(p, q)| (p.0, *q)).collect();
    let mut ends: Vec<(u128, Span)> = rects
        .iter()
        .filter_map(|(p, q)| Some((p.1.checked_add(1)?, *q)))
        .collect();
    starts.sort_unstable();
    ends.sort_unstable();
    let mut cuts: Vec<u128> = starts
        .iter()
        .chain(&ends)
        .map(|(at, _)| *at)
        .chain(
            any.iter()
                .flat_map(|s| [Some(s.0), s.1.checked_add(1)])
                .flatten(),
        )
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    // The port spans over the current slice, with how many rectangles bring each.
    let mut active: BTreeMap<Span, usize> = BTreeMap::new();
    let (mut started, mut ended) = (0, 0);
    let mut out: Vec<(Span, Vec<Span>)> = Vec::new();
    for (i, &cut) in cuts.iter().enumerate() {
        while let Some((_, ports)) = ends.get(ended).filter(|(at, _)| *at == cut) {
            if let Some(n) = active.get_mut(ports) {
                *n -= 1;
                if *n == 0 {
                    active.remove(ports);
                }
            }
            ended += 1;
        }
        while let Some((_, ports)) = starts.get(started).filter(|(at, _)| *at == cut) {
            *active.entry(*ports).or_default() += 1;
            started += 1;
        }
        if active.is_empty() || covered(any, cut) {
            continue;
        }
        let last = cuts.get(i + 1).map_or(u128::MAX, |next| next - 1);
        let ports = merged(active.keys().copied().collect());
        match out.last_mut() {
            Some((peers, p)) if peers.1.checked_add(1) == Some(cut) && *p == ports => {
                peers.1 = last;
            }
            _ => out.push(((cut, last), ports)),
        }
    }
    out
}

pub(super) fn normalized(state: &PolicyState) -> PolicyState {
    #[derive(Default)]
    struct Pod {
        any: Vec<Span>,
        ports: BTreeMap<u8, Vec<(Span, Span)>>,
    }
    let mut pods: BTreeMap<(Direction, IpAddr), Pod> = BTreeMap::new();
    for a in state.allows.iter().filter(|a| a.invalid().is_none()) {
        let pod = pods.entry((a.direction, a.pod)).or_default();
        let peers = (ordinal(a.peers.0), ordinal(a.peers.1));
        match a.ports {
            None => pod.any.push(peers),
            Some(p) => pod
                .ports
                .entry(p.protocol)
                .or_default()
                .push((peers, (u128::from(p.first), u128::from(p.last)))),
        }
    }
    let mut out = PolicyState {
        isolated: state.isolated.clone(),
        allows: Default::default(),
    };
    for ((direction, pod), found) in pods {
        let v6 = pod.is_ipv6();
        let allow = |peers: Span, ports| Allow {
            direction,
            pod,
            peers: (address(v6, peers.0), address(v6, peers.1)),
            ports,
        };
        let any = merged(found.any);
        out.allows.extend(any.iter().map(|s| allow(*s, None)));
        for (protocol, rects) in found.ports {
            for (peers, ports) in disjoint(&rects, &any) {
                out.allows.extend(ports.into_iter().map(|q| {
                    allow(
                        peers,
                        Some(PortRange {
                            protocol,
                            first: q.0 as u16,
                            last: q.1 as u16,
                        }),
                    )
                }));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(s: &str) -> IpAddr {
        s.parse().expect("address")
    }

    fn any(direction: Direction, pod: &str, first: &str, last: &str) -> Allow {
        Allow {
            direction,
            pod: v4(pod),
            peers: (v4(first), v4(last)),
            ports: None,
        }
    }

    fn ports(a: Allow, protocol: u8, first: u16, last: u16) -> Allow {
        Allow {
            ports: Some(PortRange {
                protocol,
                first,
                last,
            }),
            ..a
        }
    }

    fn state(allows: &[Allow]) -> PolicyState {
        PolicyState {
            isolated: Default::default(),
            allows: allows.iter().copied().collect(),
        }
    }

    /// Whether `state` lets the flow through (as if the pod were isolated that way).
    fn allowed(
        state: &PolicyState,
        direction: Direction,
        pod: IpAddr,
        peer: IpAddr,
        protocol: u8,
        port: u16,
    ) -> bool {
        state.allows.iter().any(|a| {
            a.direction == direction
                && a.pod == pod
                && (ordinal(a.peers.0)..=ordinal(a.peers.1)).contains(&ordinal(peer))
                && a.ports
                    .is_none_or(|p| p.protocol == protocol && (p.first..=p.last).contains(&port))
        })
    }

    /// No two elements of one kernel set overlap, and no ports element overlaps an any-port
    /// range of its pod.
    fn assert_disjoint(state: &PolicyState) {
        let all: Vec<&Allow> = state.allows.iter().collect();
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                if (a.direction, a.pod) != (b.direction, b.pod) {
                    continue;
                }
                let peers_meet = ordinal(a.peers.0) <= ordinal(b.peers.1)
                    && ordinal(b.peers.0) <= ordinal(a.peers.1);
                let ports_meet = match (a.ports, b.ports) {
                    (Some(p), Some(q)) => {
                        p.protocol == q.protocol && p.first <= q.last && q.first <= p.last
                    }
                    _ => true,
                };
                assert!(!(peers_meet && ports_meet), "{a} overlaps {b}");
            }
        }
    }

    #[test]
    fn overlapping_and_touching_any_port_ranges_merge_into_one() {
        let e = Direction::Egress;
        let got = state(&[
            any(e, "10.0.0.1", "10.1.0.0", "10.1.0.9"),
            any(e, "10.0.0.1", "10.1.0.5", "10.1.0.20"),
            any(e, "10.0.0.1", "10.1.0.21", "10.1.0.30"),
            any(e, "10.0.0.1", "10.1.0.40", "10.1.0.40"),
        ])
        .normalized();
        assert_eq!(
            got,
            state(&[
                any(e, "10.0.0.1", "10.1.0.0", "10.1.0.30"),
                any(e, "10.0.0.1", "10.1.0.40", "10.1.0.40"),
            ])
        );
    }

    #[test]
    fn overlapping_port_rectangles_are_cut_into_slices_and_covered_ones_dropped() {
        let i = Direction::Ingress;
        let a = any(i, "10.0.0.1", "10.1.0.0", "10.1.0.9");
        let got = state(&[
            ports(a, 6, 80, 80),
            ports(any(i, "10.0.0.1", "10.1.0.5", "10.1.0.20"), 6, 81, 90),
            ports(any(i, "10.0.0.1", "10.1.0.15", "10.1.0.25"), 6, 80, 80),
            ports(any(i, "10.0.0.1", "10.1.0.16", "10.1.0.16"), 17, 53, 53),
            any(i, "10.0.0.1", "10.1.0.16", "10.1.0.16"),
        ])
        .normalized();
        // 10.1.0.0-4 has port 80 only, 5-9 adds 81-90: cut apart; 15 and 17-20 hold 80-90,
        // but 16 (any port, which takes in its UDP port too) lies between them.
        let r = |first: &str, last: &str| any(i, "10.0.0.1", first, last);
        let want = state(&[
            ports(r("10.1.0.0", "10.1.0.4"), 6, 80, 80),
            ports(r("10.1.0.5", "10.1.0.9"), 6, 80, 90),
            ports(r("10.1.0.10", "10.1.0.14"), 6, 81, 90),
            ports(r("10.1.0.15", "10.1.0.15"), 6, 80, 90),
            r("10.1.0.16", "10.1.0.16"),
            ports(r("10.1.0.17", "10.1.0.20"), 6, 80, 90),
            ports(r("10.1.0.21", "10.1.0.25"), 6, 80, 80),
        ]);
        assert_eq!(got, want, "{:#?}", got.allows);
        assert_disjoint(&got);
    }

    #[test]
    fn slices_with_the_same_ports_join_and_invalid_allows_are_left_out() {
        let e = Direction::Egress;
        let got = state(&[
            ports(any(e, "10.0.0.1", "10.1.0.0", "10.1.0.9"), 6, 80, 80),
            ports(any(e, "10.0.0.1", "10.1.0.10", "10.1.0.19"), 6, 80, 80),
            ports(any(e, "10.0.0.1", "10.1.0.5", "10.1.0.14"), 6, 80, 80),
            // Reversed, another family, no such protocol.
            any(e, "10.0.0.1", "10.1.0.9", "10.1.0.0"),
            Allow {
                peers: (v4("fd00::1"), v4("fd00::2")),
                ..any(e, "10.0.0.1", "10.1.0.0", "10.1.0.0")
            },
            ports(any(e, "10.0.0.1", "10.2.0.0", "10.2.0.0"), 1, 0, 0),
        ])
        .normalized();
        assert_eq!(
            got,
            state(&[ports(
                any(e, "10.0.0.1", "10.1.0.0", "10.1.0.19"),
                6,
                80,
                80
            )])
        );
    }

    #[test]
    fn ranges_reaching_the_last_ipv6_address_and_port_65535_stay_whole() {
        let pod: IpAddr = "fd00::1".parse().expect("address");
        let top: IpAddr = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"
            .parse()
            .expect("top");
        let low: IpAddr = "fd00::".parse().expect("low");
        let a = |first, last, ports| Allow {
            direction: Direction::Ingress,
            pod,
            peers: (first, last),
            ports,
        };
        let p = |first, last| {
            Some(PortRange {
                protocol: 132,
                first,
                last,
            })
        };
        let got = PolicyState {
            isolated: Default::default(),
            allows: [
                a(low, top, p(1000, 65535)),
                a(top, top, p(0, 999)),
                a(low, top, None),
            ]
            .into_iter()
            .collect(),
        };
        let n = got.normalized();
        assert_eq!(n.allows, [a(low, top, None)].into_iter().collect());
        let mut without_any = got.clone();
        without_any.allows.remove(&a(low, top, None));
        let n = without_any.normalized();
        let mut pre_top = top;
        if let IpAddr::V6(t) = top {
            pre_top = IpAddr::V6(Ipv6Addr::from(u128::from(t) - 1));
        }
        assert_eq!(
            n.allows,
            [a(low, pre_top, p(1000, 65535)), a(top, top, p(0, 65535))]
                .into_iter()
                .collect()
        );
    }

    /// xorshift64: enough randomness for states, and the same states every run.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    #[test]
    fn random_states_keep_every_flow_and_become_disjoint_and_stable() {
        let pods = [v4("10.0.0.1"), v4("10.0.0.2"), v4("fd00::1")];
        let base = |pod: IpAddr| {
            if pod.is_ipv6() {
                ordinal(v4("fd01::"))
            } else {
                ordinal(v4("10.1.0.0"))
            }
        };
        let peer = |pod: IpAddr, n: u128| address(pod.is_ipv6(), base(pod) + n);
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for round in 0..250 {
            let mut s = PolicyState::default();
            for _ in 0..rng.below(14) {
                let pod = pods[rng.below(3) as usize];
                let first = rng.below(40) as u128;
                let last = first + rng.below(12) as u128;
                let ports = match rng.below(4) {
                    0 => None,
                    _ => {
                        let first = rng.below(30) as u16;
                        let last = if rng.below(8) == 0 {
                            u16::MAX
                        } else {
                            first + rng.below(8) as u16
                        };
                        Some(PortRange {
                            protocol: [6, 17][rng.below(2) as usize],
                            first,
                            last,
                        })
                    }
                };
                let direction = Direction::ALL[rng.below(2) as usize];
                s.allows.insert(Allow {
                    direction,
                    pod,
                    peers: (peer(pod, first), peer(pod, last)),
                    ports,
                });
            }
            let n = s.normalized();
            assert_disjoint(&n);
            assert_eq!(n.normalized(), n, "round {round}: not stable");
            for direction in Direction::ALL {
                for pod in pods {
                    for at in 0..56 {
                        let who = peer(pod, at);
                        for protocol in [1, 6, 17] {
                            for port in (0..40).chain([u16::MAX - 1, u16::MAX]) {
                                assert_eq!(
                                    allowed(&s, direction, pod, who, protocol, port),
                                    allowed(&n, direction, pod, who, protocol, port),
                                    "round {round}: {direction:?} {pod} {who} {protocol}/{port}\n{s:#?}\n{n:#?}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}
