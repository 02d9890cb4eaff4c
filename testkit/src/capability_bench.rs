//! The start-up and the sandbox loop that the benches comparing a CNI capability knid implements
//! with the reference plugin chained after knid-cni share (benches/hostports.rs,
//! benches/bandwidth.rs): knid on one bridge network of both families, knid-cni on it, and
//! `KNID_BENCH_N` (default 100) sequential cycles per set-up after [`WARM_UP`] warm-up cycles,
//! each in a sandbox netns of its own made before the timed part.

use std::path::{Path, PathBuf};
use std::time::Duration;

use knid_netops::NetnsHandle;

use crate::cni_exec::{knid_subject, Subject};
use crate::measure::env_count;
use crate::node::TestNode;

/// Cycles run and not timed before every set-up's timed ones.
pub const WARM_UP: usize = 5;

/// The node's configuration: the one network, [`CapabilityBench::NETWORK`].
const BENCH_NETWORK: &str = r#"
[networks.cninet]
bridge = "knid0"
subnets = ["10.88.0.0/16", "fd00:88::/64"]
"#;

/// A running capability bench: the node, knid-cni on its network, the cycle count.
pub struct CapabilityBench {
    /// The knid under test.
    pub node: TestNode,
    /// knid-cni on [`CapabilityBench::NETWORK`].
    pub knid: Subject,
    /// Timed cycles per set-up.
    pub cycles: usize,
    /// The node's private host netns, where plugins are exec'd.
    host: NetnsHandle,
}

impl CapabilityBench {
    /// The network's name.
    pub const NETWORK: &'static str = "cninet";

    /// Starts knid and knid-cni's subject (sandbox ids prefixed `slug`); `None` without root,
    /// when the bench has nothing to measure.
    pub fn start(slug: &'static str) -> Option<CapabilityBench> {
        if !crate::privileged() {
            return None;
        }
        let cycles = env_count("KNID_BENCH_N", 100);
        let node = TestNode::start(BENCH_NETWORK);
        let knid = knid_subject(Self::NETWORK, node.socket(), slug);
        let host = NetnsHandle::open(node.host_path()).expect("open host netns");
        Some(CapabilityBench {
            node,
            knid,
            cycles,
            host,
        })
    }

    /// Runs `cycle(id, netns)` for the warm-ups and the timed cycles of one set-up, sandbox ids
    /// `<slug>-<i>`, and returns what the timed ones returned. `by_exec`: in the node's host
    /// netns, as a runtime execs plugins; else on the calling thread (knid's API).
    pub fn run(
        &self,
        slug: &str,
        by_exec: bool,
        mut cycle: impl FnMut(&str, &Path) -> Duration + Send,
    ) -> Vec<Duration> {
        let netns: Vec<PathBuf> = (0..WARM_UP + self.cycles)
            .map(|i| self.node.netns(&format!("{slug}-{i}")))
            .collect();
        let mut all = || -> Vec<Duration> {
            netns
                .iter()
                .enumerate()
                .map(|(i, ns)| cycle(&format!("{slug}-{i}"), ns))
                .skip(WARM_UP)
                .collect()
        };
        if by_exec {
            knid_netops::run_in(&self.host, all).expect("run in the private host netns")
        } else {
            all()
        }
    }
}
