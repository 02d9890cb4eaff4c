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

/// Prints a message as JSON on stdout, one line.
pub fn print_json(msg: &dyn MessageDyn) {
    if let Some(text) = json_text(msg) {
        println!("{text}");
    }
}

/// The metric families of a Prometheus exposition whose names start with `prefix` (every one
/// when `None`): their HELP, TYPE and sample lines, in order.
pub fn metric_families(text: &str, prefix: Option<&str>) -> String {
    let Some(prefix) = prefix else {
        return text.to_owned();
    };
    text.lines()
        .filter(|line| {
            let name = match line.strip_prefix("# ") {
                // `# HELP <name> ...` and `# TYPE <name> ...`
                Some(comment) => comment.split_whitespace().nth(1).unwrap_or_default(),
                None => line.split(['{', ' ']).next().unwrap_or_default(),
            };
            name.starts_with(prefix)
        })
        .flat_map(|line| [line, "\n"])
        .collect()
}

/// Prints a composed JSON value on stdout, one line.
pub fn print_value(value: &serde_json::Value) {
    println!("{value}");
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
mod tests {
    use super::*;

    #[test]
    fn metric_families_keep_whole_families_by_prefix() {
        let text =
            "# HELP knid_sandboxes Sandboxes.\n# TYPE knid_sandboxes gauge\nknid_sandboxes 3\n\
                    # HELP knid_ipam_used_addresses Used.\n# TYPE knid_ipam_used_addresses gauge\n\
                    knid_ipam_used_addresses{family=\"ipv4\",network=\"default\"} 2\n";
        assert_eq!(metric_families(text, None), text);
        assert_eq!(
            metric_families(text, Some("knid_ipam")),
            "# HELP knid_ipam_used_addresses Used.\n# TYPE knid_ipam_used_addresses gauge\n\
             knid_ipam_used_addresses{family=\"ipv4\",network=\"default\"} 2\n"
        );
        assert_eq!(metric_families(text, Some("nothing")), "");
    }

    #[test]
    fn table_aligns_columns_and_trims_the_last() {
        let mut t = Table::new(&["ID", "STATE"]);
        t.row(vec!["pod-long-name".to_owned(), "attached".to_owned()]);
        t.row(vec!["p".to_owned(), String::new()]);
        assert_eq!(
            t.render(),
            "ID             STATE\npod-long-name  attached\np\n"
        );
    }

    #[test]
    fn time_prints_utc_and_never_as_a_dash() {
        assert_eq!(time(0), "-");
        assert_eq!(time(1_700_000_000_123), "2023-11-14T22:13:20Z");
        assert_eq!(time(951_782_400_000), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn percent_rounds_down_to_a_tenth() {
        assert_eq!(percent(28, 29), 96.5);
        assert_eq!(percent(0, 0), 0.0);
        assert_eq!(percent(29, 29), 100.0);
    }
}
