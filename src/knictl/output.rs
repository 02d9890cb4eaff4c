//! The three output formats every verb honours: aligned tables, wide tables (more columns), and
//! JSON (the protobuf JSON mapping with proto field names, so scripts see the API's names).

use clap::ValueEnum;
use protobuf::MessageDyn;

/// `-o/--output`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned columns for people.
    Table,
    /// The table with more columns (paths, generations, times, capacity per family).
    Wide,
    /// One JSON document for scripts.
    Json,
}

impl Format {
    /// Whether the output is JSON.
    pub fn is_json(self) -> bool {
        self == Self::Json
    }

    /// Whether a table gets its wide columns.
    pub fn is_wide(self) -> bool {
        self == Self::Wide
    }
}

/// What a verb prints with `-o json`.
pub enum Json<'a> {
    /// knid's answer as it is: the protobuf JSON mapping of the message.
    Message(&'a dyn MessageDyn),
    /// A document the verb composes, built only when JSON is asked for.
    Value(Box<dyn FnOnce() -> serde_json::Value + 'a>),
    /// Nothing to say (a verb that returns nothing): `{}`.
    Empty,
}

impl<'a> Json<'a> {
    /// A composed document, built by `build` only for `-o json`.
    pub fn value(build: impl FnOnce() -> serde_json::Value + 'a) -> Self {
        Self::Value(Box::new(build))
    }
}

/// The one place a verb's output format is decided: with `-o json` its [`Json`] document on
/// stdout, one line; with table or wide, whatever `text` prints for people.
pub fn print(format: Format, json: Json<'_>, text: impl FnOnce()) {
    if !format.is_json() {
        text();
        return;
    }
    match json {
        Json::Message(msg) => {
            if let Some(text) = json_text(msg) {
                println!("{text}");
            }
        }
        Json::Value(build) => println!("{}", build()),
        Json::Empty => println!("{{}}"),
    }
}

/// The protobuf JSON mapping of a message: proto field names, defaults included (a script may
/// rely on every field being there).
fn json_text(msg: &dyn MessageDyn) -> Option<String> {
    let options = protobuf_json_mapping::PrintOptions {
        proto_field_name: true,
        always_output_default_values: true,
        ..Default::default()
    };
    match protobuf_json_mapping::print_to_string_with_options(msg, &options) {
        Ok(text) => Some(text),
        Err(e) => {
            eprintln!("knictl: cannot print JSON: {e}");
            None
        }
    }
}

/// A message as a JSON value, to compose with other fields.
pub fn json_of(msg: &dyn MessageDyn) -> serde_json::Value {
    json_text(msg)
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or(serde_json::Value::Null)
}

/// Rows printed as left-aligned columns separated by two spaces.
pub struct Table {
    header: Vec<&'static str>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column titles.
    pub fn new(header: &[&'static str]) -> Table {
        Table {
            header: header.to_vec(),
            rows: Vec::new(),
        }
    }

    /// Appends a row (as many cells as titles).
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table as text, each line ending in a newline, trailing spaces trimmed.
    pub fn render(&self) -> String {
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.len()).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |cells: &mut dyn Iterator<Item = &str>| {
            let text: Vec<String> = cells
                .zip(&widths)
                .map(|(c, w)| format!("{c:<w$}"))
                .collect();
            format!("{}\n", text.join("  ").trim_end())
        };
        let mut out = line(&mut self.header.iter().copied());
        for row in &self.rows {
            out.push_str(&line(&mut row.iter().map(String::as_str)));
        }
        out
    }

    /// Prints the table on stdout.
    pub fn print(&self) {
        print!("{}", self.render());
    }
}

/// `-` for an empty cell, so columns stay readable.
pub fn dash(text: &str) -> String {
    if text.is_empty() {
        "-".to_owned()
    } else {
        text.to_owned()
    }
}

/// Milliseconds since the Unix epoch as UTC `YYYY-MM-DDTHH:MM:SSZ`; `-` for 0 (never).
pub fn time(ms: i64) -> String {
    if ms <= 0 {
        return "-".to_owned();
    }
    jiff::Timestamp::from_millisecond(ms).map_or_else(
        |_| "-".to_owned(),
        |t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
    )
}

/// `used` as a percentage of `total`, one decimal; 0 for an empty pool.
pub fn percent(used: u64, total: u64) -> f64 {
    if total == 0 {
        return 0.0;
    }
    // u64 → f64 loses precision only past 2^53 addresses, where a tenth of a percent is moot.
    (used as f64 * 1000.0 / total as f64).floor() / 10.0
}

#[cfg(test)]
mod tests;
