//! A well-behaved client's Status latency (p50, p99, max) before, during and after four hostile
//! connections (testkit/src/abuse.rs: a pipeliner that reads nothing, a slowloris, a garbage
//! writer and `KNID_ABUSE_IDLE` idle connections, default 1,000), each phase `KNID_ABUSE_SECS`
//! long (default 30). Prints the numbers and the p99 ratio during/before; asserts nothing but
//! that the client got no error. Without root it prints nothing and exits 0.

use std::time::Duration;

use testkit::abuse;
use testkit::measure::env_count;
use testkit::TestNode;

fn main() {
    if !testkit::privileged() {
        return;
    }
    let idle = env_count("KNID_ABUSE_IDLE", 1000);
    let secs = env_count("KNID_ABUSE_SECS", 30) as u64;
    abuse::raise_nofile(idle + 64);
    let node = TestNode::start("");
    let run = abuse::run(node.socket(), idle, Duration::from_secs(secs));
    run.print();
    println!(
        "abuse: p99 during / before = {:.2} ({idle} idle connections, {secs} s phases)",
        run.p99_ratio()
    );
    for probed in [&run.before, &run.during, &run.after] {
        assert!(probed.errors.is_empty(), "{:?}", probed.errors);
    }
}
