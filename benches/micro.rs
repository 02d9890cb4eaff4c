//! criterion micro-benches of the two pieces of knid's attach path that are not the kernel:
//! - IPAM: one allocation (an IPv4 address from a /16 and an IPv6 one from a /64) and its
//!   release, on an empty pool and on one with 5,000 addresses of each family held;
//! - the store: knid's Pending batch of an attach (core/src/attach.rs: a sandbox record, an
//!   attachment record, two reservations, two cursor moves) written with `Store::commit`
//!   (durable: sled flushed before it returns) and with `Store::apply` (not flushed), in a store
//!   in a tempdir with knid's default cache size. Each timed batch is for a new sandbox; an
//!   untimed `apply` removes it again, so the store stays the size of one sandbox.
//!
//! Measurement time is short (2 s per bench) so `cargo bench` stays short. No root needed.
// criterion_group! and criterion_main! generate undocumented public functions.
#![allow(missing_docs)]

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use knid_core::config::Network;
use knid_core::ipam::Ipam;
use knid_core::Config;
use knid_store::schema::{
    AttachmentRecord, AttachmentState, InterfaceSpecRecord, IpRecord, PodRecord, RouteRecord,
    SandboxRecord,
};
use knid_store::{Batch, Owner, Store, StoreConfig};
use protobuf::{EnumOrUnknown, MessageField};

/// The bench network: knid's default one.
const CONFIG: &str = r#"
[networks.default]
bridge = "knid0"
subnets = ["10.88.0.0/16", "fd00:88::/64"]
"#;
/// The networks' first assignable addresses (the gateways are .1 and ::1).
const V4_FIRST: u32 = u32::from_be_bytes([10, 88, 0, 2]);
const V6_FIRST: u128 = 0xfd00_0088_0000_0000_0000_0000_0000_0002;
/// Addresses of each family held in the "5,000 held" IPAM bench.
const HELD: u32 = 5000;

fn config() -> Config {
    Config::from_toml(CONFIG).expect("bench config")
}

fn network(config: &Config) -> Network {
    config
        .networks()
        .expect("bench networks")
        .into_iter()
        .find(|n| n.name == "default")
        .expect("network default")
}

fn ipam(c: &mut Criterion) {
    let net = network(&config());
    let owner = Owner::new("bench-sandbox", "eth0");
    let mut group = c.benchmark_group("ipam");
    for held in [0, HELD] {
        let ipam = Ipam::new();
        let reservations = (0..held)
            .flat_map(|i| {
                let holder = Owner::new(format!("held-{i}"), "eth0");
                [
                    (IpAddr::V4(Ipv4Addr::from(V4_FIRST + i)), holder.clone()),
                    (IpAddr::V6(Ipv6Addr::from(V6_FIRST + u128::from(i))), holder),
                ]
            })
            .collect();
        ipam.load_network(&net, reservations, &[]);
        group.bench_function(format!("allocate+release /16+/64, {held} held"), |b| {
            b.iter(|| {
                let allocation = ipam.allocate(&net, &owner, &[]).expect("allocate");
                let addrs: Vec<IpAddr> =
                    allocation.leases.iter().map(|l| l.address.addr()).collect();
                ipam.release(&net.name, &addrs);
                black_box(allocation)
            });
        });
    }
    group.finish();
}

/// knid's Pending batch of sandbox `i`'s attach, and the batch removing it again.
fn attach_batches(i: u64) -> (Batch<'static>, Batch<'static>) {
    let id = format!("bench-{i}");
    let netns = format!("/run/netns/{id}");
    let v4 = IpAddr::V4(Ipv4Addr::from(V4_FIRST + (i % 60_000) as u32));
    let v6 = IpAddr::V6(Ipv6Addr::from(V6_FIRST + u128::from(i)));
    let now = 1_760_000_000_000 + i as i64;
    let sandbox = SandboxRecord {
        id: id.clone(),
        netns_path: netns.clone(),
        netns_dev: 4,
        netns_ino: 4_026_532_000 + i,
        generation: 1,
        pod: MessageField::some(PodRecord {
            name: format!("pod-{i}"),
            namespace: "default".to_owned(),
            uid: format!("0b6f2c1e-0000-4000-8000-{i:012}"),
            ..Default::default()
        }),
        created_at_ms: now,
        updated_at_ms: now,
        ..Default::default()
    };
    let route = |dst: &str, gateway: &str| RouteRecord {
        dst: dst.to_owned(),
        gateway: gateway.to_owned(),
        ..Default::default()
    };
    let attachment = AttachmentRecord {
        sandbox_id: id.clone(),
        ifname: "eth0".to_owned(),
        network: "default".to_owned(),
        kind: "veth".to_owned(),
        state: EnumOrUnknown::new(AttachmentState::PENDING),
        mac: format!("02:42:0a:58:{:02x}:{:02x}", (i >> 8) as u8, i as u8),
        mtu: 1500,
        host_ifname: format!("kn{i:08x}"),
        ips: vec![
            IpRecord {
                address: format!("{v4}/16"),
                gateway: "10.88.0.1".to_owned(),
                ..Default::default()
            },
            IpRecord {
                address: format!("{v6}/64"),
                gateway: "fd00:88::1".to_owned(),
                ..Default::default()
            },
        ],
        routes: vec![route("0.0.0.0/0", "10.88.0.1"), route("::/0", "fd00:88::1")],
        spec: MessageField::some(InterfaceSpecRecord {
            network: "default".to_owned(),
            kind: "veth".to_owned(),
            ..Default::default()
        }),
        created_at_ms: now,
        updated_at_ms: now,
        netns_path: netns,
        netns_dev: 4,
        netns_ino: 4_026_532_000 + i,
        ..Default::default()
    };
    let owner = Owner::new(id.clone(), "eth0");
    let mut put = Batch::new();
    put.put_sandbox(sandbox)
        .put_attachment(attachment)
        .reserve("default", v4, owner.clone())
        .reserve("default", v6, owner)
        .set_cursor("default", v4)
        .set_cursor("default", v6);
    let mut remove = Batch::new();
    remove
        .delete_attachment(&id, "eth0")
        .delete_sandbox(&id)
        .release("default", v4)
        .release("default", v6);
    (put, remove)
}

fn store(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("store tempdir");
    let mut cfg = StoreConfig::new(dir.path().join("store"));
    cfg.cache_capacity_bytes = config().store_cache_bytes;
    let store = Store::open(&cfg).expect("open store");
    let mut next = 0u64;
    let mut group = c.benchmark_group("store");
    // A durable commit costs a flush: fewer, longer samples.
    group.sample_size(20);
    for (name, durable) in [
        ("commit attach batch (flushed)", true),
        ("apply attach batch (not flushed)", false),
    ] {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut timed = Duration::ZERO;
                for _ in 0..iters {
                    let (put, remove) = attach_batches(next);
                    next += 1;
                    let started = Instant::now();
                    let committed = if durable {
                        store.commit(&put)
                    } else {
                        store.apply(&put)
                    };
                    timed += started.elapsed();
                    black_box(committed.expect("attach batch"));
                    store.apply(&remove).expect("remove batch");
                }
                timed
            });
        });
    }
    group.finish();
}

criterion_group! {
    name = micro;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = ipam, store
}
criterion_main!(micro);
