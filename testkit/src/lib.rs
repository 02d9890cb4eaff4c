//! The harness of knid's tests and benches: the real daemon in a private network namespace, the
//! probes and checks the tests hold it to, and the measuring of the benches. Dev-only: nothing
//! but tests, benches and the fuzz targets depends on it, and it is never published.
//!
//! Modules, one job each:
//! - [`abuse`]: hostile clients of a live knid and a well-behaved one timed beside them;
//! - [`gates`]: whether a test may run here (root, failpoints), never passing CI by skipping;
//! - [`bins`]: where the binaries under test are (`knid`, `knictl`, `knid-cni`);
//! - [`node`]: [`TestNode`], a `knid` in its own netns and tempdir, cleaned up on drop;
//! - [`wait`]: polling for asynchronous effects, with a deadline;
//! - [`requests`]: the Attach and Detach requests most tests send;
//! - [`kube_api`]: a stand-in Kubernetes API server (TLS, bearer token; Nodes, Namespaces,
//!   Pods and NetworkPolicies: get, list, watch) for cluster mode;
//! - [`kernel`]: what a netns holds (links, addresses, routes, sysctls, qdiscs), read directly;
//! - [`assert`](mod@assert): knid's answers held to what they must be;
//! - [`traffic`]: TCP and raw Ethernet frames through what knid set up;
//! - [`dan`]: Kata's `DanConfig`, mirrored to read the DAN files knid writes;
//! - [`guest`]: a real Linux guest under QEMU (Debian's kernel, a busybox initramfs built at
//!   test time, KVM or TCG) on a knid tap;
//! - [`cli`]: `knictl` run as an operator runs it on the node;
//! - [`grpc_front`]: knid-grpc, the gRPC front, in front of a [`TestNode`]'s knid;
//! - [`cni`]: CNI plugins run the way libcni runs them, and a CNI result checker;
//! - [`faults`]: what the fault and crash tests share (leak checks, store checks, filesystems);
//! - [`netpol_scale`]: Namespaces, Pods and NetworkPolicies of a large cluster, generated for
//!   the NetworkPolicy bench;
//! - [`load`]: the load driver of tests/load.rs and benches/load.rs;
//! - [`measure`]: the benches' knobs, latency summaries and /proc readings;
//! - [`chart`]: the SVG latency CDFs of the performance report;
//! - [`floor`]: the kernel work of one attach and detach done directly, knid's floor;
//! - [`cni_exec`]: CNI plugins exec'd and timed, knid-cni against the reference plugins;
//! - [`libcni`]: Debian's libcni as a Go client, timing knid-cni through what runtimes use;
//! - [`capability_bench`]: the start-up and sandbox loop of the benches that compare a
//!   capability knid implements with the reference plugin chained after knid-cni;
//! - [`fuzz_corpus`]: the fuzz targets' seed corpora and their naming rules, for the replay
//!   tests;
//! - [`spoof`]: forged frames a hostile pod sends (another pod's source address, ARP, NDP, RA,
//!   DHCP), and how a test tells whether one got through;
//! - [`ttrpc_frames`]: what decoding bytes into ttrpc frames must hold, for the `ttrpc_frames`
//!   fuzz target and its replay test;
//! - [`threads`]: knid's threads by the names the kernel has for them, and an idle knid's.
//!
//! What most tests call (the items of gates, node, wait, requests, kernel, assert and traffic,
//! and [`KIND_FAILPOINTS`]) is re-exported here too, so a test reads `testkit::privileged()` or
//! `testkit::link_in(..)` without naming the module that holds it.

pub mod abuse;
pub mod assert;
pub mod bins;
pub mod capability_bench;
pub mod chart;
pub mod cli;
pub mod cluster_node;
pub mod cni;
pub mod cni_exec;
pub mod core_dump;
pub mod dan;
pub mod faults;
pub mod floor;
pub mod fuzz_corpus;
pub mod gates;
pub mod give_back;
pub mod grpc_front;
pub mod guest;
pub mod kernel;
pub mod kube_api;
pub mod lan;
pub mod libcni;
pub mod load;
pub mod measure;
pub mod netpol;
pub mod netpol_scale;
pub mod node;
pub mod reachability;
pub mod release;
pub mod requests;
pub mod spoof;
pub mod threads;
pub mod timed_start;
pub mod traffic;
pub mod ttrpc_frames;
pub mod wait;

pub use assert::{assert_pod_side, expect_code, ip_of, names_field, panic_message, parse_mac};
pub use faults::KIND_FAILPOINTS;
pub use gates::{failpoints_built, privileged, skip_unless_ci};
pub use kernel::{
    addresses_in, default_route_in, is_link_local, link_in, link_names, links_in, routes_in,
    rtnl_in, wait_only_lo,
};
pub use node::{TestNode, BRIDGE, DEFAULT_NETWORK, NS_DIR, RPC, TWO_NETWORKS};
pub use requests::{attach_req, detach_req, inspect_req};
pub use traffic::{
    exchange_frames, packet_socket, read_ready, tcp_exchange, tcp_via, test_frame, udp_via,
    ETHERTYPE_TEST, FRAME_RESEND, FRAME_WAIT,
};
pub use wait::{wait_for, SETTLE};
