//! The documentation under docs/ kept honest by the code: the API reference is generated from the
//! .proto files, the configuration reference is checked against the keys the config parser
//! accepts and the flags `knid --help` lists, the lifecycle diagram against the state machine in
//! core/src/lifecycle/mod.rs, the readiness conditions against the code that sets them, the
//! README's documentation index against docs/, and every reference against the repository: no
//! section or path of the design notes (which live outside it) is cited, every page and
//! heading of docs/ and README.md that a file names exists, and so does every path the docs
//! name. No root needed.
//!
//! `KNID_UPDATE_DOCS=1 cargo test --test docs` rewrites docs/api.md from the .proto files.

// `mod x;` in a crate root looks for tests/x.rs, which cargo would build as a test of its own;
// inside `mod docs`, it looks in tests/docs/.
mod docs {
    pub mod proto;
}

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use docs::proto;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    let path = root().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// Code spans of `text`, in order.
fn code_spans(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// A markdown document as (heading, body) sections; the text before the first heading has an
/// empty heading.
fn sections(doc: &str) -> Vec<(String, String)> {
    let mut out = vec![(String::new(), String::new())];
    let mut in_fence = false;
    for line in doc.lines() {
        if line.starts_with("```") {
            in_fence = !in_fence;
        }
        if !in_fence && line.starts_with('#') {
            out.push((line.to_owned(), String::new()));
        } else if let Some((_, body)) = out.last_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    out
}

/// Cells of the table rows of `body` (header and separator rows left out).
fn table_rows(body: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut header_seen = false;
    for line in body.lines() {
        let line = line.trim();
        if !line.starts_with('|') {
            header_seen = false;
            continue;
        }
        if line.starts_with("|---") || line.starts_with("| ---") {
            header_seen = true;
            continue;
        }
        if !header_seen {
            continue;
        }
        let inner = line.trim_start_matches('|').trim_end_matches('|');
        let mut cells = Vec::new();
        let mut cur = String::new();
        let mut prev = ' ';
        for c in inner.chars() {
            if c == '|' && prev != '\\' {
                cells.push(cur.trim().to_owned());
                cur.clear();
            } else {
                cur.push(c);
            }
            prev = c;
        }
        cells.push(cur.trim().to_owned());
        rows.push(cells);
    }
    rows
}

/// Whether `word` occurs in `text` as a whole identifier.
fn has_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + word.len()..].chars().next();
        let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        !ident(before) && !ident(after)
    })
}

/// The body of the first `{ ... }` block after `marker` in `text`.
fn block_after<'a>(text: &'a str, marker: &str) -> &'a str {
    let start = text
        .find(marker)
        .unwrap_or_else(|| panic!("{marker:?} not found"));
    let open = start + text[start..].find('{').expect("opening brace");
    let mut depth = 0;
    for (i, c) in text[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return &text[open + 1..open + i];
                }
            }
            _ => {}
        }
    }
    panic!("{marker:?}: block not closed")
}

/// The source of a Rust file without its `#[cfg(test)]` module(s).
fn without_tests(src: &str) -> &str {
    src.match_indices("#[cfg(test)]")
        .find(|(i, m)| src[i + m.len()..].trim_start().starts_with("mod tests {"))
        .map_or(src, |(i, _)| &src[..i])
}

// ---------------------------------------------------------------------------------------------
// docs/api.md: generated from the .proto files.

const API_DOC: &str = "docs/api.md";
const API_HEAD: &str = "docs/api.head.md";
const PROTO_DIR: &str = "transport/proto";

