//! `knictl inspect` (and the sandbox `attach` prints): a sandbox's states and kernel objects as
//! knid recorded them, and beside each interface what the kernel has now.

use std::collections::HashMap;
use std::time::Duration;

use knid_transport::{pb, ClientError, RuntimeClient};

use crate::exit::Exit;
use crate::kernel::{self, LinkView, LiveInterface, LiveSandbox};
use crate::output::{self, Format, Json};

/// Runs `knictl inspect ID [--no-kernel]`.
pub fn run_inspect(
    client: &RuntimeClient,
    id: &str,
    no_kernel: bool,
    format: Format,
    timeout: Duration,
) -> Result<Exit, ClientError> {
    let req = pb::InspectRequest {
        sandbox_id: id.to_owned(),
        ..Default::default()
    };
    let sandbox = client.inspect(&req, timeout)?;
    let networks = client.networks(timeout)?;
    let bridges = bridges(&networks);
    let live = (!no_kernel).then(|| kernel::probe(&sandbox, &bridges, &kinds(&networks)));
    // The sandbox's own JSON unchanged, the live view added beside it.
    let json = Json::value(|| {
        let mut value = output::json_of(&sandbox);
        if let (Some(live), Some(map)) = (&live, value.as_object_mut()) {
            map.insert("kernel".to_owned(), kernel::to_json(live));
        }
        value
    });
    output::print(format, json, || {
        print_sandbox(&sandbox, &bridges, live.as_ref());
    });
    Ok(Exit::Success)
}

/// Network name → bridge name, for the bridge networks.
pub fn bridges(resp: &pb::NetworksResponse) -> HashMap<String, String> {
    resp.networks
        .iter()
        .filter(|n| !n.bridge.is_empty())
        .map(|n| (n.name.clone(), n.bridge.clone()))
        .collect()
}

/// Network name → kind (`bridge`, `routed`, ...).
pub fn kinds(resp: &pb::NetworksResponse) -> HashMap<String, String> {
    resp.networks
        .iter()
        .map(|n| (n.name.clone(), n.kind.clone()))
        .collect()
}

/// The recorded view of a sandbox, with the live view under each interface when given.
pub fn print_sandbox(
    s: &pb::Sandbox,
    bridges: &HashMap<String, String>,
    live: Option<&LiveSandbox>,
) {
    println!("sandbox:    {}", s.id);
    println!("state:      {}", s.state);
    println!("netns:      {} (inode {})", s.netns_path, s.netns_inode);
    if let Some(pod) = s.pod.as_ref().filter(|p| !p.name.is_empty()) {
        println!("pod:        {}/{} ({})", pod.namespace, pod.name, pod.uid);
    }
    println!("generation: {}", s.generation);
    if s.created_at > 0 {
        println!(
            "created:    {}   updated: {}",
            output::time(s.created_at),
            output::time(s.updated_at)
        );
    }
    if let Some(live) = live {
        let whole: Vec<&str> = [&live.netns_problem, &live.host_problem, &live.nft_problem]
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect();
        let summary = match (live.ok(), whole.is_empty()) {
            (true, _) => "every recorded object is present".to_owned(),
            (false, true) => "differences below".to_owned(),
            (false, false) => whole.join("; "),
        };
        println!("kernel:     {summary}");
    }
    for (at, i) in s.interfaces.iter().enumerate() {
        print_interface(
            i,
            bridges.get(&i.network),
            live.and_then(|l| l.interfaces.get(at)),
        );
    }
    print_host_ports(s, live);
}

/// Each mapping as recorded (`tcp 8080 -> 80`), then each element knid keeps for it in its
/// nf_tables table and whether the kernel has it.
fn print_host_ports(s: &pb::Sandbox, live: Option<&LiveSandbox>) {
    for m in &s.port_mappings {
        let protocol = if m.protocol.is_empty() {
            "tcp"
        } else {
            &m.protocol
        };
        let on = if m.host_ip.is_empty() {
            String::new()
        } else {
            format!(" on {}", m.host_ip)
        };
        println!(
            "host port {protocol}/{}{on} -> pod port {}",
            m.host_port, m.container_port
        );
    }
    for p in live.map(|l| l.host_ports.as_slice()).unwrap_or_default() {
        let state = if p.present {
            "in the kernel"
        } else {
            "MISSING from the kernel"
        };
        println!("  element {}  [{state}]", p.element);
    }
}

