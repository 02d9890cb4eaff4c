use std::io::Read;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use super::Outbox;

/// A non-blocking pair: the server's end and the peer's.
fn pair() -> (UnixStream, UnixStream) {
    let (ours, peer) = UnixStream::pair().expect("socketpair");
    ours.set_nonblocking(true).expect("non-blocking");
    (ours, peer)
}

/// Pushes frames of `size` until one has to wait; the bytes pushed.
fn fill(outbox: &mut Outbox, stream: &UnixStream, size: usize) -> usize {
    let frame = vec![7u8; size];
    let mut pushed = 0;
    for _ in 0..10_000 {
        pushed += size;
        if outbox.push(stream, &frame).expect("push") {
            return pushed;
        }
    }
    panic!("the socket never filled");
}

#[test]
fn an_answer_goes_straight_out_when_nothing_waits() {
    let (ours, mut peer) = pair();
    let mut outbox = Outbox::default();
    assert!(!outbox.push(&ours, b"hello").expect("push"));
    assert_eq!(outbox.waiting(), 0);
    assert_eq!(outbox.stalled_for(Instant::now()), None);
    let mut got = [0u8; 5];
    peer.read_exact(&mut got).expect("read");
    assert_eq!(&got, b"hello");
}

#[test]
fn answers_wait_when_the_peer_reads_nothing_and_go_out_in_order_once_it_reads() {
    let (ours, mut peer) = pair();
    let mut outbox = Outbox::default();
    let pushed = fill(&mut outbox, &ours, 4096);
    assert!(outbox.waiting() > 0);
    // Later answers queue behind, never overtaking.
    assert!(!outbox.push(&ours, &[9u8; 100]).expect("push"));
    let waiting = outbox.waiting();
    assert!(outbox.stalled_for(Instant::now()).is_some());

    let total = pushed + 100;
    let mut got = Vec::with_capacity(total);
    let mut buf = vec![0u8; 64 << 10];
    peer.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    while got.len() < total {
        if outbox.waiting() > 0 {
            outbox.flush(&ours).expect("flush");
        }
        let n = peer.read(&mut buf).expect("read");
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(outbox.waiting(), 0, "{waiting} bytes waited");
    assert_eq!(outbox.stalled_for(Instant::now()), None);
    assert!(got[..pushed].iter().all(|b| *b == 7));
    assert!(got[pushed..].iter().all(|b| *b == 9));
}

#[test]
fn a_peer_that_is_gone_breaks_the_outbox_and_later_answers_are_dropped() {
    let (ours, peer) = pair();
    let mut outbox = Outbox::default();
    drop(peer);
    assert!(outbox.push(&ours, b"hello").is_err());
    assert!(!outbox.push(&ours, b"again").expect("dropped quietly"));
    assert_eq!(outbox.waiting(), 0);
}

#[test]
fn stalled_for_counts_from_the_last_byte_that_went_out() {
    let (ours, _peer) = pair();
    let mut outbox = Outbox::default();
    fill(&mut outbox, &ours, 4096);
    let later = Instant::now() + Duration::from_secs(3);
    let stalled = outbox.stalled_for(later).expect("stalled");
    assert!(stalled >= Duration::from_secs(3), "{stalled:?}");
}
