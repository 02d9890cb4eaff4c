//! `knictl completion bash|zsh|fish`: the shell's completion script, generated from the command
//! line definition so it never lags a new verb or flag.

use clap::CommandFactory;

use crate::cli::{Cli, Shell};
use crate::exit::Exit;

/// Runs `knictl completion SHELL`: the completion script of `shell` on stdout.
pub fn run_completion(shell: Shell) -> Exit {
    let shell = match shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    clap_complete::generate(shell, &mut Cli::command(), "knictl", &mut std::io::stdout());
    Exit::Success
}