fn generated_api_doc() -> String {
    let files = proto::read_all(&root(), PROTO_DIR).unwrap_or_else(|e| panic!("{e}"));
    let sources = files
        .iter()
        .map(|f| f.path.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    proto::render(&files, &read(API_HEAD), &sources)
}

#[test]
fn api_reference_is_the_one_generated_from_the_protos() {
    let wanted = generated_api_doc();
    let path = root().join(API_DOC);
    if std::env::var_os("KNID_UPDATE_DOCS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &wanted).expect("write docs/api.md");
        return;
    }
    let found = std::fs::read_to_string(&path).unwrap_or_default();
    if found == wanted {
        return;
    }
    let (line, ours, theirs) = wanted
        .lines()
        .map(Some)
        .chain(std::iter::repeat(None))
        .zip(found.lines().map(Some).chain(std::iter::repeat(None)))
        .enumerate()
        .find(|(_, (w, f))| w != f)
        .map(|(i, (w, f))| (i + 1, w.unwrap_or("<end>"), f.unwrap_or("<end>")))
        .unwrap_or((0, "", ""));
    panic!(
        "{API_DOC} is not what {PROTO_DIR}/**/*.proto and {API_HEAD} generate; first difference \
         at line {line}:\n  generated: {ours}\n  committed: {theirs}\nRegenerate it with \
         `KNID_UPDATE_DOCS=1 cargo test --test docs` and commit the result."
    );
}

#[test]
fn proto_reader_sees_every_rpc_field_and_value_of_the_files() {
    let files = proto::read_all(&root(), PROTO_DIR).unwrap_or_else(|e| panic!("{e}"));
    assert!(files.len() >= 3, "found {} .proto files", files.len());
    for f in &files {
        let text = read(&f.path);
        let code: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.starts_with("//"))
            .collect();
        let rpcs = code.iter().filter(|l| l.starts_with("rpc ")).count();
        let numbered = code
            .iter()
            .filter(|l| l.ends_with(';') && l.contains(" = ") && !l.starts_with("syntax"))
            .count();
        let parsed_rpcs: usize = f.services.iter().map(|s| s.rpcs.len()).sum();
        let parsed_numbered: usize = f.messages.iter().map(|m| m.fields.len()).sum::<usize>()
            + f.enums.iter().map(|e| e.values.len()).sum::<usize>();
        assert_eq!(parsed_rpcs, rpcs, "{}: rpcs", f.path);
        assert_eq!(
            parsed_numbered, numbered,
            "{}: fields and enum values",
            f.path
        );
        assert!(!f.package.is_empty(), "{}: no package", f.path);
        for m in &f.messages {
            let mut numbers: Vec<u32> = m.fields.iter().map(|x| x.number).collect();
            numbers.sort_unstable();
            numbers.dedup();
            assert_eq!(
                numbers.len(),
                m.fields.len(),
                "{}.{}: field numbers",
                f.path,
                m.name
            );
        }
    }
    let doc = read(API_DOC);
    for f in &files {
        for s in &f.services {
            for r in &s.rpcs {
                let path = format!("`/{}.{}/{}`", f.package, s.name, r.name);
                assert!(doc.contains(&path), "{API_DOC} lacks {path}");
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// docs/architecture.md: the lifecycle diagram, from the state machine in
// core/src/lifecycle/mod.rs.

const ARCH_DOC: &str = "docs/architecture.md";

/// The variants of `enum AttachmentState` in core/src/lifecycle/mod.rs, with their API spelling.
fn attachment_states() -> Vec<(String, String)> {
    let model = read("core/src/lifecycle/mod.rs");
    let body = block_after(&model, "pub enum AttachmentState");
    let variants: Vec<String> = body
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("//") && !l.starts_with('#'))
        .map(|l| l.trim_end_matches(',').to_owned())
        .collect();
    assert!(
        variants
            .iter()
            .all(|v| v.chars().all(|c| c.is_ascii_alphanumeric())),
        "unexpected enum body: {variants:?}"
    );
    let as_str = block_after(&model, "impl AttachmentState");
    variants
        .into_iter()
        .map(|v| {
            let arm = format!("Self::{v} => \"");
            let at = as_str
                .find(&arm)
                .unwrap_or_else(|| panic!("no as_str arm for {v}"))
                + arm.len();
            let spelled = as_str[at..]
                .split('"')
                .next()
                .unwrap_or_default()
                .to_owned();
            (v, spelled)
        })
        .collect()
}

/// The arms of a `match` in `body`: (left side, right side), one per line `a => b,`.
fn arms(body: &str) -> Vec<(String, String)> {
    body.lines()
        .map(str::trim)
        .filter_map(|l| l.split_once("=>"))
        .map(|(l, r)| {
            (
                l.trim().to_owned(),
                r.trim().trim_end_matches(',').to_owned(),
            )
        })
        .filter(|(l, _)| l != "_")
        .collect()
}

/// Every edge of `lifecycle::next`: (from, to, event); `to` is `[*]` where the record goes.
fn lifecycle_edges() -> BTreeSet<(String, String, String)> {
    let src = read("core/src/lifecycle/mod.rs");
    let body = block_after(&src, "pub(crate) fn next(");
    let mut edges = BTreeSet::new();
    for (left, right) in arms(body) {
        let Some(inner) = left.strip_prefix('(').and_then(|l| l.strip_suffix(')')) else {
            continue;
        };
        let (froms, event) = inner.rsplit_once(',').expect("(state, event)");
        let to = match right.as_str() {
            "Next::Gone" => "[*]".to_owned(),
            r => r
                .strip_prefix("Next::State(")
                .and_then(|r| r.strip_suffix(')'))
                .unwrap_or_else(|| panic!("unexpected arm {right:?}"))
                .to_owned(),
        };
        for from in froms.split('|') {
            edges.insert((from.trim().to_owned(), to.clone(), event.trim().to_owned()));
        }
    }
    let initial = src
        .split("const INITIAL: AttachmentState = ")
        .nth(1)
        .and_then(|r| r.split(';').next())
        .expect("INITIAL")
        .trim()
        .to_owned();
    edges.insert(("[*]".to_owned(), initial, String::new()));
    assert!(edges.len() > 5, "read too few edges: {edges:?}");
    edges
}

/// The body of the first fenced block of `lang` in `doc`.
fn fenced<'a>(doc: &'a str, lang: &str) -> &'a str {
    let open = format!("```{lang}\n");
    let start = doc
        .find(&open)
        .unwrap_or_else(|| panic!("no ```{lang} block"))
        + open.len();
    let end = start + doc[start..].find("```").expect("fence closed");
    &doc[start..end]
}

#[test]
fn lifecycle_diagram_has_every_attachment_state() {
    let doc = read(ARCH_DOC);
    let mermaid = fenced(&doc, "mermaid");
    assert!(
        mermaid.trim_start().starts_with("stateDiagram-v2"),
        "not a state diagram"
    );
    let text = fenced(&doc, "text");
    let states = attachment_states();
    assert!(states.len() >= 6, "read {states:?}");
    for (variant, spelled) in &states {
        assert!(
            has_word(mermaid, variant),
            "the Mermaid diagram lacks {variant}"
        );
        assert!(has_word(text, variant), "the text diagram lacks {variant}");
        assert!(
            doc.contains(&format!("`{spelled}`")),
            "{ARCH_DOC} never gives {variant}'s API spelling `{spelled}`"
        );
    }
}

#[test]
fn lifecycle_diagram_has_exactly_the_transitions_of_the_code() {
    let doc = read(ARCH_DOC);
    let mermaid = fenced(&doc, "mermaid");
    let mut drawn = BTreeSet::new();
    for line in mermaid.lines().filter(|l| l.contains("-->")) {
        let (edge, label) = line.split_once(':').unwrap_or((line, ""));
        let (from, to) = edge.split_once("-->").expect("edge");
        let event = label.split_whitespace().next().unwrap_or_default();
        let (from, to) = (from.trim().to_owned(), to.trim().to_owned());
        let event = if from == "[*]" {
            String::new()
        } else {
            event.to_owned()
        };
        drawn.insert((from, to, event));
    }
    let code = lifecycle_edges();
    let missing: Vec<_> = code.difference(&drawn).collect();
    let extra: Vec<_> = drawn.difference(&code).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "the diagram differs from lifecycle::next (edges as (from, to, event), the label's \
         first word naming the event):\n  missing: {missing:?}\n  not in the code: {extra:?}"
    );
}

