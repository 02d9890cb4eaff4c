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
mod tests;
