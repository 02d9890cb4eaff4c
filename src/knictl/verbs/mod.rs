//! knictl's verbs, one module per verb or verb group.

pub mod completion;
pub mod doctor;
pub mod inspect;
pub mod node;
pub mod sandboxes;
