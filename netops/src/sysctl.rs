//! Sysctls under /proc/sys.
//!
//! /proc/sys/net resolves against the calling thread's network namespace, so for a foreign
//! namespace call these inside [`crate::run_in`].

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Component, Path, PathBuf};

use crate::error::{Error, Result};

/// Writes `value` to /proc/sys/`key` (`key` like `net/ipv4/ip_forward`).
pub fn write(key: &str, value: &str) -> Result<()> {
    let path = path_of(key)?;
    let mut file = OpenOptions::new()
        .write(true)
        .open(&path)
        .map_err(|e| Error::io(format!("open sysctl {key}"), e))?;
    // One write: procfs parses each write(2) on its own.
    file.write_all(value.as_bytes())
        .map_err(|e| Error::io(format!("write sysctl {key}={value}"), e))
}

/// Reads /proc/sys/`key`, trimmed.
pub fn read(key: &str) -> Result<String> {
    let path = path_of(key)?;
    let text = fs::read_to_string(&path).map_err(|e| Error::io(format!("read sysctl {key}"), e))?;
    Ok(text.trim().to_owned())
}

/// Enables IPv4 and IPv6 forwarding in the caller's network namespace.
pub fn enable_forwarding() -> Result<()> {
    write("net/ipv4/ip_forward", "1")?;
    write("net/ipv6/conf/all/forwarding", "1")
}

/// Only plain relative keys: no `..`, no absolute path, nothing outside /proc/sys.
fn path_of(key: &str) -> Result<PathBuf> {
    let rel = Path::new(key);
    let plain = !key.is_empty() && rel.components().all(|c| matches!(c, Component::Normal(_)));
    if !plain || key.contains("..") {
        return Err(Error::io(
            format!("sysctl key {key:?}"),
            io::Error::new(io::ErrorKind::InvalidInput, "not a relative /proc/sys key"),
        ));
    }
    Ok(Path::new("/proc/sys").join(rel))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_resolve_under_proc_sys() {
        let p = path_of("net/ipv4/ip_forward").expect("valid key");
        assert_eq!(p, Path::new("/proc/sys/net/ipv4/ip_forward"));
    }

    #[test]
    fn escaping_or_absolute_keys_are_rejected() {
        for key in ["", "/etc/passwd", "net/../../etc/passwd", "..", "a..b"] {
            let err = path_of(key).expect_err(key);
            assert_eq!(err.errno(), None, "{key}");
            assert!(err.to_string().contains("sysctl key"), "{err}");
        }
    }

    #[test]
    fn read_of_an_existing_key_is_trimmed() {
        let v = read("kernel/ostype").expect("readable");
        assert_eq!(v, "Linux");
    }

    #[test]
    fn read_of_a_missing_key_keeps_the_errno() {
        let e = read("net/ipv4/no_such_knob").expect_err("missing");
        assert_eq!(e.errno(), Some(libc::ENOENT));
    }
}
