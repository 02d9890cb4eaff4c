//! A well-behaved client of the live daemon, served throughout four hostile connections: one
//! pipelining Metrics requests without reading an answer, a slowloris never finishing a frame, one
//! writing random bytes, and 1,000 idle connections (testkit/src/abuse.rs). Its Status calls must
//! all succeed on its one connection before, during and after the abuse; knid must disconnect
//! the pipeliner and the slowloris (each by its own deadline) and stay up. The latencies are
//! printed here and measured by benches/abuse.rs, never asserted.

use std::time::Duration;

use testkit::abuse;
use testkit::TestNode;

/// Idle connections held during the abuse.
const IDLE: usize = 1000;
/// Each phase: long enough for knid's 10 s deadlines to drop the pipeliner and the slowloris.
const PHASE: Duration = Duration::from_secs(15);

#[test]
fn a_well_behaved_client_is_served_throughout_four_abusive_connections() {
    if !testkit::privileged() {
        return;
    }
    abuse::raise_nofile(IDLE + 64);
    let mut node = TestNode::start("");
    let run = abuse::run(node.socket(), IDLE, PHASE);
    run.print();
    for (phase, probed) in [
        ("before", &run.before),
        ("during", &run.during),
        ("after", &run.after),
    ] {
        assert!(
            probed.errors.is_empty(),
            "the well-behaved client got errors {phase} the abuse: {:?}",
            probed.errors
        );
        assert!(!probed.latencies.is_empty(), "no call answered {phase}");
    }
    let dropped = |name| {
        run.abused
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(0, |(_, seen)| seen.dropped)
    };
    assert!(
        dropped("pipeliner") >= 1,
        "knid never dropped the connection that reads none of its answers: {:?}",
        run.abused
    );
    assert!(
        dropped("slowloris") >= 1,
        "knid never dropped the connection that never finishes its frame: {:?}",
        run.abused
    );
    assert!(node.is_running(), "knid died under the abuse");
    let log = node.log_text();
    assert!(!log.contains("panicked"), "knid panicked:\n{log}");
    let disconnects: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("disconnecting connection"))
        .collect();
    println!("{}", disconnects.join("\n"));
    assert!(
        disconnects.iter().any(|l| l.contains(" uid ")),
        "no disconnection is logged with the peer's credentials"
    );
}