#[test]
fn every_state_says_what_a_crash_in_it_leads_to() {
    let src = read("core/src/lifecycle/mod.rs");
    let body = block_after(&src, "pub(crate) fn recovery(");
    // What each recovery action is called in the doc's state table.
    let phrase = |action: &str| match action {
        "Recovery::RollBack" => "rolled back",
        "Recovery::FinishDetach" => "finished",
        "Recovery::Verify" => "verified",
        other => panic!("{other} is new: say in {ARCH_DOC} what it does, and here its phrase"),
    };
    let mut wanted = BTreeMap::new();
    for (left, right) in arms(body) {
        for state in left.split('|') {
            wanted.insert(state.trim().to_owned(), phrase(&right));
        }
    }
    let states = attachment_states();
    assert_eq!(wanted.len(), states.len(), "recovery arms: {wanted:?}");
    let doc = read(ARCH_DOC);
    let rows: Vec<Vec<String>> = sections(&doc)
        .iter()
        .flat_map(|(_, body)| table_rows(body))
        .collect();
    for (state, phrase) in wanted {
        let row = rows
            .iter()
            .find(|r| {
                r.first()
                    .is_some_and(|c| code_spans(c).first() == Some(&state.as_str()))
            })
            .unwrap_or_else(|| panic!("{ARCH_DOC}: no state table row for `{state}`"));
        let last = row.last().map(String::as_str).unwrap_or_default();
        assert!(
            last.contains(phrase),
            "{ARCH_DOC}: the row of {state} must say in its last cell (crash → restart) that \
             it is {phrase:?}: {last:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// docs/configuration.md: every key the parser accepts, and every flag of `knid`.

const CONFIG_DOC: &str = "docs/configuration.md";

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Seg {
    Key(String),
    /// A value of a map of tables (`[networks.<name>]`).
    MapEntry,
    /// An element of an array of tables (`[[key]]`).
    ArrayEntry,
}

/// The TOML table path as the doc's headings show it: `networks.<name>`.
fn table_path(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Seg::MapEntry => out.push_str(".<name>"),
            Seg::ArrayEntry => out.push_str("[]"),
        }
    }
    out
}

/// A configuration whose only non-default part puts `leaf` at `path`.
fn config_with(path: &[Seg], leaf: &str) -> String {
    let mut value = leaf.to_owned();
    for seg in path.iter().skip(1).rev() {
        value = match seg {
            Seg::Key(k) => format!("{{ {k} = {value} }}"),
            Seg::MapEntry => format!("{{ probe-entry = {value} }}"),
            Seg::ArrayEntry => format!("[ {value} ]"),
        };
    }
    match path.first() {
        None => leaf
            .trim_start_matches("{ ")
            .trim_end_matches(" }")
            .to_owned(),
        Some(Seg::Key(k)) => format!("{k} = {value}"),
        Some(_) => unreachable!("paths start with a key"),
    }
}

/// What the parser says to `text`: its error, or None when it accepts it.
fn parser_error(text: &str) -> Option<String> {
    knid_core::Config::from_toml(text)
        .err()
        .map(|e| e.to_string())
}

/// The fields serde lists in "unknown field `__probe`, expected one of `a`, `b`".
fn listed_fields(err: &str) -> Option<Vec<String>> {
    let at = err.find("unknown field `__probe`")?;
    let rest = &err[at..];
    if rest.contains("there are no fields") {
        return Some(Vec::new());
    }
    let expected = &rest[rest.find("expected")?..];
    let line = expected.lines().next().unwrap_or_default();
    Some(code_spans(line).into_iter().map(str::to_owned).collect())
}

/// Every table of the configuration, by path, with its keys: discovered by giving the parser
/// an unknown key `__probe` in each (serde's deny_unknown_fields then lists the known ones),
/// the top level first, then every key's value tried as a table, a map of tables and an array
/// of tables.
fn config_tables() -> BTreeMap<Vec<Seg>, BTreeSet<String>> {
    const PROBE: &str = "{ __probe = 1 }";
    let mut tables = BTreeMap::new();
    let mut todo: Vec<Vec<Seg>> = vec![Vec::new()];
    while let Some(path) = todo.pop() {
        let err = parser_error(&config_with(&path, PROBE))
            .unwrap_or_else(|| panic!("{}: the parser accepted an unknown key", table_path(&path)));
        let keys = listed_fields(&err)
            .unwrap_or_else(|| panic!("{}: not a table: {err}", table_path(&path)));
        for key in &keys {
            let mut child = path.clone();
            child.push(Seg::Key(key.clone()));
            let table = |seg: Option<Seg>| {
                let mut p = child.clone();
                p.extend(seg);
                parser_error(&config_with(&p, PROBE))
                    .and_then(|e| listed_fields(&e))
                    .map(|_| p)
            };
            if let Some(p) = table(None)
                .or_else(|| table(Some(Seg::MapEntry)))
                .or_else(|| table(Some(Seg::ArrayEntry)))
            {
                todo.push(p);
            }
        }
        tables.insert(path, keys.into_iter().collect());
    }
    tables
}

/// The heading that introduces the keys of the table at `path`.
fn is_heading_of(heading: &str, path: &[Seg]) -> bool {
    if path.is_empty() {
        heading.contains("Top-level keys")
    } else {
        heading.contains(&format!("`[{}]`", table_path(path)))
    }
}

/// The key rows of the doc's key sections: heading → rows. A key section's heading is
/// "Top-level keys" or holds a `[table]` path.
fn documented_keys(doc: &str) -> Vec<(String, Vec<Vec<String>>)> {
    sections(doc)
        .into_iter()
        .filter(|(h, _)| {
            h.contains("Top-level keys") || code_spans(h).iter().any(|c| c.starts_with('['))
        })
        .map(|(h, body)| (h, table_rows(&body)))
        .collect()
}

#[test]
fn every_config_key_is_documented_under_its_table() {
    let tables = config_tables();
    assert!(
        tables.len() >= 2,
        "found only {:?}",
        tables.keys().collect::<Vec<_>>()
    );
    assert!(
        tables[&Vec::new()].contains("socket"),
        "probe read no top-level keys"
    );
    let doc = read(CONFIG_DOC);
    let sections = documented_keys(&doc);
    let mut missing = Vec::new();
    for (path, keys) in &tables {
        let Some((_, rows)) = sections.iter().find(|(h, _)| is_heading_of(h, path)) else {
            missing.push(format!("a section for `[{}]`", table_path(path)));
            continue;
        };
        for key in keys {
            let row = rows
                .iter()
                .find(|r| r.first().map(String::as_str) == Some(&format!("`{key}`")));
            match row {
                None => missing.push(format!("`{key}` of `[{}]`", table_path(path))),
                Some(r) if r.len() != 5 || r.iter().any(|c| c.is_empty()) => missing.push(format!(
                    "a full row (key | type | default | reload | meaning) for `{key}`: {r:?}"
                )),
                Some(_) => {}
            }
        }
    }
    assert!(
        missing.is_empty(),
        "{CONFIG_DOC} lacks:\n  {}",
        missing.join("\n  ")
    );
}

#[test]
fn every_documented_config_key_exists() {
    let tables = config_tables();
    let doc = read(CONFIG_DOC);
    let mut stale = Vec::new();
    for (heading, rows) in documented_keys(&doc) {
        let Some(keys) = tables
            .iter()
            .find(|(path, _)| is_heading_of(&heading, path))
            .map(|(_, keys)| keys)
        else {
            stale.push(format!("section {heading:?}: no such table in the code"));
            continue;
        };
        for row in rows {
            let first = row.first().map(String::as_str).unwrap_or_default();
            let key = first.trim_matches('`');
            if !keys.contains(key) {
                stale.push(format!("{first} under {heading:?}"));
            }
        }
    }
    assert!(
        stale.is_empty(),
        "{CONFIG_DOC} documents keys the parser does not know:\n  {}",
        stale.join("\n  ")
    );
}

/// `knid --help`.
fn knid_help() -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_knid"))
        .arg("--help")
        .output()
        .expect("run knid --help");
    assert!(out.status.success(), "knid --help failed");
    String::from_utf8(out.stdout).expect("utf-8")
}

