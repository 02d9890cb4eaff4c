//! knid-transport: the ttrpc face of knid. The `knid.v1` protobuf API ([`pb`], generated from
//! `proto/`), its validation and conversion to the core's types ([`convert`]), the one error →
//! status mapping ([`errors`]), the server glue ([`service`]), the KNI beta API served on the same
//! socket ([`kni`]), the listening socket ([`socket`]), the typed client ([`client`]) and the
//! client knid calls extensions with ([`extension_client`]). Protobuf types stop here; the core
//! never sees them.

pub mod client;
pub mod cni_plugin;
pub mod convert;
pub mod decode;
pub mod errors;
pub mod extension_client;
pub mod kni;
pub mod metrics_http;
pub mod oneshot;
mod operation;
pub mod pb;
pub mod server;
pub mod service;
pub mod socket;
#[cfg(test)]
mod test_server;

pub use client::{ClientError, RuntimeClient};
pub use extension_client::OneshotExtensionCaller;
