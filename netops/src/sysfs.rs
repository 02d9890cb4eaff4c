//! Host devices as sysfs shows them: which netdev a PCI function carries.

use std::fs;
use std::io;
use std::path::Path;

use crate::error::{Error, Result};

/// The rule [`pci_netdev`] holds a PCI address to, quoted in its error.
const PCI_ADDRESS_RULE: &str = "a PCI address must be DDDD:BB:DD.F in lower-case hex \
     (domain, bus, device up to 1f, function 0-7), e.g. 0000:3b:00.1";

/// The netdev name of PCI function `pci`: the one entry of
/// `<sysfs_root>/bus/pci/devices/<pci>/net/`.
///
/// `pci` is checked strictly first (it becomes a path component): `DDDD:BB:DD.F`, lower-case
/// hex as sysfs spells it. `Ok(None)` when the device exists but carries no netdev (no `net/`,
/// e.g. bound to vfio-pci, or an empty one); an error when there is no such PCI device or it
/// carries more than one netdev.
pub fn pci_netdev(sysfs_root: &Path, pci: &str) -> Result<Option<String>> {
    if !is_pci_address(pci) {
        return Err(Error::io(
            format!("pci device {pci:?}"),
            io::Error::new(io::ErrorKind::InvalidInput, PCI_ADDRESS_RULE),
        ));
    }
    let device = sysfs_root.join("bus/pci/devices").join(pci);
    // Without this check a missing device and a device without net/ would look alike.
    fs::metadata(&device)
        .map_err(|e| Error::io(format!("pci device {pci} ({})", device.display()), e))?;
    let net = device.join("net");
    let entries = match fs::read_dir(&net) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(format!("read {}", net.display()), e)),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(format!("read {}", net.display()), e))?;
        names.push(entry.file_name().to_string_lossy().into_owned());
    }
    names.sort_unstable();
    match names.len() {
        0 => Ok(None),
        1 => Ok(names.pop()),
        _ => Err(Error::io(
            format!("pci device {pci}"),
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "carries {} netdevs ({}), not one",
                    names.len(),
                    names.join(", ")
                ),
            ),
        )),
    }
}

/// `DDDD:BB:DD.F`: 4 + 2 + 2 lower-case hex digits, device at most 0x1f, function 0-7, the
/// way the kernel names PCI functions (`%04x:%02x:%02x.%d`).
fn is_pci_address(s: &str) -> bool {
    let b = s.as_bytes();
    let hex = |r: std::ops::Range<usize>| {
        b[r].iter()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
    };
    b.len() == 12
        && b[4] == b':'
        && b[7] == b':'
        && b[10] == b'.'
        && hex(0..4)
        && hex(5..7)
        && hex(8..10)
        && b[8] <= b'1'
        && (b'0'..=b'7').contains(&b[11])
}

#[cfg(test)]
mod tests;
