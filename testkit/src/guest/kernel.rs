//! The guest's kernel: Debian's `linux-image-amd64`, downloaded with `apt-get download` and
//! unpacked with `dpkg-deb -x`, never installed (the host runs a kernel of its own and has no
//! /boot). Only `vmlinuz` and the virtio-net modules with their dependencies are kept, in a
//! cache directory, so repeated runs do not download again.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::error::GuestError;

/// Where the extracted kernel is cached unless `KNID_GUEST_CACHE` says otherwise.
pub const DEFAULT_CACHE: &str = "/var/cache/knid-tests/guest";
/// The metapackage whose dependency names the concrete kernel package.
const META_PACKAGE: &str = "linux-image-amd64";
/// The modules the guest needs for a virtio-net NIC on a PCI bus; their dependencies are
/// found from each module's `depends=` modinfo field (the .deb ships no modules.dep: depmod
/// writes it at install time).
const ROOT_MODULES: [&str; 2] = ["virtio_pci", "virtio_net"];
/// The cache subdirectory holding a complete kernel; it appears by rename, whole or not at all.
const KERNEL_DIR: &str = "kernel";

/// A kernel ready to boot: its image and the modules to load, in load order.
#[derive(Debug, Clone)]
pub struct GuestKernel {
    /// The Debian package it came from (`linux-image-<version>-amd64`).
    pub package: String,
    /// The bzImage.
    pub vmlinuz: PathBuf,
    /// Uncompressed `.ko` files, each after the modules it depends on.
    pub modules: Vec<PathBuf>,
}

impl GuestKernel {
    /// The cached kernel, downloaded and extracted first if the cache has none.
    pub fn cached() -> Result<GuestKernel, GuestError> {
        let cache = std::env::var_os("KNID_GUEST_CACHE")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(DEFAULT_CACHE));
        let dir = cache.join(KERNEL_DIR);
        if !dir.join("package").exists() {
            fs::create_dir_all(&cache).map_err(|e| GuestError::io("create the kernel cache", e))?;
            fetch_into(&cache, &dir)?;
        }
        GuestKernel::read(&dir)
    }

    fn read(dir: &Path) -> Result<GuestKernel, GuestError> {
        let text = |name: &str| {
            fs::read_to_string(dir.join(name))
                .map_err(|e| GuestError::io(format!("read {}", dir.join(name).display()), e))
        };
        let package = text("package")?.trim().to_owned();
        let modules = text("modules.order")?
            .lines()
            .map(|m| dir.join("modules").join(format!("{m}.ko")))
            .collect();
        Ok(GuestKernel {
            package,
            vmlinuz: dir.join("vmlinuz"),
            modules,
        })
    }
}

/// Downloads and extracts the kernel into a temporary directory of `cache`, then renames the
/// result to `dir`; a concurrent fetch that renamed first wins and this one is dropped.
fn fetch_into(cache: &Path, dir: &Path) -> Result<(), GuestError> {
    let work = tempfile::Builder::new()
        .prefix(".fetch-")
        .tempdir_in(cache)
        .map_err(|e| GuestError::io("create a fetch directory", e))?;
    let mut apt = Apt::default();
    let package = apt.kernel_package()?;
    let deb = apt.download(&package, work.path())?;
    let root = work.path().join("root");
    run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root))?;

    let out = work.path().join(KERNEL_DIR);
    let modules_out = out.join("modules");
    fs::create_dir_all(&modules_out).map_err(|e| GuestError::io("create modules dir", e))?;
    let boot = root.join("boot");
    let vmlinuz = first_entry(&boot, "vmlinuz-")?;
    fs::copy(&vmlinuz, out.join("vmlinuz")).map_err(|e| GuestError::io("copy vmlinuz", e))?;
    let version = vmlinuz
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("vmlinuz-"))
        .ok_or_else(|| GuestError::Kernel(format!("odd image name {}", vmlinuz.display())))?;
    // Debian moved modules to /usr/lib/modules with the merged /usr (trixie).
    let modules_dir = ["lib/modules", "usr/lib/modules"]
        .iter()
        .map(|d| root.join(d).join(version))
        .find(|d| d.is_dir())
        .ok_or_else(|| GuestError::Kernel(format!("{package} has no modules for {version}")))?;

    let mut files = BTreeMap::new();
    index_modules(&modules_dir.join("kernel"), &mut files)?;
    let builtin = fs::read_to_string(modules_dir.join("modules.builtin")).unwrap_or_default();
    let builtin: BTreeSet<String> = builtin
        .lines()
        .filter_map(|l| l.rsplit('/').next())
        .map(|f| module_name(f.trim_end_matches(".ko")))
        .collect();
    let mut order = Vec::new();
    let mut seen = BTreeSet::new();
    for name in ROOT_MODULES {
        load_order(name, &files, &builtin, &modules_out, &mut seen, &mut order)?;
    }
    let write = |name: &str, text: String| {
        fs::write(out.join(name), text).map_err(|e| GuestError::io(format!("write {name}"), e))
    };
    write("modules.order", order.join("\n") + "\n")?;
    // Written last: its presence marks a complete kernel.
    write("package", package.clone() + "\n")?;
    match fs::rename(&out, dir) {
        Ok(()) => Ok(()),
        Err(_) if dir.join("package").exists() => Ok(()),
        Err(e) => Err(GuestError::io(format!("rename to {}", dir.display()), e)),
    }
}

/// Module name as the kernel spells it (`-` and `_` are the same to modprobe).
fn module_name(file_stem: &str) -> String {
    file_stem.replace('-', "_")
}