/// Long flags and env vars named in `knid --help`.
fn help_flags_and_env(help: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut flags = BTreeSet::new();
    let mut env = BTreeSet::new();
    // Short help puts `[env: …]` on the flag's line, long help on a line of its own.
    for line in help.lines().map(str::trim_start) {
        if line.starts_with('-') {
            if let Some(flag) = line.split([' ', ',']).find(|w| w.starts_with("--")) {
                flags.insert(flag.to_owned());
            }
        }
        if let Some(at) = line.find("[env: ") {
            let var = line[at + 6..].split('=').next().unwrap_or_default();
            env.insert(var.to_owned());
        }
    }
    (flags, env)
}

/// First cells of the table rows under the headings containing `title`.
fn first_cells(doc: &str, title: &str) -> Vec<String> {
    sections(doc)
        .into_iter()
        .filter(|(h, _)| h.contains(title))
        .flat_map(|(_, body)| table_rows(&body))
        .filter_map(|r| r.into_iter().next())
        .collect()
}

fn documented_flags(doc: &str) -> BTreeSet<String> {
    first_cells(doc, "Command-line flags")
        .iter()
        .filter_map(|c| {
            code_spans(c)
                .first()
                .map(|s| s.split_whitespace().next().unwrap_or_default().to_owned())
        })
        .collect()
}

