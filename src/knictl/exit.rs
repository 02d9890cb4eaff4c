//! knictl's exit codes: the one place a failure becomes a code, and the table `--help` and the
//! README document.

use std::process::ExitCode;

use knid_core::error::chain;
use knid_transport::{ClientError, RuntimeClient};
use ttrpc::Code;

/// The exit code table, shown by `knictl --help`.
pub const HELP: &str = "\
Exit codes:
  0  success (doctor: no check failed; warnings allowed)
  1  knid refused or failed the request (its code and message are printed), or gc could not
     remove something
  2  bad usage
  3  knid could not be reached (not running, wrong --socket, or this user is not allowed)
  4  not found: inspect or check of a sandbox (or interface) knid does not know
  5  problems found: doctor failed a check, check found a difference with the kernel";

/// How knictl ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: the verb did what was asked.
    Success,
    /// 1: knid refused or failed the request.
    Failed,
    /// 2: bad usage.
    Usage,
    /// 3: knid could not be reached.
    Unreachable,
    /// 4: the sandbox (or interface) is unknown.
    NotFound,
    /// 5: doctor or check found a problem.
    Problems,
}

impl Exit {
    /// The process exit status.
    pub fn code(self) -> u8 {
        match self {
            Self::Success => 0,
            Self::Failed => 1,
            Self::Usage => 2,
            Self::Unreachable => 3,
            Self::NotFound => 4,
            Self::Problems => 5,
        }
    }

    /// The exit of a failed call: a transport failure means knid is not there (or hung up on
    /// us), a status code is knid's answer.
    pub fn of_error(err: &ClientError) -> Exit {
        match err {
            ClientError::Connect { .. } | ClientError::Transport(_) => Self::Unreachable,
            ClientError::Rpc { code, .. } if *code == Code::NOT_FOUND => Self::NotFound,
            ClientError::Rpc { .. } => Self::Failed,
        }
    }

    /// The exit of a failed Check: FailedPrecondition is the difference it looks for, not a
    /// failure of the request.
    pub fn of_check_error(err: &ClientError) -> Exit {
        match err.code() {
            Some(Code::FAILED_PRECONDITION) => Self::Problems,
            _ => Self::of_error(err),
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        ExitCode::from(exit.code())
    }
}

/// The message of a failed call, without the code `Display` would prefix.
pub fn message(err: &ClientError) -> String {
    match err {
        ClientError::Rpc { message, .. } => message.clone(),
        other => chain(other),
    }
}

/// Prints a failed call on stderr (its ttrpc code by name, and why a refused caller was
/// refused) and returns its exit.
pub fn report(err: &ClientError, check: bool) -> Exit {
    match err.code() {
        Some(code) => eprintln!(
            "knictl: {}: {}",
            knid_transport::errors::code_name(code),
            message(err)
        ),
        None => eprintln!("knictl: {}", chain(err)),
    }
    if let Some(hint) = refusal_hint(err) {
        eprintln!("knictl: {hint}");
    }
    if check {
        Exit::of_check_error(err)
    } else {
        Exit::of_error(err)
    }
}

/// knid hangs up on a caller its allowed_uids and allowed_gids do not name: a transport
/// failure seen by a non-root user is most likely that.
pub fn refusal_hint(err: &ClientError) -> Option<&'static str> {
    (matches!(err, ClientError::Transport(_)) && !nix::unistd::geteuid().is_root()).then_some(
        "knid closed the connection; it serves only the uids and gids in its allowed_uids and \
         allowed_gids (root by default)",
    )
}

/// Connects to knid, or prints why it cannot and returns [`Exit::Unreachable`].
pub fn connect(socket: &std::path::Path) -> Result<RuntimeClient, Exit> {
    RuntimeClient::connect(socket).map_err(|e| {
        eprintln!(
            "knictl: cannot reach knid at {}: {}",
            socket.display(),
            chain(&e)
        );
        Exit::Unreachable
    })
}

#[cfg(test)]
mod tests;
