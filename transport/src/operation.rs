//! The end of every API operation, in one place: its log line (structured: the fields travel as
//! `log` key-values, so the daemon prints them as `key=value` text or as JSON fields), its
//! metrics (count and latency by result code), and its error mapped to a ttrpc status.
//!
//! The server holds the lines back while a request runs ([`hold_lines`]) and logs them once its
//! reply is written: formatting a line and writing it to stderr is not the caller's wait.

use std::cell::RefCell;
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
        let line = Line {
            level,
            op,
            sandbox: sandbox_id.to_owned(),
            ms: (elapsed.as_secs_f64() * 1e4).round() / 10.0,
            extra: extra.to_vec(),
            code,
            error: result.as_ref().err().map(Error::chain),
        };
        HELD.with_borrow_mut(|held| match held {
            Some(lines) => lines.push(line),
            None => line.log(),
        });
    }
    result.map_err(|err| errors::to_status(&err))
}

/// One operation's log line, its fields owned, so it can wait for the reply.
struct Line {
    level: log::Level,
    op: &'static str,
    sandbox: String,
    ms: f64,
    extra: Vec<Field>,
    code: &'static str,
    error: Option<String>,
}

impl Line {
    fn log(&self) {
        // op, sandbox, duration_ms, the extras, result, error: one allocation.
        let mut fields: Vec<(&str, Value<'_>)> = Vec::with_capacity(5 + self.extra.len());
        fields.push(("op", Value::from(self.op)));
        if !self.sandbox.is_empty() {
            fields.push(("sandbox", Value::from(self.sandbox.as_str())));
        }
        fields.push(("duration_ms", Value::from(self.ms)));
        fields.extend(
            self.extra
                .iter()
                .map(|(k, v)| (*k, Value::from(v.as_str()))),
        );
        fields.push(("result", Value::from(self.code)));
        if let Some(error) = &self.error {
            fields.push(("error", Value::from(error.as_str())));
        }
        log::logger().log(
            &log::Record::builder()
                .level(self.level)
                .target(module_path!())
                .module_path_static(Some(module_path!()))
                .file_static(Some(file!()))
                .line(Some(line!()))
                .key_values(&fields)
                .args(format_args!(""))
                .build(),
        );
    }
}

thread_local! {
    /// The lines this thread's operations finished while [`hold_lines`] holds them.
    static HELD: RefCell<Option<Vec<Line>>> = const { RefCell::new(None) };
}

/// Holds back the lines of the operations this thread finishes until the guard is dropped (the
/// server: once the request's reply is written), then logs them in order. A guard taken while
/// another holds leaves the lines to the outer one.
pub(crate) fn hold_lines() -> HeldLines {
    let outer = HELD.with_borrow_mut(|held| {
        if held.is_some() {
            return false;
        }
        *held = Some(Vec::new());
        true
    });
    HeldLines { outer }
}

/// See [`hold_lines`]; logs what it held when dropped, a panic's unwinding included.
pub(crate) struct HeldLines {
    outer: bool,
}

impl Drop for HeldLines {
    fn drop(&mut self) {
        if !self.outer {
            return;
        }
        for line in HELD.with_borrow_mut(Option::take).unwrap_or_default() {
            line.log();
        }
    }
}

#[cfg(test)]
mod tests;