fn documented_env(doc: &str) -> BTreeSet<String> {
    first_cells(doc, "Environment variables")
        .iter()
        .filter_map(|c| code_spans(c).first().map(|s| (*s).to_owned()))
        .collect()
}

#[test]
fn every_knid_flag_and_env_var_is_documented() {
    let (flags, env) = help_flags_and_env(&knid_help());
    assert!(
        flags.contains("--config") && env.contains("KNID_LOG"),
        "read {flags:?} {env:?}"
    );
    let doc = read(CONFIG_DOC);
    let (doc_flags, doc_env) = (documented_flags(&doc), documented_env(&doc));
    let missing: Vec<_> = flags
        .difference(&doc_flags)
        .chain(env.difference(&doc_env))
        .collect();
    assert!(
        missing.is_empty(),
        "{CONFIG_DOC} (\"Command-line flags\", \"Environment variables\") lacks {missing:?}"
    );
}

#[test]
fn every_documented_flag_and_env_var_exists() {
    let (flags, env) = help_flags_and_env(&knid_help());
    let doc = read(CONFIG_DOC);
    let mut stale: Vec<String> = documented_flags(&doc).difference(&flags).cloned().collect();
    // An env var is real when `knid --help` names it or the daemon's code reads it (the
    // failpoints of crash-test builds are not a flag).
    let code = read("src/knid/main.rs") + &read("core/src/shared/failpoint/mod.rs");
    for var in documented_env(&doc) {
        if !env.contains(&var) && !code.contains(&format!("\"{var}\"")) {
            stale.push(var);
        }
    }
    assert!(
        stale.is_empty(),
        "{CONFIG_DOC} documents flags or env vars knid does not have: {stale:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// docs/operations.md: the readiness conditions and their reasons, from the code that sets them.

const OPS_DOC: &str = "docs/operations.md";

/// Splits the argument list starting right after `(` at the top level; returns the arguments.
fn call_args(text: &str) -> Vec<String> {
    let mut args = vec![String::new()];
    let (mut depth, mut in_str, mut prev) = (0i32, false, ' ');
    for c in text.chars() {
        if in_str {
            if c == '"' && prev != '\\' {
                in_str = false;
            }
        } else {
            match c {
                '"' => in_str = true,
                '(' | '[' | '{' => depth += 1,
                ')' | ']' | '}' if depth == 0 => break,
                ')' | ']' | '}' => depth -= 1,
                ',' if depth == 0 => {
                    args.push(String::new());
                    prev = c;
                    continue;
                }
                _ => {}
            }
        }
        if let Some(a) = args.last_mut() {
            a.push(c);
        }
        prev = c;
    }
    if args.last().is_some_and(|a| a.trim().is_empty()) {
        args.pop(); // a trailing comma
    }
    args.into_iter().map(|a| a.trim().to_owned()).collect()
}

fn literal(arg: &str) -> Option<&str> {
    arg.strip_prefix('"')?.strip_suffix('"')
}

/// Condition types and reasons, from every `Condition::now(type, status, reason, message)` call
/// in core/src (tests excluded); a type given as a `CONDITION` constant is resolved in its module
/// (`foo.rs` or `foo/mod.rs` is module `foo`).
fn condition_types_and_reasons() -> (BTreeSet<String>, BTreeSet<String>) {
    fn walk(dir: &std::path::Path, sources: &mut BTreeMap<String, String>) {
        for entry in std::fs::read_dir(dir).expect("core/src") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                walk(&path, sources);
            } else if path.extension().is_some_and(|e| e == "rs")
                && path.file_name().is_some_and(|n| n != "tests.rs")
            {
                let stem = path.file_stem().unwrap_or_default();
                let module = if stem == "mod" {
                    path.parent().and_then(|p| p.file_name()).unwrap_or(stem)
                } else {
                    stem
                };
                let text = std::fs::read_to_string(&path).expect("read");
                sources.insert(
                    module.to_string_lossy().into_owned(),
                    without_tests(&text).to_owned(),
                );
            }
        }
    }
    let mut sources = BTreeMap::new();
    walk(&root().join("core/src"), &mut sources);
    let constant = |file: &str| {
        sources.get(file).and_then(|s| {
            let at = s.find("const CONDITION: &str = \"")? + "const CONDITION: &str = \"".len();
            s[at..].split('"').next().map(str::to_owned)
        })
    };
    let (mut types, mut reasons) = (BTreeSet::new(), BTreeSet::new());
    for (file, src) in &sources {
        for (at, call) in src.match_indices("Condition::now(") {
            let args = call_args(&src[at + call.len()..]);
            if args.len() != 4 {
                continue;
            }
            let kind = match literal(&args[0]) {
                Some(k) => Some(k.to_owned()),
                None if args[0] == "CONDITION" => constant(file),
                None => args[0].strip_suffix("::CONDITION").and_then(&constant),
            };
            types.extend(kind);
            reasons.extend(
                literal(&args[2])
                    .filter(|r| !r.is_empty())
                    .map(str::to_owned),
            );
        }
        // Per-network conditions are named `Type/<network>`.
        for lit in src.split('"').skip(1).step_by(2) {
            if let Some(kind) = lit.strip_suffix("/{}") {
                if kind.chars().all(|c| c.is_ascii_alphanumeric())
                    && kind.starts_with(char::is_uppercase)
                {
                    types.insert(kind.to_owned());
                }
            }
        }
    }
    (types, reasons)
}

