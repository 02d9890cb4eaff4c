//! `knictl extensions` (the registered extensions, in call order, and how their last calls
//! went) and `knictl extension register|unregister`.

use std::time::Duration;

use knid_transport::{pb, ClientError, RuntimeClient};

use crate::cli::ExtensionAction;
use crate::exit::Exit;
use crate::output::{self, time, Format, Json, Table};

/// Runs `knictl extensions`.
pub fn run_extensions(
    client: &RuntimeClient,
    format: Format,
    timeout: Duration,
) -> Result<Exit, ClientError> {
    let resp = client.list_extensions(timeout)?;
    output::print(format, Json::Message(&resp), || {
        print_extensions(&resp, format);
    });
    Ok(Exit::Success)
}

/// Runs `knictl extension register NAME ...` or `knictl extension unregister NAME`.
pub fn run_extension(
    client: &RuntimeClient,
    action: &ExtensionAction,
    format: Format,
    timeout: Duration,
) -> Result<Exit, ClientError> {
    match action {
        ExtensionAction::Register {
            name,
            extension_socket,
            phases,
            required,
            timeout_ms,
            order,
        } => {
            let req = pb::RegisterExtensionRequest {
                extension: protobuf::MessageField::some(pb::ExtensionSpec {
                    name: name.clone(),
                    socket_path: extension_socket.clone(),
                    phases: phases.clone(),
                    required: *required,
                    timeout_ms: *timeout_ms,
                    order: *order,
                    ..Default::default()
                }),
                ..Default::default()
            };
            client.register_extension(&req, timeout)?;
            output::print(format, Json::Empty, || {
                println!("registered extension {name}");
            });
        }
        ExtensionAction::Unregister { name } => {
            let req = pb::UnregisterExtensionRequest {
                name: name.clone(),
                ..Default::default()
            };
            client.unregister_extension(&req, timeout)?;
            output::print(format, Json::Empty, || {
                println!("unregistered extension {name}");
            });
        }
    }
    Ok(Exit::Success)
}

/// The extensions table; wide adds registration and last-call times.
fn print_extensions(resp: &pb::ListExtensionsResponse, format: Format) {
    if resp.extensions.is_empty() {
        println!("no extensions registered");
        return;
    }
    let mut header = vec![
        "NAME",
        "ORDER",
        "PHASES",
        "REQUIRED",
        "TIMEOUT",
        "SOCKET",
        "LAST CALL",
    ];
    if format.is_wide() {
        header.extend(["LAST CALL AT", "REGISTERED"]);
    }
    let mut table = Table::new(&header);
    for info in &resp.extensions {
        let ext = info.extension.get_or_default();
        let last = match (info.last_call_at, info.last_call_ok) {
            (0, _) => "-".to_owned(),
            (_, true) => "ok".to_owned(),
            (_, false) => format!("error: {}", info.last_error),
        };
        let mut row = vec![
            ext.name.clone(),
            ext.order.to_string(),
            ext.phases.join(","),
            if ext.required { "yes" } else { "no" }.to_owned(),
            format!("{}ms", ext.timeout_ms),
            ext.socket_path.clone(),
            last,
        ];
        if format.is_wide() {
            row.push(time(info.last_call_at));
            row.push(time(info.registered_at));
        }
        table.row(row);
    }
    table.print();
}
