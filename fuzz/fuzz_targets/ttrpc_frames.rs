//! Bytes from a connection → ttrpc frames, as knid's server reads them: never a panic, the same
//! frames however the bytes are split across reads, lengths honoured, the cap enforced, and at
//! most one unfinished frame held (an oversized one's payload is skipped, never buffered).
#![no_main]

use libfuzzer_sys::fuzz_target;
use testkit::ttrpc_frames;

fuzz_target!(|data: &[u8]| {
    ttrpc_frames::check(data);
});
