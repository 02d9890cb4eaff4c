//! Domain types: what callers ask for and what knid answers. Protobuf types stop at `transport`;
//! these are the types the runtime, IPAM and drivers speak.
//!
//! One file per resource: `bandwidth` (an interface's rate limits), `cluster` (cluster mode's state), `ids` (sandbox ids, interface names, MACs), `interface` (one
//! interface's spec and result), `ip` (addresses, routes, neighbours, families), `sandbox` (the
//! Attach request, the sandbox record, its state, `List`), `status` (conditions, node status,
//! networks' capacity), `gc` (garbage collection), `netns` (network namespaces knid creates)
//! and `time` (the clock records and conditions are stamped with). Everything is re-exported
//! here.

mod bandwidth;
mod cluster;
mod gc;
mod ids;
mod interface;
mod ip;
mod netns;
mod sandbox;
mod status;
mod time;
pub mod validate;

/// The lifecycle state of an attachment, defined beside its state machine.
pub use crate::lifecycle::AttachmentState;
pub use bandwidth::{
    parse_quantity, Bandwidth, RateLimit, ANNOTATION_BURST, EGRESS_ANNOTATION, INGRESS_ANNOTATION,
    MAX_BURST, MAX_RATE, MIN_RATE,
};
pub use cluster::{
    ClusterInfo, NodeRoute, OverlayPath, Published, RouteBackend, RouteState, VtepInfo,
};
pub use gc::{GcFinding, GcKeep, GcObject, GcReason, GcReport, GcRequest};
pub use ids::{IfName, MacAddr, SandboxId};
pub use interface::{
    CniInfo, DeviceInfo, DeviceRef, InterfaceKind, InterfaceResult, InterfaceSpec, TapInfo,
    TapSpec, MAX_QUEUE_PAIRS,
};
pub use ip::{Family, IpConfig, Neighbor, RouteInfo, RouteScope, MAIN_TABLE};
pub use netns::{kni_netns_owner, NetnsInfo, NetnsLookup, NetnsRequest};
pub use sandbox::{
    distinct_host_ports, AttachRequest, Dns, ListFilter, PodRef, PortMapping, Sandbox,
    SandboxSummary,
};
pub use status::{BridgePorts, Capacity, Condition, NetworkInfo, Status};
pub(crate) use time::now_ms;
