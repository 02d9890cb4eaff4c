//! What decoding a byte stream into ttrpc frames must hold, whatever the bytes: shared by the
//! `ttrpc_frames` fuzz target and its replay test (transport/tests/fuzz_seeds.rs), so both
//! check the same things.

use knid_transport::frame::{decode_all, Frame, FrameReader, HEADER_LEN};

/// The payload cap the checks decode with: small, so oversized frames are common.
pub const MAX: usize = 64;

/// Decodes `bytes` in one go and in pieces of several sizes, checks that every way gives the
/// same frames and pending count, that whole frames carry exactly their length (within the
/// cap) and oversized ones are over it, and that no more than one unfinished frame is held.
/// Returns the frames and the bytes pending.
pub fn check(bytes: &[u8]) -> (Vec<Frame>, usize) {
    let (frames, pending) = decode_all(bytes, MAX);
    for frame in &frames {
        match frame {
            Frame::Whole { header, payload } => {
                assert_eq!(payload.len(), header.length as usize);
                assert!(payload.len() <= MAX);
            }
            Frame::Oversized { header } => assert!(header.length as usize > MAX),
        }
    }
    assert!(pending < HEADER_LEN + MAX, "{pending} bytes pending");
    for piece in [1, 3, HEADER_LEN, HEADER_LEN + 1, bytes.len() / 2 + 1] {
        let mut reader = FrameReader::new(MAX);
        let mut got = Vec::new();
        for chunk in bytes.chunks(piece) {
            reader.push(chunk);
            got.extend(std::iter::from_fn(|| reader.next_frame()));
        }
        assert_eq!(got, frames, "pieces of {piece}");
        assert_eq!(reader.pending(), pending, "pieces of {piece}");
    }
    (frames, pending)
}

/// A seed's verdict from what [`check`] decoded: `oversized` when a frame was over the cap,
/// else `partial` when bytes of an unfinished frame are left, else `whole`.
pub fn verdict(frames: &[Frame], pending: usize) -> &'static str {
    if frames.iter().any(|f| matches!(f, Frame::Oversized { .. })) {
        "oversized"
    } else if pending > 0 {
        "partial"
    } else {
        "whole"
    }
}
