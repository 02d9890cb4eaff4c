//! The entry points of the transport's fuzz targets: wire bytes → what knid makes of them, for
//! every message the transport side decodes: the knid.v1 and KNI requests (validated as the
//! servers validate them), extensions' answers, and the `knid-cni` shim's environment and stdin.
//! Each function runs exactly what the server, the extension client or the shim runs, so that
//! the fuzz targets (`fuzz/`) and their seed-corpus replay (`tests/fuzz_seeds.rs`) test the real
//! thing. Where one function covers several messages, the first input byte picks the message,
//! modulo their number.

use std::path::Path;

use knid_core::cni::CniError;
use knid_core::validate::Invalid;
use knid_core::{
    AttachRequest, Error, ExtensionSpec, GcRequest, IfName, ListFilter, MacAddr, NetnsLookup,
    NetnsRequest, SandboxId,
};
use protobuf::Message;

use crate::client::extension::answer_verdict;
use crate::cni_plugin::{self, Invocation};
use crate::convert::{self, FlowQuestion};
use crate::pb::{self, kni};

/// Decodes an `AttachRequest` from protobuf bytes and validates it. Malformed bytes are an
/// `InvalidArgument` naming `request`.
pub fn attach_request(bytes: &[u8]) -> Result<AttachRequest, Error> {
    convert::attach_request(&parse(bytes, "AttachRequest")?)
}

/// The `knid.v1.Runtime` methods in the order [`runtime_request`]'s first byte picks them.
pub const RUNTIME_METHODS: [&str; 17] = [
    "Attach",
    "Detach",
    "Check",
    "Inspect",
    "List",
    "GarbageCollect",
    "CreateNetns",
    "DeleteNetns",
    "RegisterExtension",
    "UnregisterExtension",
    "Status",
    "Networks",
    "ListExtensions",
    "ListPolicies",
    "ExplainPolicy",
    "SetupNodeNetwork",
    "Metrics",
];

/// A validated `knid.v1.Runtime` request, as the service hands it to the core.
#[derive(Debug)]
pub enum RuntimeRequest {
    /// Attach.
    Attach(AttachRequest),
    /// Detach: the sandbox and the interface (`None` = all).
    Detach(SandboxId, Option<IfName>),
    /// Check: the sandbox, the interface (`None` = all) and the MAC expected on it.
    Check(SandboxId, Option<IfName>, Option<MacAddr>),
    /// Inspect.
    Inspect(SandboxId),
    /// List.
    List(ListFilter),
    /// GarbageCollect.
    GarbageCollect(GcRequest),
    /// CreateNetns.
    CreateNetns(NetnsRequest),
    /// DeleteNetns.
    DeleteNetns(SandboxId),
    /// RegisterExtension.
    RegisterExtension(ExtensionSpec),
    /// UnregisterExtension: the extension's name.
    UnregisterExtension(String),
    /// ListPolicies: the pod asked about (`namespace/name`), if any.
    ListPolicies(Option<String>),
    /// ExplainPolicy.
    ExplainPolicy(FlowQuestion),
    /// Status, Networks, ListExtensions, SetupNodeNetwork or Metrics: an empty request the
    /// service reads nothing from.
    Empty,
}