#[test]
fn every_readiness_condition_and_reason_is_documented() {
    let (types, reasons) = condition_types_and_reasons();
    for expected in [
        "NetworkReady",
        "StoreReady",
        "ExtensionsReady",
        "PluginsAvailable",
    ] {
        assert!(types.contains(expected), "read {types:?}");
    }
    assert!(reasons.len() >= 5, "read {reasons:?}");
    let doc = read(OPS_DOC);
    let missing: Vec<_> = types
        .iter()
        .chain(&reasons)
        .filter(|name| !doc.contains(&format!("`{name}")))
        .collect();
    assert!(missing.is_empty(), "{OPS_DOC} never names {missing:?}");
}

// ---------------------------------------------------------------------------------------------
// The README's documentation index, and references: every link, every mention of a page of the
// docs or of one of its headings, and every repository path the docs name resolve inside this
// repository.

/// A relative link of a markdown text (`](path#anchor)`): where it starts, its path (empty for
/// a heading of the same page) and its anchor.
struct Link {
    at: usize,
    path: String,
    anchor: Option<String>,
}

/// The relative links of a markdown text; web and mail links left out.
fn relative_links(text: &str) -> Vec<Link> {
    text.match_indices("](")
        .filter_map(|(at, _)| {
            let target = text[at + 2..].split(')').next()?.trim();
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                return None;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((path, anchor)) => (path, Some(anchor.to_owned())),
                None => (target, None),
            };
            Some(Link {
                at,
                path: path.to_owned(),
                anchor,
            })
        })
        .collect()
}

fn docs_pages() -> Vec<String> {
    let mut pages: Vec<String> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.ends_with(".md") && !n.ends_with(".head.md"))
        .collect();
    pages.sort();
    pages
}

#[test]
fn readme_documentation_index_lists_every_doc() {
    let readme = read("README.md");
    let (_, index) = sections(&readme)
        .into_iter()
        .find(|(h, _)| h.trim() == "## Documentation")
        .expect("README.md has a \"## Documentation\" section");
    let linked: BTreeSet<String> = relative_links(&index)
        .into_iter()
        .map(|link| link.path)
        .filter(|path| !path.is_empty())
        .collect();
    for page in docs_pages() {
        let target = format!("docs/{page}");
        assert!(
            linked.contains(&target),
            "README's Documentation index lacks {target}"
        );
    }
    for target in &linked {
        assert!(
            root().join(target).exists(),
            "README links to missing {target}"
        );
    }
}

