//! The gRPC deadline on the wire: `grpc-timeout`, at most eight digits and a unit (`H`, `M`, `S`,
//! `m`, `u`, `n`), as the gRPC HTTP/2 protocol spec defines it.

use std::time::Duration;

use tonic::codegen::http::HeaderMap;

/// The caller's timeout, when it sent a well-formed one.
pub fn grpc_timeout(headers: &HeaderMap) -> Option<Duration> {
    parse(headers.get("grpc-timeout")?.to_str().ok()?)
}

fn parse(value: &str) -> Option<Duration> {
    let (digits, unit) = value.split_at(value.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unit_of_grpc_timeout_is_read() {
        assert_eq!(parse("2H"), Some(Duration::from_secs(7200)));
        assert_eq!(parse("3M"), Some(Duration::from_secs(180)));
        assert_eq!(parse("5S"), Some(Duration::from_secs(5)));
        assert_eq!(parse("250m"), Some(Duration::from_millis(250)));
        assert_eq!(parse("99999999u"), Some(Duration::from_micros(99_999_999)));
        assert_eq!(parse("7n"), Some(Duration::from_nanos(7)));
    }

    #[test]
    fn a_malformed_grpc_timeout_is_no_deadline() {
        for bad in ["", "S", "123456789S", "5s", "-5S", "5 S", "5"] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }
}
