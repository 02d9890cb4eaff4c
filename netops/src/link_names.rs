//! The names of the links of the calling thread's network namespace, as procfs lists them
//! (`/proc/thread-self/net/dev`): what costs the kernel a line per link, where a link dump costs
//! it, per veth whose peer is in another namespace, a linear scan of the namespace's ids
//! (links × pod namespaces, hundreds of ms with 5,000 pods). Names only: a caller that needs a
//! link's attributes asks for that link.

use std::io::{self, BufRead, BufReader};

use crate::error::{Error, Result};

/// Where procfs lists the calling thread's namespace's links (not the process's: a thread may
/// have entered another namespace).
const DEV_LIST: &str = "/proc/thread-self/net/dev";

/// The names of the links of the calling thread's network namespace.
pub fn link_names() -> Result<Vec<String>> {
    let file =
        std::fs::File::open(DEV_LIST).map_err(|e| Error::io(format!("open {DEV_LIST}"), e))?;
    parse(BufReader::new(file)).map_err(|e| Error::io(format!("read {DEV_LIST}"), e))
}

/// The names of a `net/dev` listing: two header lines, then a line per link, its name (which
/// holds no `:` nor space: the kernel refuses them) right-aligned before a `:`.
fn parse(listing: impl BufRead) -> io::Result<Vec<String>> {
    let mut names = Vec::new();
    for line in listing.lines().skip(2) {
        let line = line?;
        let Some((name, _)) = line.split_once(':') else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a line without a link name: {line:?}"),
            ));
        };
        names.push(name.trim_start().to_owned());
    }
    Ok(names)
}

#[cfg(test)]
mod tests;