/// The anchor GitHub gives a heading line: the text as shown (a link's target dropped),
/// lower-cased, each space made `-`, and every character but letters, digits, `-` and `_`
/// dropped.
fn github_anchor(heading: &str) -> String {
    let mut rest = heading.trim_start_matches('#').trim_end_matches('#').trim();
    let mut shown = String::new();
    while let Some(at) = rest.find("](") {
        shown.push_str(&rest[..at]);
        rest = rest[at..].split_once(')').map_or("", |(_, after)| after);
    }
    shown.push_str(rest);
    shown
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors a markdown page offers: one per heading (GitHub suffixes a repeat with `-1`,
/// `-2`, …) and every explicit `<a id="…">` or `<a name="…">`.
fn anchors(doc: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for (heading, _) in sections(doc) {
        let level = heading.chars().take_while(|&c| c == '#').count();
        let after = &heading[level..];
        if level == 0 || level > 6 || !(after.is_empty() || after.starts_with(' ')) {
            continue;
        }
        let anchor = github_anchor(&heading);
        let repeats = seen.entry(anchor.clone()).or_insert(0);
        out.insert(match *repeats {
            0 => anchor,
            n => format!("{anchor}-{n}"),
        });
        *repeats += 1;
    }
    for marker in ["<a id=\"", "<a name=\""] {
        for (at, _) in doc.match_indices(marker) {
            let id = doc[at + marker.len()..]
                .split('"')
                .next()
                .unwrap_or_default();
            out.insert(id.to_owned());
        }
    }
    out
}

#[test]
fn anchors_are_the_ones_github_makes() {
    let doc = "# knid\n## The attachment lifecycle (attach → detach → gone)\n\
               ```\n# not a heading\n```\n#not-a-heading\n## `[networks.<name>]`: one network\n\
               ### Ratios (p50; churn: time per cycle at concurrency 1)\n## Logs\n## Logs\n\
               ## See [security](security.md#faults)\n<a id=\"knid-v1-dns\"></a>\n";
    let wanted: BTreeSet<String> = [
        "knid",
        "the-attachment-lifecycle-attach--detach--gone",
        "networksname-one-network",
        "ratios-p50-churn-time-per-cycle-at-concurrency-1",
        "logs",
        "logs-1",
        "see-security",
        "knid-v1-dns",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    assert_eq!(anchors(doc), wanted);
}

/// Every UTF-8 file of the repository, by path from the root, with its text. Left out: `.git`,
/// build output (`target/`, at any depth) and the fuzz corpora (`fuzz/corpus/`: inputs, not
/// source or prose).
fn repo_texts() -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut todo = vec![String::new()];
    while let Some(dir) = todo.pop() {
        let entries =
            std::fs::read_dir(root().join(&dir)).unwrap_or_else(|e| panic!("read {dir}/: {e}"));
        for entry in entries {
            let entry = entry.expect("directory entry");
            let name = entry.file_name().to_string_lossy().into_owned();
            let rel = if dir.is_empty() {
                name.clone()
            } else {
                format!("{dir}/{name}")
            };
            let kind = entry.file_type().expect("file type");
            if name == ".git" || name == "target" || rel == "fuzz/corpus" {
                continue;
            }
            if kind.is_dir() {
                todo.push(rel);
            } else if kind.is_file() {
                if let Ok(text) = std::fs::read_to_string(entry.path()) {
                    out.push((rel, text));
                }
            }
        }
    }
    out.sort();
    out
}

/// `path:line` of the byte offset `at` of `text`, the text of the file at `path`.
fn place(path: &str, text: &str, at: usize) -> String {
    format!("{path}:{}", text[..at].matches('\n').count() + 1)
}

/// Citations of the design notes, which live outside this repository where its readers never
/// see them: their section numbers (the sign U+00A7, as in "ARCHITECTURE \u{a7}10") and paths
/// into them. Each as `path:line: the line`, from the files under `core/` or from all others.
fn design_note_citations(in_core: bool) -> Vec<String> {
    let notes: Vec<String> = ["design", "reference"]
        .iter()
        .map(|dir| format!("shared/{dir}/"))
        .collect();
    let mut found = Vec::new();
    for (path, text) in repo_texts() {
        if path.starts_with("core/") != in_core {
            continue;
        }
        for (n, line) in text.lines().enumerate() {
            if line.contains('\u{a7}') || notes.iter().any(|note| line.contains(note.as_str())) {
                found.push(format!("{path}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    found
}

const CITE_INSTEAD: &str = "cite a heading of this repository's docs instead: in a comment \
                            `docs/security.md#validation-rules`, in markdown a link";

#[test]
fn nothing_outside_core_cites_the_design_notes() {
    let found = design_note_citations(false);
    assert!(
        found.is_empty(),
        "{} citation(s) of sections or files outside this repository; {CITE_INSTEAD}:\n  {}",
        found.len(),
        found.join("\n  ")
    );
}

#[test]
fn core_cites_no_design_notes() {
    let found = design_note_citations(true);
    assert!(
        found.is_empty(),
        "{} citation(s) of sections or files outside this repository; {CITE_INSTEAD}:\n  {}",
        found.len(),
        found.join("\n  ")
    );
}

/// Whether `c` can be part of a repository path as the docs write one.
fn is_path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/')
}

/// Where `needle` occurs in `text` as the start of a path: not right after a character a path
/// holds (so `docs/` is found in `docs/api.md` but not in `../docs/api.md`).
fn path_starts<'a>(text: &'a str, needle: &'a str) -> impl Iterator<Item = usize> + 'a {
    text.match_indices(needle)
        .map(|(at, _)| at)
        .filter(|&at| !text[..at].chars().next_back().is_some_and(is_path_char))
}

/// The path (with `#` also an anchor) starting at `at`: up to the first character no path
/// holds, a sentence's final `.` or `,` left out.
fn path_at(text: &str, at: usize, with_anchor: bool) -> &str {
    let rest = &text[at..];
    let end = rest
        .find(|c: char| !(is_path_char(c) || (with_anchor && c == '#')))
        .unwrap_or(rest.len());
    rest[..end].trim_end_matches(['.', ','])
}

/// `rel` read from the folder `dir` (both from the root), `.` and `..` resolved.
fn joined(dir: &str, rel: &str) -> String {
    let mut parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
    for part in rel.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            part => parts.push(part),
        }
    }
    parts.join("/")
}

/// Every reference of the file `path` to a page of the docs: each mention of `docs/<page>.md`
/// or `README.md`, with its `#anchor` if any (in comments, strings and prose alike: read from
/// the root), and in a markdown file each relative link (read from the file's folder). Each as
/// (where, the page from the root, the anchor).
fn page_references(path: &str, text: &str) -> Vec<(usize, String, Option<String>)> {
    let mut refs = Vec::new();
    for needle in ["docs/", "README.md"] {
        for at in path_starts(text, needle) {
            let word = path_at(text, at, true);
            let (page, anchor) = match word.split_once('#') {
                Some((page, anchor)) => (page, Some(anchor.to_owned())),
                None => (word, None),
            };
            if page.ends_with(".md") {
                refs.push((at, page.to_owned(), anchor));
            }
        }
    }
    if path.ends_with(".md") {
        let dir = path.rsplit_once('/').map_or("", |(dir, _)| dir);
        for link in relative_links(text) {
            let page = if link.path.is_empty() {
                path.to_owned()
            } else {
                joined(dir, &link.path)
            };
            refs.push((link.at, page, link.anchor));
        }
    }
    refs
}

#[test]
fn every_reference_to_the_docs_names_a_page_and_heading_that_exist() {
    let mut known: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut broken = BTreeSet::new();
    let mut checked = 0;
    for (path, text) in repo_texts() {
        for (at, page, anchor) in page_references(&path, &text) {
            checked += 1;
            let shown = match &anchor {
                Some(anchor) => format!("{page}#{anchor}"),
                None => page.clone(),
            };
            if !root().join(&page).exists() {
                broken.insert(format!(
                    "{}: {shown}: no such file",
                    place(&path, &text, at)
                ));
                continue;
            }
            let Some(anchor) = anchor.filter(|_| page.ends_with(".md")) else {
                continue;
            };
            let headings = known
                .entry(page.clone())
                .or_insert_with(|| anchors(&read(&page)));
            if !headings.contains(&anchor) {
                broken.insert(format!(
                    "{}: {shown}: {page} has no heading with that anchor",
                    place(&path, &text, at)
                ));
            }
        }
    }
    assert!(checked > 100, "found only {checked} references");
    assert!(
        broken.is_empty(),
        "{} reference(s) to a missing page or heading (an anchor is the heading lower-cased, \
         spaces made '-', punctuation but '-' and '_' dropped):\n  {}",
        broken.len(),
        broken.into_iter().collect::<Vec<_>>().join("\n  ")
    );
}

/// The folders of the repository's own files, as the docs start a path to one.
const REPO_DIRS: [&str; 12] = [
    "core/",
    "transport/",
    "store/",
    "netops/",
    "src/",
    "tests/",
    "benches/",
    "fuzz/",
    "examples/",
    "deploy/",
    "docs/",
    ".ci/",
];

#[test]
fn every_repository_path_the_docs_name_exists() {
    let mut missing = BTreeSet::new();
    let mut checked = 0;
    let pages = docs_pages()
        .into_iter()
        .map(|page| format!("docs/{page}"))
        .chain([API_HEAD.to_owned(), "README.md".to_owned()]);
    for page in pages {
        let text = read(&page);
        for dir in REPO_DIRS {
            for at in path_starts(&text, dir) {
                checked += 1;
                let named = path_at(&text, at, false);
                if !root().join(named).exists() {
                    missing.insert(format!("{}: {named}", place(&page, &text, at)));
                }
            }
        }
    }
    assert!(checked > 100, "found only {checked} paths");
    assert!(
        missing.is_empty(),
        "{} path(s) named in docs/ or README.md that this repository does not have:\n  {}",
        missing.len(),
        missing.into_iter().collect::<Vec<_>>().join("\n  ")
    );
}

// ---------------------------------------------------------------------------------------------
// docs/operations.md: the metrics table, against the names the metrics module registers.

/// Every metric name in core/src/metrics/mod.rs (tests excluded): its `"knid_…"` and `"process_…"`
/// string literals.
fn metric_names() -> BTreeSet<String> {
    let src = read("core/src/metrics/mod.rs");
    without_tests(&src)
        .split('"')
        .skip(1)
        .step_by(2)
        .filter(|s| {
            (s.starts_with("knid_") || s.starts_with("process_"))
                && s.chars().all(|c| c.is_ascii_lowercase() || c == '_')
        })
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_metrics_table_lists_exactly_the_metrics_knid_exports() {
    let code = metric_names();
    assert!(
        code.contains("knid_operations_total") && code.len() >= 10,
        "read {code:?}"
    );
    let documented: BTreeSet<String> = first_cells(&read(OPS_DOC), "Metrics")
        .iter()
        .filter_map(|c| code_spans(c).first().map(|s| (*s).to_owned()))
        .collect();
    let missing: Vec<_> = code.difference(&documented).collect();
    let stale: Vec<_> = documented.difference(&code).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "{OPS_DOC} metrics table: missing {missing:?}, not exported {stale:?}"
    );
}
