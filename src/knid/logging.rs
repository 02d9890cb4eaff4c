//! knid's log lines on stderr: text for people, JSON lines for collectors (`kubectl logs`, Loki,
//! journald exporters). Both carry a UTC timestamp with milliseconds, the level, the module and
//! the message, followed by the record's key-values (an operation's `op`, `sandbox`,
//! `duration_ms`, `result`, `error`).

use std::fmt::Write as _;
use std::io::Write as _;

use log::kv::{self, Key, Value, VisitSource};
use log::{LevelFilter, Record};

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// `[<time> <LEVEL> <module>] <message> key=value ...`
    Text,
    /// One JSON object per line: `ts`, `level`, `target`, `msg` (when not empty), then the
    /// key-values as fields.
    Json,
}

/// knid's own crates, logged at the requested level; dependencies (sled, ttrpc, tiny_http) stay
/// at warn, as their debug output drowns knid's own.
const OWN_MODULES: [&str; 5] = [
    "knid",
    "knid_core",
    "knid_netops",
    "knid_store",
    "knid_transport",
];

/// Installs the logger.
pub fn init(level: LevelFilter, format: LogFormat) {
    let mut logger = env_logger::Builder::new();
    logger.filter_level(level.min(LevelFilter::Warn));
    for module in OWN_MODULES {
        logger.filter_module(module, level);
    }
    logger.format(move |buf, record| {
        let ts = buf.timestamp_millis().to_string();
        let line = match format {
            LogFormat::Text => text_line(&ts, record),
            LogFormat::Json => json_line(&ts, record),
        };
        writeln!(buf, "{line}")
    });
    logger.init();
}

/// A text line. A string value is quoted (and escaped) unless it is a plain token, so no value,
/// a caller's sandbox id included, can break a line or forge a field.
fn text_line(ts: &str, record: &Record<'_>) -> String {
    let mut line = format!("[{ts} {:<5} {}]", record.level(), record.target());
    let message = record.args().to_string();
    if !message.is_empty() {
        line.push(' ');
        line.push_str(&message);
    }
    let mut pairs = Pairs::default();
    let _ = record.key_values().visit(&mut pairs);
    for (key, value) in pairs.0 {
        let _ = match value {
            Field::Text(s) if is_token(&s) => write!(line, " {key}={s}"),
            Field::Text(s) => write!(line, " {key}={s:?}"),
            Field::Json(v) => write!(line, " {key}={v}"),
        };
    }
    line
}

/// A JSON line.
fn json_line(ts: &str, record: &Record<'_>) -> String {
    let mut object = serde_json::Map::new();
    object.insert("ts".into(), ts.into());
    object.insert("level".into(), record.level().as_str().into());
    object.insert("target".into(), record.target().into());
    let message = record.args().to_string();
    if !message.is_empty() {
        object.insert("msg".into(), message.into());
    }
    let mut pairs = Pairs::default();
    let _ = record.key_values().visit(&mut pairs);
    for (key, value) in pairs.0 {
        let value = match value {
            Field::Text(s) => serde_json::Value::String(s),
            Field::Json(v) => v,
        };
        object.insert(key, value);
    }
    serde_json::Value::Object(object).to_string()
}

/// A key-value's value: text, or a number or boolean (unquoted in both formats).
enum Field {
    Text(String),
    Json(serde_json::Value),
}

/// The key-values of a record, in order.
#[derive(Default)]
struct Pairs(Vec<(String, Field)>);

impl<'kvs> VisitSource<'kvs> for Pairs {
    fn visit_pair(&mut self, key: Key<'kvs>, value: Value<'kvs>) -> Result<(), kv::Error> {
        let field = if let Some(b) = value.to_bool() {
            Field::Json(b.into())
        } else if let Some(n) = value.to_u64() {
            Field::Json(n.into())
        } else if let Some(n) = value.to_i64() {
            Field::Json(n.into())
        } else if let Some(n) = value.to_f64().and_then(serde_json::Number::from_f64) {
            Field::Json(serde_json::Value::Number(n))
        } else {
            Field::Text(value.to_string())
        };
        self.0.push((key.as_str().to_owned(), field));
        Ok(())
    }
}

/// Whether `s` reads unambiguously unquoted: not empty, only letters, digits and `_.:/-`.
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '/' | '-'))
}

#[cfg(test)]
mod tests;
