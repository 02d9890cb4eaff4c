//! A well-behaved client's Status latency (p50, p99, max) before, during and after four hostile
//! connections (testkit/src/abuse.rs: a pipeliner that reads nothing, a slowloris, a garbage
//! writer and `KNID_ABUSE_IDLE` idle connections, default 1,000, which is 300 over the
//! `max_connections` of 700 the bench gives knid), each phase `KNID_ABUSE_SECS` long (default
//! 30). Then what knid gives back: its threads, open files and RSS sampled every 250 ms for 15 s
//! while a light client keeps calling Status every 5 ms, against the idle values read before
//! the abuse (testkit/src/give_back.rs). Prints the numbers; asserts nothing but that the
//! clients got no error. Without root it prints nothing and exits 0.

use std::time::Duration;

use nix::unistd::Pid;
use testkit::abuse;
use testkit::give_back::{recovery, Footprint};
use testkit::measure::env_count;
use testkit::TestNode;

/// RSS within this of the idle value counts as given back.
const RSS_SLACK_KIB: u64 = 512;

fn main() {
    if !testkit::privileged() {
        return;
    }
    let idle = env_count("KNID_ABUSE_IDLE", 1000);
    let secs = env_count("KNID_ABUSE_SECS", 30) as u64;
    abuse::raise_nofile(idle + 64);
    let max_connections = idle.saturating_sub(300).max(16);
    let node = TestNode::start(&format!("max_connections = {max_connections}\n"));
    let pid = u32::try_from(Pid::as_raw(node.pid())).expect("pid");
    std::thread::sleep(Duration::from_secs(2));
    let at_idle = Footprint::of(pid);
    let run = abuse::run(node.socket(), idle, Duration::from_secs(secs));
    run.print();
    println!(
        "abuse: p99 during / before = {:.2} ({idle} idle connections, max_connections \
         {max_connections}, {secs} s phases)",
        run.p99_ratio()
    );
    for probed in [&run.before, &run.during, &run.after] {
        assert!(probed.errors.is_empty(), "{:?}", probed.errors);
    }
    let burst_end = Footprint::of(pid);
    // The light client's own connection is one more file than idle.
    let with_client = Footprint {
        fds: at_idle.fds + 1,
        ..at_idle
    };
    let back = recovery(
        node.socket(),
        pid,
        &with_client,
        RSS_SLACK_KIB,
        Duration::from_millis(5),
        Duration::from_secs(15),
    );
    println!("give back: idle before the abuse: {at_idle}");
    println!("give back: right after the abuse and its 'after' phase: {burst_end}");
    for (at, footprint) in back.samples.iter().step_by(4) {
        println!("give back: +{:>5.2} s: {footprint}", at.as_secs_f64());
    }
    match back.back_after {
        Some(at) => println!(
            "give back: threads, fds and RSS (within {RSS_SLACK_KIB} KiB) back to idle {:.2} s \
             after the burst, a light client calling every 5 ms ({} calls, {} failed)",
            at.as_secs_f64(),
            back.calls.0,
            back.calls.1
        ),
        None => println!(
            "give back: NOT back to idle within 15 s ({} calls, {} failed)",
            back.calls.0, back.calls.1
        ),
    }
    assert_eq!(back.calls.1, 0, "the light client's calls failed");
}
