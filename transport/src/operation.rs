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
mod tests;
