//! knid-transport: the ttrpc face of knid. The `knid.v1` protobuf API ([`pb`], generated from
//! `proto/`), its validation and conversion to the core's types ([`convert`]), the one error →
//! status mapping ([`errors`]), the server glue ([`service`]), the KNI beta API served on the same
//! socket ([`kni`]), the listening socket ([`socket`]), the ttrpc server ([`server`]), the
//! client side ([`client`]: the typed client, the thread-free one-connection client and the
//! client knid calls extensions with) and the ttrpc frame reader both sides cut their byte
//! streams with ([`frame`]). [`fuzz`] holds the fuzz targets' entry points (`fuzz/`).
//! Protobuf types stop here; the core never sees them.

#![forbid(unsafe_code)]

pub mod client;
pub mod cni_plugin;
pub mod convert;
pub mod errors;
pub mod frame;
pub mod fuzz;
pub mod kni;
pub mod metrics_http;
mod operation;
pub mod pb;
pub mod server;
pub mod service;
pub mod socket;

pub use client::extension::OneshotExtensionCaller;
pub use client::{ClientError, RuntimeClient};
