//! What observing knid costs, measured on the release daemon:
//! - counting one operation (`Metrics::observe_operation`: a labelled counter and histogram), in
//!   process, per call;
//! - the `Metrics` RPC and an HTTP `GET /metrics` scrape on `metrics_addr` (a keep-alive-free
//!   TCP connection per scrape, as Prometheus opens them), with `KNID_BENCH_N` sandboxes attached
//!   (default 200), and the size of the exposition;
//! - knid's idle footprint (VmRSS, threads) with and without the HTTP listener.
//!
//! Numbers are reported, never asserted.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use knid_core::metrics::Metrics;
use testkit::measure::{env_count, proc_status, report};
use testkit::{TestNode, RPC};

const PORT: u16 = 9584;
const SCRAPES: usize = 200;
const SETTLE_IDLE: Duration = Duration::from_secs(6);

fn main() {
    count_operations();
    if !testkit::privileged() {
        return;
    }
    let sandboxes = env_count("KNID_BENCH_N", 200);
    let plain = TestNode::start(r#"gc_interval = "0s""#);
    let listening = TestNode::start(&format!(
        "gc_interval = \"0s\"\nmetrics_addr = \"{PORT}\"\n"
    ));
    // Both started, then a moment for start-up's transient threads to leave.
    std::thread::sleep(SETTLE_IDLE);
    println!("\nidle footprint ({SETTLE_IDLE:?} after start-up):");
    for (what, node) in [
        ("without metrics_addr", &plain),
        ("with metrics_addr", &listening),
    ] {
        let pid = node.pid().as_raw() as u32;
        println!(
            "  {what:<21} VmRSS {:>6} kB   threads {}",
            proc_status(pid, "VmRSS").unwrap_or(0),
            proc_status(pid, "Threads").unwrap_or(0)
        );
    }
    drop(plain);

    let client = listening.client();
    for i in 0..sandboxes {
        let netns = listening.netns(&format!("o{i}"));
        client
            .attach(
                &listening.attach_req(&format!("pod-o{i}"), &netns, "eth0"),
                RPC,
            )
            .expect("attach");
    }
    let text = client.metrics(RPC).expect("Metrics");
    println!(
        "\nwith {sandboxes} sandboxes attached: exposition {} bytes, {} lines",
        text.len(),
        text.lines().count()
    );
    let mut rpc: Vec<Duration> = (0..SCRAPES)
        .map(|_| {
            let started = Instant::now();
            client.metrics(RPC).expect("Metrics");
            started.elapsed()
        })
        .collect();
    report("Metrics RPC", &mut rpc);
    let mut http = scrapes_in(&listening);
    report("GET /metrics", &mut http);
    let pid = listening.pid().as_raw() as u32;
    println!(
        "  knid after the scrapes: VmRSS {} kB, threads {}",
        proc_status(pid, "VmRSS").unwrap_or(0),
        proc_status(pid, "Threads").unwrap_or(0)
    );
}

/// `observe_operation` per call, over a few label sets as a busy node has them.
fn count_operations() {
    let metrics = Metrics::new();
    let ops = ["attach", "detach", "inspect", "status"];
    let calls: u32 = 1_000_000;
    let started = Instant::now();
    for i in 0..calls {
        let op = ops[i as usize % ops.len()];
        metrics.observe_operation(op, "OK", Duration::from_micros(u64::from(i % 5000)));
    }
    let per_call = started.elapsed() / calls;
    println!("observe_operation: {per_call:?} per call ({calls} calls)");
}

/// `SCRAPES` HTTP scrapes from a thread inside the node's netns (127.0.0.1 is the node's).
fn scrapes_in(node: &TestNode) -> Vec<Duration> {
    let netns = std::fs::File::open(node.host_path()).expect("open the node's netns");
    std::thread::scope(|s| {
        s.spawn(|| {
            nix::sched::setns(&netns, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
            (0..SCRAPES)
                .map(|_| {
                    let started = Instant::now();
                    let mut stream = TcpStream::connect(("127.0.0.1", PORT)).expect("connect");
                    stream
                        .write_all(
                            b"GET /metrics HTTP/1.1\r\nHost: knid\r\nConnection: close\r\n\r\n",
                        )
                        .expect("send");
                    let mut body = Vec::new();
                    stream.read_to_end(&mut body).expect("read");
                    assert!(body.starts_with(b"HTTP/1.1 200"), "scrape failed");
                    started.elapsed()
                })
                .collect()
        })
        .join()
        .expect("scrape thread")
    })
}
