//! The end of every API operation, in one place: its log line (structured: the fields travel as
//! `log` key-values, so the daemon prints them as `key=value` text or as JSON fields), its
//! metrics (count and latency by result code), and its error mapped to a ttrpc status.

use std::time::Instant;

use knid_core::metrics::Metrics;
use knid_core::Error;
use log::kv::Value;

use crate::errors;

/// A key-value added to an operation's line by the service (never caller text, which goes only
/// in `sandbox`).
pub(crate) type Field = (&'static str, String);

/// Logs the operation's one line, counts it, and maps its error to a ttrpc status.
pub(crate) fn finish<T>(
    metrics: &Metrics,
    op: &'static str,
    sandbox_id: &str,
    started: Instant,
    result: Result<T, Error>,
) -> ttrpc::Result<T> {
    finish_with(metrics, op, sandbox_id, &[], started, result)
}

/// [`finish`] with `extra` fields logged before the result.
pub(crate) fn finish_with<T>(
    metrics: &Metrics,
    op: &'static str,
    sandbox_id: &str,
    extra: &[Field],
    started: Instant,
    result: Result<T, Error>,
) -> ttrpc::Result<T> {
    let elapsed = started.elapsed();
    let code = match &result {
        Ok(_) => ttrpc::Code::OK,
        Err(err) => errors::code(err.kind()),
    };
    let code = errors::code_name(code);
    metrics.observe_operation(op, code, elapsed);
    // A scrape every few seconds is not an operation on the node's pods.
    let level = if op == "metrics" {
        log::Level::Debug
    } else {
        log::Level::Info
    };
    if log::log_enabled!(level) {
        let error = result.as_ref().err().map(Error::chain);
        let ms = (elapsed.as_secs_f64() * 1e4).round() / 10.0;
        let mut fields: Vec<(&str, Value<'_>)> = vec![("op", Value::from(op))];
        if !sandbox_id.is_empty() {
            fields.push(("sandbox", Value::from(sandbox_id)));
        }
        fields.push(("duration_ms", Value::from(ms)));
        fields.extend(extra.iter().map(|(k, v)| (*k, Value::from(v.as_str()))));
        fields.push(("result", Value::from(code)));
        if let Some(error) = &error {
            fields.push(("error", Value::from(error.as_str())));
        }
        log::logger().log(
            &log::Record::builder()
                .level(level)
                .target(module_path!())
                .module_path_static(Some(module_path!()))
                .file_static(Some(file!()))
                .line(Some(line!()))
                .key_values(&fields)
                .args(format_args!(""))
                .build(),
        );
    }
    result.map_err(|err| errors::to_status(&err))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_leave_as_statuses_with_their_code_and_are_counted() {
        let metrics = Metrics::new();
        let result: Result<(), Error> = Err(Error::NotFound("pod-9".into()));
        match finish(&metrics, "inspect", "pod-9", Instant::now(), result) {
            Err(ttrpc::Error::RpcStatus(status)) => {
                assert_eq!(status.code(), ttrpc::Code::NOT_FOUND);
                assert_eq!(status.message, "sandbox pod-9 not found");
            }
            other => panic!("not a status: {other:?}"),
        }
        let ok: Result<u8, Error> = Ok(7);
        assert_eq!(
            finish(&metrics, "inspect", "pod-9", Instant::now(), ok).ok(),
            Some(7)
        );
        let text = metrics.render(&knid_core::metrics::Snapshot {
            ipam: Vec::new(),
            sandboxes: 0,
            reaper_queue: 0,
            store_bytes: None,
        });
        for want in [
            "knid_operations_total{code=\"NotFound\",op=\"inspect\"} 1",
            "knid_operations_total{code=\"OK\",op=\"inspect\"} 1",
            "knid_operation_duration_seconds_count{code=\"OK\",op=\"inspect\"} 1",
        ] {
            assert!(text.contains(want), "missing {want}:\n{text}");
        }
    }
}
