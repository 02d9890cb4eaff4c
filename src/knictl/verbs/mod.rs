//! knictl's verbs, one module per verb or verb group, each with a `run_*` entry per verb that
//! [`main`](crate) dispatches to: it makes its calls, prints through [`crate::output::print`]
//! (JSON or text) and says how knictl exits. [`completion`] and [`doctor`] need no connection
//! (doctor diagnoses the connection itself); the others get the client `main` connected.

pub mod attach;
pub mod check;
pub mod completion;
pub mod doctor;
pub mod extensions;
pub mod gc;
pub mod inspect;
pub mod metrics;
pub mod netns;
pub mod node;
pub mod policy;
pub mod sandboxes;
