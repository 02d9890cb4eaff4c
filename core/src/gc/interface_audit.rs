//! What the reconciler's last look at every attached interface found: the interfaces that differ
//! from their records (gone, renamed, down, an address missing), in a pod whose
//! netns still exists. Status turns it into the `PodInterfacesReady` condition.

use std::sync::Mutex;

use crate::drivers::verify::Difference;
use crate::locks::LockExt;
use crate::model::Condition;

/// The condition's type.
pub(crate) const CONDITION: &str = "PodInterfacesReady";
/// How many interfaces the condition's message names; the rest are counted.
const NAMED: usize = 10;

/// One attached interface that differs from its record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Changed {
    /// Its sandbox.
    pub sandbox_id: String,
    /// Its pod-side name.
    pub ifname: String,
    /// The first difference found.
    pub difference: Difference,
}

/// The last look's findings, replaced by each round.
#[derive(Debug, Default)]
pub(crate) struct InterfaceAudit(Mutex<Vec<Changed>>);

impl InterfaceAudit {
    /// Replaces the findings with a round's.
    pub(crate) fn replace(&self, found: Vec<Changed>) {
        *self.0.acquire() = found;
    }

    /// `PodInterfacesReady`: true until a round finds an interface that differs; then false,
    /// reason `InterfacesChanged`, naming the first few (`pod-1/eth0: interface eth0 does not
    /// exist in netns …`).
    pub(crate) fn condition(&self) -> Condition {
        let found = self.0.acquire();
        if found.is_empty() {
            return Condition::now(CONDITION, true, "", "");
        }
        let mut named: Vec<String> = found
            .iter()
            .take(NAMED)
            .map(|c| format!("{}/{}: {}", c.sandbox_id, c.ifname, c.difference))
            .collect();
        if found.len() > NAMED {
            named.push(format!("and {} more", found.len() - NAMED));
        }
        Condition::now(
            CONDITION,
            false,
            "InterfacesChanged",
            &format!(
                "{} attached interface(s) differ from their records (`knictl check <sandbox>` \
                 shows one): {}",
                found.len(),
                named.join("; ")
            ),
        )
    }
}

#[cfg(test)]
mod tests;
