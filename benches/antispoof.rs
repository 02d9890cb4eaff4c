//! What a pod's source guard costs an attach (docs/performance.md#source-address-guards).
//!
//! 1. The floor: the guard's one nf_tables transaction (`Nft::add_guards`: the table and its
//!    counters ensured, the chain and its ten rules) and its removal, `KNID_BENCH_N` (default
//!    200) times each, in a private network namespace, for a link that does not exist yet;
//!    then the same transaction with 0, 1,000 and `KNID_BENCH_PRESENT` (default 5,000) other
//!    guards already installed (spread over the 64 tables as knid spreads them): the kernel
//!    validates every base chain of the table a commit adds rules to, so what a guard costs
//!    depends on how many share its table (docs/architecture.md#source-address-guards).
//! 2. knid: sequential attach+detach cycles on two bridge networks of one knid, `default`
//!    (guarded) and `open` (`antispoof = false`), interleaved cycle by cycle so both see the
//!    same machine; after 5 warm-up cycles of each. Netns creation is not timed.
//!
//! Numbers are reported, never asserted.

use std::time::{Duration, Instant};

use knid_netops::nft::{Guard, Nft};
use testkit::measure::{env_count, ms, percentile, report};
use testkit::{TestNode, RPC};

const WARM_UP: usize = 5;

const CONFIG: &str = r#"
[networks.default]
bridge = "knid0"
subnets = ["10.88.0.0/16", "fd00:88::/64"]

[networks.open]
bridge = "knid1"
subnets = ["10.89.0.0/16", "fd00:89::/64"]
antispoof = false
"#;

/// The guard's transactions alone, for a link that does not exist yet (as an attach installs
/// it) and for one that does (its hook registered: removing it waits for the kernel to
/// unhook).
fn floor(cycles: usize) {
    for with_link in [false, true] {
        let (mut add, mut remove) = (Vec::new(), Vec::new());
        std::thread::scope(|s| {
            s.spawn(|| {
                nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("a private netns");
                let mut nft = Nft::open().expect("nf_tables socket");
                let mut rtnl = knid_netops::Rtnl::open().expect("rtnetlink socket");
                for i in 0..cycles + WARM_UP {
                    let guard = guard(i);
                    if with_link {
                        let end = |name: &str| knid_netops::VethEnd {
                            name: name.to_owned(),
                            mtu: None,
                            mac: None,
                        };
                        rtnl.create_veth(&knid_netops::VethSpec {
                            host: end(&guard.device),
                            peer: end(&format!("kp{i:010x}")),
                            peer_netns: None,
                            host_controller: None,
                        })
                        .expect("a veth");
                        for name in [guard.device.clone(), format!("kp{i:010x}")] {
                            let link = rtnl.link_by_name(&name).expect("look up").expect("veth");
                            rtnl.set_up(link.index).expect("set up");
                        }
                    }
                    let (added, removed) = add_and_remove(&mut nft, &guard);
                    if i >= WARM_UP {
                        add.push(added);
                        remove.push(removed);
                    }
                    if with_link {
                        rtnl.delete_link_by_name(&guard.device).expect("delete");
                    }
                }
            });
        });
        let link = if with_link {
            "its link up"
        } else {
            "no link yet"
        };
        println!("\nthe guard's nf_tables transaction alone ({cycles} times, {link})");
        report("add", &mut add);
        report("remove", &mut remove);
    }
}

/// How long `guard`'s transaction took, and its removal's.
fn add_and_remove(nft: &mut Nft, guard: &Guard) -> (Duration, Duration) {
    let started = Instant::now();
    nft.add_guards("knid", std::slice::from_ref(guard))
        .expect("add a guard");
    let added = started.elapsed();
    let started = Instant::now();
    nft.remove_guards("knid", &[guard.device.as_str()])
        .expect("remove a guard");
    (added, started.elapsed())
}

fn guard(i: usize) -> Guard {
    Guard {
        device: format!("kn{i:010x}"),
        mac: [0x02, 0, 0, (i >> 16) as u8, (i >> 8) as u8, i as u8],
        addresses: vec![
            format!("10.{}.{}.{}", 64 + i / 62_500, i / 250 % 250, i % 250 + 2)
                .parse()
                .expect("ip"),
            format!("fd00:88::{:x}:{:x}", i >> 16, (i & 0xffff) + 2)
                .parse()
                .expect("ip"),
        ],
    }
}

/// One guard's transaction (and its removal) while `present` others are installed, for a
/// link that does not exist yet.
fn with_others(cycles: usize, most: usize) {
    std::thread::scope(|s| {
        s.spawn(|| {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("a private netns");
            let mut nft = Nft::open().expect("nf_tables socket");
            let mut installed = 0;
            let mut steps = vec![0, 1000, most];
            steps.dedup();
            for present in steps {
                while installed < present {
                    let batch: Vec<Guard> = (installed..present.min(installed + 100))
                        .map(guard)
                        .collect();
                    nft.add_guards("knid", &batch).expect("add the others");
                    installed += batch.len();
                }
                let (mut add, mut remove) = (Vec::new(), Vec::new());
                for i in 0..cycles + WARM_UP {
                    let (added, removed) = add_and_remove(&mut nft, &guard(1_000_000 + i));
                    if i >= WARM_UP {
                        add.push(added);
                        remove.push(removed);
                    }
                }
                println!(
                    "\nthe guard's nf_tables transaction with {present} other guards installed \
                     ({cycles} times, no link yet)"
                );
                report("add", &mut add);
                report("remove", &mut remove);
            }
        });
    });
}

fn main() {
    if !testkit::privileged() {
        return;
    }
    let cycles = env_count("KNID_BENCH_N", 200);
    floor(cycles);
    with_others(cycles, env_count("KNID_BENCH_PRESENT", 5000).max(1000));
    let node = TestNode::start(CONFIG);
    let client = node.client();
    let mut attach = [Vec::new(), Vec::new()];
    let mut detach = [Vec::new(), Vec::new()];
    let networks = ["default", "open"];
    for i in 0..cycles + WARM_UP {
        for (n, network) in networks.iter().enumerate() {
            let id = format!("{network}-{i}");
            let netns = node.netns(&id);
            let mut req = node.attach_req(&id, &netns, "eth0");
            req.interfaces[0].network = (*network).to_owned();
            let started = Instant::now();
            client.attach(&req, RPC).expect("Attach");
            let attached = started.elapsed();
            let started = Instant::now();
            client
                .detach(&testkit::detach_req(&id), RPC)
                .expect("Detach");
            let detached = started.elapsed();
            node.remove_netns(&netns);
            if i >= WARM_UP {
                attach[n].push(attached);
                detach[n].push(detached);
            }
        }
    }
    for (n, label) in ["guarded (antispoof on)", "open (antispoof = false)"]
        .iter()
        .enumerate()
    {
        println!("\nknid, veth on a bridge, dual stack, {label}: {cycles} cycles");
        report("attach", &mut attach[n]);
        report("detach", &mut detach[n]);
    }
    let p50 = |s: &[Duration]| ms(percentile(s, 50.0));
    println!(
        "\nattach p50: guarded {:.3} ms, open {:.3} ms: the guard adds {:.3} ms",
        p50(&attach[0]),
        p50(&attach[1]),
        p50(&attach[0]) - p50(&attach[1])
    );
}
