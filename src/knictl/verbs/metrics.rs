//! `knictl metrics`: knid's Prometheus exposition, whole or the families of a prefix.

use std::time::Duration;

use knid_transport::{pb, ClientError, RuntimeClient};

use crate::exit::Exit;
use crate::output::{self, Format, Json};

/// Runs `knictl metrics [PREFIX]`; `-o json` wraps the text as `{"text": ...}`.
pub fn run_metrics(
    client: &RuntimeClient,
    prefix: Option<&str>,
    format: Format,
    timeout: Duration,
) -> Result<Exit, ClientError> {
    let mut resp = pb::MetricsResponse::new();
    resp.text = metric_families(&client.metrics(timeout)?, prefix);
    output::print(format, Json::Message(&resp), || print!("{}", resp.text));
    Ok(Exit::Success)
}

/// The metric families of a Prometheus exposition whose names start with `prefix` (every one
/// when `None`): their HELP, TYPE and sample lines, in order.
fn metric_families(text: &str, prefix: Option<&str>) -> String {
    let Some(prefix) = prefix else {
        return text.to_owned();
    };
    text.lines()
        .filter(|line| {
            let name = match line.strip_prefix("# ") {
                // `# HELP <name> ...` and `# TYPE <name> ...`
                Some(comment) => comment.split_whitespace().nth(1).unwrap_or_default(),
                None => line.split(['{', ' ']).next().unwrap_or_default(),
            };
            name.starts_with(prefix)
        })
        .flat_map(|line| [line, "\n"])
        .collect()
}

#[cfg(test)]
mod tests;