/// Every `.ko` or `.ko.xz` under `dir`, by module name.
fn index_modules(dir: &Path, files: &mut BTreeMap<String, PathBuf>) -> Result<(), GuestError> {
    let entries =
        fs::read_dir(dir).map_err(|e| GuestError::io(format!("read {}", dir.display()), e))?;
    for entry in entries {
        let path = entry
            .map_err(|e| GuestError::io(format!("read {}", dir.display()), e))?
            .path();
        if path.is_dir() {
            index_modules(&path, files)?;
            continue;
        }
        let file = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if let Some(stem) = file
            .strip_suffix(".ko")
            .or_else(|| file.strip_suffix(".ko.xz"))
        {
            files.insert(module_name(stem), path.clone());
        }
    }
    Ok(())
}

/// Appends `name`'s dependencies, then `name`, to `order` (depth first), writing each
/// uncompressed `.ko` into `out`: busybox's insmod cannot read xz.
fn load_order(
    name: &str,
    files: &BTreeMap<String, PathBuf>,
    builtin: &BTreeSet<String>,
    out: &Path,
    seen: &mut BTreeSet<String>,
    order: &mut Vec<String>,
) -> Result<(), GuestError> {
    if !seen.insert(name.to_owned()) || builtin.contains(name) {
        return Ok(());
    }
    let path = files.get(name).ok_or_else(|| {
        GuestError::Kernel(format!("module {name} is neither a file nor built in"))
    })?;
    let bytes = if path.extension().is_some_and(|e| e == "xz") {
        let out = Command::new("xz")
            .arg("-dc")
            .arg(path)
            .output()
            .map_err(|e| GuestError::io("run xz (install xz-utils)", e))?;
        if !out.status.success() {
            return Err(GuestError::Kernel(format!(
                "xz -dc {}: {}",
                path.display(),
                out.status
            )));
        }
        out.stdout
    } else {
        fs::read(path).map_err(|e| GuestError::io(format!("read {}", path.display()), e))?
    };
    for dep in modinfo_depends(&bytes) {
        load_order(&dep, files, builtin, out, seen, order)?;
    }
    fs::write(out.join(format!("{name}.ko")), &bytes)
        .map_err(|e| GuestError::io(format!("write {name}.ko"), e))?;
    order.push(name.to_owned());
    Ok(())
}

/// The `depends=` entry of a module's `.modinfo` section: NUL-separated `key=value` strings,
/// found by scanning (no ELF parsing needed for one field).
fn modinfo_depends(ko: &[u8]) -> Vec<String> {
    const KEY: &[u8] = b"\0depends=";
    let Some(at) = ko.windows(KEY.len()).position(|w| w == KEY) else {
        return Vec::new();
    };
    let value = &ko[at + KEY.len()..];
    let end = value.iter().position(|b| *b == 0).unwrap_or(value.len());
    String::from_utf8_lossy(&value[..end])
        .split(',')
        .filter(|d| !d.is_empty())
        .map(module_name)
        .collect()
}

fn first_entry(dir: &Path, prefix: &str) -> Result<PathBuf, GuestError> {
    let entries =
        fs::read_dir(dir).map_err(|e| GuestError::io(format!("read {}", dir.display()), e))?;
    entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix))
        })
        .ok_or_else(|| GuestError::Kernel(format!("no {prefix}* in {}", dir.display())))
}

/// apt, with one `apt-get update` allowed when the package lists are missing or stale (a fresh
/// CI machine may have none).
#[derive(Default)]
struct Apt {
    updated: bool,
}

impl Apt {
    /// `linux-image-<version>-amd64`, the package [`META_PACKAGE`] depends on.
    fn kernel_package(&mut self) -> Result<String, GuestError> {
        loop {
            let out = Command::new("apt-cache")
                .args(["depends", META_PACKAGE])
                .output()
                .map_err(|e| GuestError::io("run apt-cache", e))?;
            let text = String::from_utf8_lossy(&out.stdout);
            let package = text
                .lines()
                .filter_map(|l| l.trim().strip_prefix("Depends:"))
                .map(str::trim)
                .find(|p| p.starts_with("linux-image-"));
            match package {
                Some(p) => return Ok(p.to_owned()),
                None if !self.updated => self.update()?,
                None => {
                    return Err(GuestError::Kernel(format!(
                        "apt-cache depends {META_PACKAGE} names no kernel: {text}{}",
                        String::from_utf8_lossy(&out.stderr)
                    )))
                }
            }
        }
    }

    /// `apt-get download package` into `dir`; the .deb's path.
    fn download(&mut self, package: &str, dir: &Path) -> Result<PathBuf, GuestError> {
        loop {
            let out = Command::new("apt-get")
                .args(["download", "-qq", package])
                .current_dir(dir)
                .output()
                .map_err(|e| GuestError::io("run apt-get download", e))?;
            if out.status.success() {
                return first_entry(dir, package);
            }
            if self.updated {
                return Err(GuestError::Kernel(format!(
                    "apt-get download {package}: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                )));
            }
            self.update()?;
        }
    }

    fn update(&mut self) -> Result<(), GuestError> {
        self.updated = true;
        run(Command::new("apt-get").args(["update", "-qq"]))
    }
}

/// Runs `command`, failing with its stderr.
fn run(command: &mut Command) -> Result<(), GuestError> {
    let shown = format!("{command:?}");
    let out = command
        .output()
        .map_err(|e| GuestError::io(format!("run {shown}"), e))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(GuestError::Kernel(format!(
            "{shown}: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depends_are_read_from_the_modinfo_strings() {
        let ko = b"\x7fELF junk\0license=GPL\0depends=virtio_ring,net-failover\0intree=Y\0";
        assert_eq!(modinfo_depends(ko), ["virtio_ring", "net_failover"]);
        assert!(modinfo_depends(b"\0depends=\0name=failover\0").is_empty());
        assert!(modinfo_depends(b"no modinfo here").is_empty());
    }
}
