//! `knictl doctor`: checks the node and says, for every problem, what to do.
//!
//! knictl runs on the node, as root, in the node's network namespace, so besides asking knid it
//! looks at the kernel itself: bridges, parent devices and forwarding sysctls are read here, not
//! taken on knid's word.
//!
//! Levels: `ok`; `warn`, something to watch that does not stop pods from being attached (a pool
//! filling up, an optional extension failing); `FAIL`, something broken now. doctor exits 0
//! unless a check failed ([`Exit::Problems`]), or [`Exit::Unreachable`] when knid cannot be
//! reached (the checks that need knid are then not run).

mod cluster;
mod daemon;
mod firewall;
mod host;
mod nat;
mod policy;
mod socket;

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::exit::Exit;
use crate::output::{self, Format, Json};

/// How one check came out, in rising order of gravity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// As it should be.
    Ok,
    /// Worth watching; nothing is broken yet.
    Warn,
    /// Broken.
    Fail,
}

impl Level {
    fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Warn => "warn",
            Self::Fail => "FAIL",
        }
    }
}

/// One line of the report: a check, its level, what it saw and, for a problem, what to do.
#[derive(Debug, Clone)]
pub struct Finding {
    /// The check's name (`socket`, `bridge`, `forwarding`, ...).
    pub check: &'static str,
    /// Its level.
    pub level: Level,
    /// What it saw.
    pub message: String,
    /// What to do about it: commands or configuration changes, in the order to try them.
    pub fixes: Vec<String>,
}

impl Finding {
    /// A passed check.
    pub fn ok(check: &'static str, message: impl Into<String>) -> Finding {
        Finding {
            check,
            level: Level::Ok,
            message: message.into(),
            fixes: Vec::new(),
        }
    }

    /// A warning and what to do about it.
    pub fn warn(check: &'static str, message: impl Into<String>, fixes: Vec<String>) -> Finding {
        Finding {
            check,
            level: Level::Warn,
            message: message.into(),
            fixes,
        }
    }

    /// A failed check and how to fix it.
    pub fn fail(check: &'static str, message: impl Into<String>, fixes: Vec<String>) -> Finding {
        Finding {
            check,
            level: Level::Fail,
            message: message.into(),
            fixes,
        }
    }
}

/// Runs `knictl doctor`: every check, the report, and doctor's exit.
pub fn run_doctor(socket: &Path, format: Format, timeout: Duration) -> Exit {
    let mut findings = Vec::new();
    let exit = match socket::reach(socket, timeout, &mut findings) {
        None => Exit::Unreachable,
        Some((client, status)) => {
            daemon::version(&status, &mut findings);
            daemon::conditions(&status, &mut findings);
            cluster::cluster(&status, &mut findings);
            policy::policy(&client, &status, timeout, &mut findings);
            // One List for the checks that read it (the NAT table's, the records').
            let list = client
                .list(&knid_transport::pb::ListRequest::default(), timeout)
                .map_err(|e| crate::exit::message(&e));
            match client.networks(timeout) {
                Ok(networks) => {
                    host::devices(&networks, &mut findings);
                    host::forwarding(&networks, &mut findings);
                    firewall::firewall(&networks, &mut findings);
                    nat::table(&client, &networks, list.as_ref(), timeout, &mut findings);
                    daemon::pools(&networks, &mut findings);
                }
                Err(e) => findings.push(Finding::fail(
                    "networks",
                    format!("Networks failed: {}", crate::exit::message(&e)),
                    vec!["see knid's log".to_owned()],
                )),
            }
            daemon::records(list.as_ref(), &mut findings);
            daemon::orphans(&client, timeout, &mut findings);
            daemon::extensions(&client, timeout, &mut findings);
            if findings.iter().any(|f| f.level == Level::Fail) {
                Exit::Problems
            } else {
                Exit::Success
            }
        }
    };
    output::print(format, Json::value(|| report(&findings, exit)), || {
        print_lines(&findings);
    });
    exit
}

fn print_lines(findings: &[Finding]) {
    let width = findings.iter().map(|f| f.check.len()).max().unwrap_or(0);
    for f in findings {
        println!(
            "{:<4}  {:<width$}  {}",
            f.level.as_str(),
            f.check,
            f.message
        );
        for fix in &f.fixes {
            println!("{:<4}  {:<width$}    fix: {fix}", "", "");
        }
    }
    let count = |level| findings.iter().filter(|f| f.level == level).count();
    let (failed, warned) = (count(Level::Fail), count(Level::Warn));
    if failed + warned == 0 {
        println!("all {} checks passed", findings.len());
    } else {
        println!(
            "{failed} failed, {warned} warnings, of {} checks",
            findings.len()
        );
    }
}

/// The report as one JSON document.
fn report(findings: &[Finding], exit: Exit) -> serde_json::Value {
    let checks: Vec<serde_json::Value> = findings
        .iter()
        .map(|f| {
            json!({
                "check": f.check,
                "status": f.level.as_str().to_ascii_lowercase(),
                "message": f.message,
                "fixes": f.fixes,
            })
        })
        .collect();
    json!({
        "ok": exit == Exit::Success,
        "exit_code": exit.code(),
        "checks": checks,
    })
}
