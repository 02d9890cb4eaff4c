//! Conversions between the protobuf API and the core's types. Requests are validated on the way
//! in ([`request`]), field by field, with errors naming the field path (`interfaces[1].mac`);
//! responses are plain encodings ([`response`]).

pub mod request;
pub mod response;

pub use request::{
    attach_request, detach_request, inspect_request, list_request, DEFAULT_IFNAME, DEFAULT_NETWORK,
};
pub use response::{list_response, networks, sandbox, status, summary};
