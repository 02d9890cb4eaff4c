use super::*;
use clap::CommandFactory;

#[test]
fn the_command_line_definition_is_consistent() {
    Cli::command().debug_assert();
}

#[test]
fn keep_attachment_needs_both_parts() {
    assert!(attachment_ref("pod-1/eth0").is_ok());
    for bad in ["pod-1", "/eth0", "pod-1/", "pod-1/eth0/x"] {
        assert!(attachment_ref(bad).is_err(), "{bad} accepted");
    }
}
