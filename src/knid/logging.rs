//! knid's log lines on stderr: text for people, JSON lines for collectors (`kubectl logs`, Loki,
//! journald exporters). Both carry a UTC timestamp with milliseconds, the level, the module and
//! the message, followed by the record's key-values (an operation's `op`, `sandbox`,
//! `duration_ms`, `result`, `error`).

use std::cell::RefCell;
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
        let ts = buf.timestamp_millis();
        match format {
            LogFormat::Text => with_line(|line| {
                text_line(line, &ts, record);
                line.push('\n');
                buf.write_all(line.as_bytes())
            }),
            LogFormat::Json => writeln!(buf, "{}", json_line(&ts.to_string(), record)),
        }
    });
    logger.init();
}

/// The longest line a thread keeps its buffer for: a longer one (an error's whole chain, say)
/// gives its memory back once written.
const LINE_KEPT: usize = 1024;

thread_local! {
    /// The thread's text line being built: written once per line to the logger's buffer, and
    /// reused, so a line costs no allocation of its own (knid logs one per operation at
    /// `info`).
    static LINE: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Runs `f` on the thread's empty line buffer (a fresh one if a log call is already building
/// a line on this thread: a value whose formatting logs).
fn with_line<R>(f: impl FnOnce(&mut String) -> R) -> R {
    LINE.with(|cell| match cell.try_borrow_mut() {
        Ok(mut line) => {
            line.clear();
            let result = f(&mut line);
            if line.capacity() > LINE_KEPT {
                *line = String::new();
            }
            result
        }
        Err(_) => f(&mut String::new()),
    })
}

/// Appends a text line to `line`. A string value is quoted (and escaped) unless it is a plain
/// token, so no value, a caller's sandbox id included, can break a line or forge a field.
fn text_line(line: &mut String, ts: &dyn std::fmt::Display, record: &Record<'_>) {
    let _ = write!(line, "[{ts} {:<5} {}]", record.level(), record.target());
    match record.args().as_str() {
        Some("") => {}
        Some(message) => {
            line.push(' ');
            line.push_str(message);
        }
        None => {
            let start = line.len();
            let _ = write!(line, " {}", record.args());
            if line.len() == start + 1 {
                line.truncate(start);
            }
        }
    }
    let _ = record.key_values().visit(&mut TextPairs(line));
}

/// Appends each key-value as ` key=value` to a text line.
struct TextPairs<'a>(&'a mut String);

impl<'kvs> VisitSource<'kvs> for TextPairs<'_> {
    fn visit_pair(&mut self, key: Key<'kvs>, value: Value<'kvs>) -> Result<(), kv::Error> {
        let line = &mut *self.0;
        let _ = write!(line, " {}=", key.as_str());
        if let Some(json) = field(&value) {
            let _ = write!(line, "{json}");
            return Ok(());
        }
        let start = line.len();
        let _ = write!(line, "{value}");
        if !is_token(&line[start..]) {
            let text = line.split_off(start);
            let _ = write!(line, "{text:?}");
        }
        Ok(())
    }
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

/// A key-value's value in a JSON line: text, or a number or boolean.
enum Field {
    Text(String),
    Json(serde_json::Value),
}

/// The key-values of a record, in order, for a JSON line.
#[derive(Default)]
struct Pairs(Vec<(String, Field)>);

impl<'kvs> VisitSource<'kvs> for Pairs {
    fn visit_pair(&mut self, key: Key<'kvs>, value: Value<'kvs>) -> Result<(), kv::Error> {
        let field = match field(&value) {
            Some(json) => Field::Json(json),
            None => Field::Text(value.to_string()),
        };
        self.0.push((key.as_str().to_owned(), field));
        Ok(())
    }
}

/// A number or boolean value as JSON (unquoted in both formats); `None` for text.
fn field(value: &Value<'_>) -> Option<serde_json::Value> {
    if let Some(b) = value.to_bool() {
        Some(b.into())
    } else if let Some(n) = value.to_u64() {
        Some(n.into())
    } else if let Some(n) = value.to_i64() {
        Some(n.into())
    } else {
        value
            .to_f64()
            .and_then(serde_json::Number::from_f64)
            .map(serde_json::Value::Number)
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