/// Decodes and validates the request of the `knid.v1.Runtime` method the first byte picks
/// ([`RUNTIME_METHODS`]); the rest is the protobuf message. Empty input and malformed bytes
/// are an `InvalidArgument` naming `request`.
pub fn runtime_request(input: &[u8]) -> Result<RuntimeRequest, Error> {
    let (method, body) = pick(input, RUNTIME_METHODS.len())?;
    Ok(match method {
        0 => RuntimeRequest::Attach(attach_request(body)?),
        1 => {
            let (id, ifname) = convert::detach_request(&parse(body, "DetachRequest")?)?;
            RuntimeRequest::Detach(id, ifname)
        }
        2 => {
            let (id, ifname, mac) = convert::check_request(&parse(body, "CheckRequest")?)?;
            RuntimeRequest::Check(id, ifname, mac)
        }
        3 => RuntimeRequest::Inspect(convert::inspect_request(&parse(body, "InspectRequest")?)?),
        4 => RuntimeRequest::List(convert::list_request(&parse(body, "ListRequest")?)?),
        5 => RuntimeRequest::GarbageCollect(convert::garbage_collect_request(&parse(
            body,
            "GarbageCollectRequest",
        )?)?),
        6 => RuntimeRequest::CreateNetns(convert::create_netns_request(&parse(
            body,
            "CreateNetnsRequest",
        )?)?),
        7 => RuntimeRequest::DeleteNetns(convert::delete_netns_request(&parse(
            body,
            "DeleteNetnsRequest",
        )?)?),
        8 => RuntimeRequest::RegisterExtension(convert::register_extension_request(&parse(
            body,
            "RegisterExtensionRequest",
        )?)?),
        9 => RuntimeRequest::UnregisterExtension(convert::unregister_extension_request(&parse(
            body,
            "UnregisterExtensionRequest",
        )?)?),
        10 => parse::<pb::StatusRequest>(body, "StatusRequest").map(|_| RuntimeRequest::Empty)?,
        11 => {
            parse::<pb::NetworksRequest>(body, "NetworksRequest").map(|_| RuntimeRequest::Empty)?
        }
        12 => parse::<pb::ListExtensionsRequest>(body, "ListExtensionsRequest")
            .map(|_| RuntimeRequest::Empty)?,
        13 => RuntimeRequest::ListPolicies(convert::list_policies_request(&parse(
            body,
            "ListPoliciesRequest",
        )?)?),
        14 => RuntimeRequest::ExplainPolicy(convert::explain_policy_request(&parse(
            body,
            "ExplainPolicyRequest",
        )?)?),
        15 => parse::<pb::SetupNodeNetworkRequest>(body, "SetupNodeNetworkRequest")
            .map(|_| RuntimeRequest::Empty)?,
        _ => parse::<pb::MetricsRequest>(body, "MetricsRequest").map(|_| RuntimeRequest::Empty)?,
    })
}

/// The `kni.KNI` methods in the order [`kni_request`]'s first byte picks them.
pub const KNI_METHODS: [&str; 7] = [
    "CreateNetwork",
    "DeleteNetwork",
    "AttachInterface",
    "DetachInterface",
    "QueryPodNetwork",
    "SetupNodeNetwork",
    "QueryNodeNetworks",
];

/// The `netns_dir` a KNI CreateNetwork is judged against by [`kni_request`]: knid's default.
pub const KNI_NETNS_DIR: &str = "/run/netns";

/// A validated `kni.KNI` request, as the KNI service hands it to the core.
#[derive(Debug)]
pub enum KniRequest {
    /// CreateNetwork.
    CreateNetwork(NetnsRequest),
    /// DeleteNetwork: the sandbox to detach first, and how to find the netns.
    DeleteNetwork(Option<SandboxId>, NetnsLookup),
    /// AttachInterface.
    AttachInterface(crate::kni::request::Attach),
    /// DetachInterface.
    DetachInterface(SandboxId),
    /// QueryPodNetwork.
    QueryPodNetwork(SandboxId),
    /// SetupNodeNetwork or QueryNodeNetworks: an empty request the service reads nothing from.
    Empty,
}

