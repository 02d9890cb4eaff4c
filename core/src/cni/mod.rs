//! The CNI protocol (spec 0.3.1 – 1.1.0), in both directions: the
//! model shared by the `knid-cni` shim (knid as a plugin) and the `cni` driver (knid running
//! plugins): versions, error objects, network configuration lists and results. Results are
//! parsed from and written in any supported version; what knid does not model is never needed
//! from them (the driver keeps the plugins' raw result for chaining and DEL).

pub mod conf;
pub mod error;
pub mod exec;
pub mod result;
pub mod version;

pub use conf::ConfList;
pub use error::CniError;
pub use result::CniResult;
pub use version::Version;
