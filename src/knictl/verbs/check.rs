//! `knictl check`: a sandbox's attached interfaces against the kernel.

use std::time::Duration;

use knid_transport::{pb, ClientError, RuntimeClient};
use serde_json::json;

use crate::exit::{self, Exit};
use crate::output::{self, Format, Json};

/// Runs `knictl check ID [--ifname NAME]`: `ID: ok`, or the first difference and
/// [`Exit::Problems`]; JSON says which.
pub fn run_check(
    client: &RuntimeClient,
    id: &str,
    ifname: Option<&str>,
    format: Format,
    timeout: Duration,
) -> Result<Exit, ClientError> {
    let req = pb::CheckRequest {
        sandbox_id: id.to_owned(),
        ifname: ifname.unwrap_or_default().to_owned(),
        ..Default::default()
    };
    let outcome = client.check(&req, timeout);
    let difference = match &outcome {
        Ok(()) => None,
        Err(e) if Exit::of_check_error(e) == Exit::Problems => Some(exit::message(e)),
        Err(_) => return outcome.map(|()| Exit::Success),
    };
    let json = Json::value(|| {
        json!({
            "sandbox_id": id,
            "ifname": ifname.unwrap_or_default(),
            "ok": difference.is_none(),
            "difference": difference,
        })
    });
    output::print(format, json, || match &difference {
        None => println!("{id}: ok"),
        Some(d) => println!("{id}: differs: {d}"),
    });
    Ok(match outcome {
        Ok(()) => Exit::Success,
        Err(e) => exit::report(&e, true),
    })
}