/// Decodes and validates the request of the `kni.KNI` method the first byte picks
/// ([`KNI_METHODS`]); the rest is the protobuf message. CreateNetwork is judged against
/// [`KNI_NETNS_DIR`]. Empty input and malformed bytes are an `InvalidArgument` naming `request`.
pub fn kni_request(input: &[u8]) -> Result<KniRequest, Error> {
    use crate::kni::request;
    let (method, body) = pick(input, KNI_METHODS.len())?;
    Ok(match method {
        0 => KniRequest::CreateNetwork(request::create_network(
            &parse(body, "CreateNetworkRequest")?,
            Path::new(KNI_NETNS_DIR),
        )?),
        1 => {
            let (id, lookup) = request::delete_network(&parse(body, "DeleteNetworkRequest")?)?;
            KniRequest::DeleteNetwork(id, lookup)
        }
        2 => KniRequest::AttachInterface(request::attach_interface(&parse(
            body,
            "AttachInterfaceRequest",
        )?)?),
        3 => KniRequest::DetachInterface(request::sandbox_id(
            &parse::<kni::DetachInterfaceRequest>(body, "DetachInterfaceRequest")?.id,
        )?),
        4 => KniRequest::QueryPodNetwork(request::sandbox_id(
            &parse::<kni::QueryPodNetworkRequest>(body, "QueryPodNetworkRequest")?.id,
        )?),
        5 => parse::<kni::SetupNodeNetworkRequest>(body, "SetupNodeNetworkRequest")
            .map(|_| KniRequest::Empty)?,
        _ => parse::<kni::QueryNodeNetworksRequest>(body, "QueryNodeNetworksRequest")
            .map(|_| KniRequest::Empty)?,
    })
}

/// The `knid.v1.Extension` methods in the order [`extension_answer`]'s first byte picks them.
pub const EXTENSION_METHODS: [&str; 3] = ["OnAttach", "OnDetach", "Health"];

/// What knid makes of an extension's answer to the method the first byte picks
/// ([`EXTENSION_METHODS`]); the rest is the body of the extension's response frame (a
/// `ttrpc.Response` carrying an `ExtensionCallResponse` or a `HealthResponse`). `Ok` is the
/// extension's yes; an error is the text an operator reads (its refusal, its status, or why its
/// answer does not decode).
pub fn extension_answer(input: &[u8]) -> Result<(), String> {
    let (method, body) = pick(input, EXTENSION_METHODS.len()).map_err(|e| e.to_string())?;
    answer_verdict(EXTENSION_METHODS[method], body)
}

/// What the `knid-cni` shim reads before it calls knid ([`cni_plugin::read`]), from one buffer:
/// the environment as `KEY=VALUE` lines (a line that is not UTF-8 or has no `=` is no
/// variable; the first of a name counts), then an empty line, then stdin. Without an empty
/// line, everything is environment and stdin is empty.
pub fn cni_invocation(input: &[u8]) -> Result<Invocation, CniError> {
    let (env, stdin) = match input.windows(2).position(|w| w == b"\n\n") {
        Some(at) => (&input[..at], &input[at + 2..]),
        None => (input, &[][..]),
    };
    let vars: Vec<(&str, &str)> = env
        .split(|b| *b == b'\n')
        .filter_map(|line| std::str::from_utf8(line).ok()?.split_once('='))
        .collect();
    let lookup = |key: &str| {
        vars.iter()
            .find(|(name, _)| *name == key)
            .map(|(_, value)| (*value).to_owned())
    };
    let mut echo = String::new();
    cni_plugin::read(&lookup, stdin, &mut echo)
}

/// The first byte as an index below `count`, and the rest.
fn pick(input: &[u8], count: usize) -> Result<(usize, &[u8]), Error> {
    match input.split_first() {
        Some((&first, rest)) => Ok((usize::from(first) % count, rest)),
        None => Err(Invalid::new("is empty: its first byte picks the message").at("request")),
    }
}

/// A protobuf message `name`; malformed bytes are an `InvalidArgument` naming `request`.
fn parse<M: Message>(bytes: &[u8], name: &str) -> Result<M, Error> {
    M::parse_from_bytes(bytes)
        .map_err(|e| Invalid::new(format!("is not a valid protobuf {name}: {e}")).at("request"))
}

#[cfg(test)]
mod tests;
