//! Replays the seed corpora of the core's fuzz targets (fuzz/corpus/) on stable, through the
//! same functions the targets call, so CI exercises every seed. A seed named `valid_*` must be
//! accepted, one named `invalid_*` refused the way bad input is refused (InvalidArgument for
//! the configuration, the CNI codes for bad input, a corrupt-record error for the store).

use knid_core::cni::error::{DECODE, INCOMPATIBLE_VERSION, INVALID_CONFIG};
use knid_core::cni::ConfList;
use knid_core::{fuzz, Config, Error, ErrorKind};
use testkit::fuzz_corpus::replay;

#[test]
fn config_toml_seeds_keep_their_verdicts() {
    replay(
        "config_toml",
        |bytes| Config::from_toml(std::str::from_utf8(bytes).expect("seeds are UTF-8")),
        |e| e.kind() == ErrorKind::InvalidArgument,
    );
}

#[test]
fn cni_conflist_seeds_keep_their_verdicts() {
    replay("cni_conflist", ConfList::parse, |e| {
        [INCOMPATIBLE_VERSION, DECODE, INVALID_CONFIG].contains(&e.code)
    });
}

#[test]
fn cni_result_seeds_keep_their_verdicts() {
    replay("cni_result", fuzz::cni_result, |e| e.code == DECODE);
}

#[test]
fn store_record_seeds_keep_their_verdicts() {
    replay("store_record", fuzz::stored_record, |e| {
        matches!(
            e,
            Error::Corrupt { .. }
                | Error::Store(
                    knid_store::Error::Decode { .. } | knid_store::Error::Corrupt { .. }
                )
        )
    });
}
