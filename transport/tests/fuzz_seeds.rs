//! Replays the seed corpora of the transport's fuzz targets (fuzz/corpus/) on stable, through
//! the same `knid_transport::fuzz` functions the targets call, so CI exercises every seed.
//! A seed named `valid_*` must be accepted, one named `invalid_*` refused the way bad input is
//! refused (InvalidArgument, the CNI codes for bad input, an extension's no with words).

use knid_core::cni::error::{DECODE, INCOMPATIBLE_VERSION, INVALID_CONFIG, INVALID_ENV};
use knid_core::ErrorKind;
use knid_transport::fuzz;
use testkit::fuzz_corpus::{corpus, replay};
use testkit::ttrpc_frames;

fn invalid_argument(e: &knid_core::Error) -> bool {
    e.kind() == ErrorKind::InvalidArgument
}

#[test]
fn attach_request_seeds_keep_their_verdicts() {
    replay("attach_request", fuzz::attach_request, invalid_argument);
}

#[test]
fn runtime_request_seeds_keep_their_verdicts() {
    replay("runtime_request", fuzz::runtime_request, invalid_argument);
}

#[test]
fn kni_request_seeds_keep_their_verdicts() {
    replay("kni_request", fuzz::kni_request, invalid_argument);
}

#[test]
fn extension_answer_seeds_keep_their_verdicts() {
    replay(
        "extension_answer",
        fuzz::extension_answer,
        |text: &String| !text.trim().is_empty(),
    );
}

#[test]
fn cni_invocation_seeds_keep_their_verdicts() {
    replay("cni_invocation", fuzz::cni_invocation, |e| {
        [INCOMPATIBLE_VERSION, INVALID_ENV, DECODE, INVALID_CONFIG].contains(&e.code)
    });
}

#[test]
fn ttrpc_frames_seeds_decode_alike_in_any_pieces_and_keep_their_verdicts() {
    for seed in corpus("ttrpc_frames", &["whole", "partial", "oversized"]) {
        let (frames, pending) = ttrpc_frames::check(&seed.bytes);
        assert_eq!(
            ttrpc_frames::verdict(&frames, pending),
            seed.verdict,
            "ttrpc_frames/{}: {frames:?}, {pending} pending",
            seed.name
        );
    }
}