fn print_interface(i: &pb::InterfaceResult, bridge: Option<&String>, live: Option<&LiveInterface>) {
    println!(
        "interface {} ({} on {}, {}):",
        i.name, i.kind, i.network, i.state
    );
    if crate::kernel::is_dan(i) {
        // Nothing of it is in the sandbox netns: the guest's interface is made by Kata from the
        // DAN file.
        println!(
            "  guest interface {} (in the VM, from the DAN file)  mac {}  mtu {}",
            i.name, i.mac, i.mtu
        );
    } else {
        let pod_found = live.and_then(|l| l.pod_link.as_ref()).map(found_text);
        println!(
            "  pod link {}  mac {}  mtu {}{}",
            i.name,
            i.mac,
            i.mtu,
            pod_found.map(|t| format!("  [{t}]")).unwrap_or_default()
        );
    }
    if !i.host_ifname.is_empty() {
        let role = match i.kind.as_str() {
            "macvlan" | "ipvlan" => "parent",
            _ => "host link",
        };
        let master = bridge.map(|b| format!("  master {b}")).unwrap_or_default();
        let host_found = live.and_then(|l| l.host_link.as_ref()).map(found_text);
        println!(
            "  {role} {}{master}{}",
            i.host_ifname,
            host_found.map(|t| format!("  [{t}]")).unwrap_or_default()
        );
    }
    if !i.mode.is_empty() {
        println!("  mode {}", i.mode);
    }
    if let Some(t) = i.tap.as_ref() {
        print_tap(t, live.and_then(|l| l.tap.as_ref()));
    }
    if let Some(b) = i.bandwidth.as_ref() {
        let limit = |rate: u64, burst: u64| {
            if rate == 0 {
                "unlimited".to_owned()
            } else {
                format!("{rate} bit/s (burst {burst} bit)")
            }
        };
        println!(
            "  bandwidth ingress {}, egress {}",
            limit(b.ingress_rate, b.ingress_burst),
            limit(b.egress_rate, b.egress_burst)
        );
    }
    if let Some(d) = i.device.as_ref() {
        let pci = if d.pci_address.is_empty() {
            String::new()
        } else {
            format!(" (PCI {})", d.pci_address)
        };
        println!(
            "  device {}{pci}, host mtu {}: moved back on detach",
            d.original_name, d.original_mtu
        );
    }
    if !i.dan_path.is_empty() {
        println!("  dan file {}", i.dan_path);
    }
    for ip in &i.ips {
        println!("  ip {} gw {}", ip.address, output::dash(&ip.gateway));
    }
    for r in &i.routes {
        let via = if r.gateway.is_empty() {
            format!("dev {} scope {}", i.name, r.scope)
        } else {
            format!("via {}", r.gateway)
        };
        println!("  route {} {via}", r.dst);
    }
    for n in &i.neighbors {
        println!("  neighbour {} lladdr {}", n.ip, n.mac);
    }
    if let Some(live) = live {
        if live.problems.is_empty() {
            println!("  kernel: ok");
        }
        for p in &live.problems {
            println!("  kernel: {p}");
        }
    }
}

fn print_tap(t: &pb::TapResult, live: Option<&LinkView>) {
    let netns = if t.netns_path.is_empty() {
        "host netns"
    } else {
        &t.netns_path
    };
    println!(
        "  tap {} in {netns}: queue pairs {}{}, vnet_hdr {}, no_pi {}, vhost-net {}{}",
        t.name,
        t.queue_pairs,
        if t.multi_queue { " (multi-queue)" } else { "" },
        t.vnet_hdr,
        t.no_pi,
        if t.vhost_net_ok {
            "usable"
        } else {
            "unavailable"
        },
        live.map(|v| format!("  [{}]", found_text(v)))
            .unwrap_or_default()
    );
    let owner = |id: Option<u32>| id.map_or("-".to_owned(), |v| v.to_string());
    println!(
        "    owner uid {} gid {}{}",
        owner(t.owner_uid),
        owner(t.owner_gid),
        if t.redirect_peer.is_empty() {
            String::new()
        } else {
            format!(", tc redirect <-> {}", t.redirect_peer)
        }
    );
}

/// What the kernel has for one link, in brackets after the recorded line.
fn found_text(view: &LinkView) -> String {
    match &view.found {
        None => "MISSING".to_owned(),
        Some(f) => format!(
            "ifindex {}, {}{}",
            f.index,
            if f.up { "up" } else { "DOWN" },
            f.master
                .as_ref()
                .map(|m| format!(", master {m}"))
                .unwrap_or_default()
        ),
    }
}
