//! A reader of knid's .proto files (the subset they use: package, import, service/rpc, message,
//! enum, scalar/optional/repeated/map fields, `//` comments) and the markdown API reference made
//! from them. A line it does not understand is an error naming it, so a new construct (oneof, a
//! nested message) fails the docs test instead of vanishing from docs/api.md.

use std::fmt::Write as _;
use std::path::Path;

/// One .proto file.
#[derive(Debug, Default)]
pub struct ProtoFile {
    /// Path relative to the repository root.
    pub path: String,
    /// The comment block above `syntax`.
    pub doc: Vec<String>,
    pub package: String,
    pub imports: Vec<String>,
    pub services: Vec<Service>,
    pub messages: Vec<Message>,
    pub enums: Vec<Enum>,
}

#[derive(Debug, Default)]
pub struct Service {
    pub name: String,
    pub doc: Vec<String>,
    pub rpcs: Vec<Rpc>,
}

#[derive(Debug)]
pub struct Rpc {
    pub name: String,
    pub request: String,
    pub response: String,
    pub doc: Vec<String>,
}

#[derive(Debug, Default)]
pub struct Message {
    pub name: String,
    pub doc: Vec<String>,
    pub fields: Vec<Field>,
}

#[derive(Debug)]
pub struct Field {
    pub name: String,
    /// `string`, `repeated Route`, `optional uint32`, `map<string, string>`.
    pub label: String,
    /// The message or enum type, when not a scalar (map values included).
    pub type_name: String,
    pub number: u32,
    pub doc: Vec<String>,
}

#[derive(Debug, Default)]
pub struct Enum {
    pub name: String,
    pub doc: Vec<String>,
    pub values: Vec<EnumValue>,
}

#[derive(Debug)]
pub struct EnumValue {
    pub name: String,
    pub number: i64,
    pub doc: Vec<String>,
}

enum Block {
    Top,
    Service(Service),
    Message(Message),
    Enum(Enum),
}

const SCALARS: &[&str] = &[
    "double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32",
    "fixed64", "sfixed32", "sfixed64", "bool", "string", "bytes",
];

/// Parses `text` (the file at `path`); the error names the line it could not read.
pub fn parse(path: &str, text: &str) -> Result<ProtoFile, String> {
    let mut file = ProtoFile {
        path: path.to_owned(),
        ..ProtoFile::default()
    };
    let mut pending: Vec<String> = Vec::new();
    let mut block = Block::Top;
    for (i, raw) in text.lines().enumerate() {
        let at = |why: &str| format!("{path}:{}: {why}: {raw:?}", i + 1);
        let line = raw.trim();
        if line.is_empty() {
            pending.clear();
            continue;
        }
        if let Some(comment) = line.strip_prefix("//") {
            pending.push(comment.strip_prefix(' ').unwrap_or(comment).to_owned());
            continue;
        }
        // A trailing `// comment` after a declaration documents it too.
        let (decl, trailing) = match line.find("//") {
            Some(pos) => (line[..pos].trim(), Some(line[pos + 2..].trim().to_owned())),
            None => (line, None),
        };
        let mut doc = std::mem::take(&mut pending);
        doc.extend(trailing);
        let words: Vec<&str> = decl.split_whitespace().collect();
        block = match (block, words.as_slice()) {
            (Block::Top, ["syntax", ..]) => {
                file.doc = doc;
                Block::Top
            }
            (Block::Top, ["package", name]) => {
                file.package = name.trim_end_matches(';').to_owned();
                Block::Top
            }
            (Block::Top, ["import", name]) => {
                file.imports
                    .push(name.trim_end_matches(';').trim_matches('"').to_owned());
                Block::Top
            }
            (Block::Top, ["service", name, "{"]) => Block::Service(Service {
                name: (*name).to_owned(),
                doc,
                rpcs: Vec::new(),
            }),
            (Block::Top, ["message", name, "{}"]) => {
                file.messages.push(Message {
                    name: (*name).to_owned(),
                    doc,
                    fields: Vec::new(),
                });
                Block::Top
            }
            (Block::Top, ["message", name, "{"]) => Block::Message(Message {
                name: (*name).to_owned(),
                doc,
                fields: Vec::new(),
            }),
            (Block::Top, ["enum", name, "{"]) => Block::Enum(Enum {
                name: (*name).to_owned(),
                doc,
                values: Vec::new(),
            }),
            (Block::Service(s), ["}"]) => {
                file.services.push(s);
                Block::Top
            }
            (Block::Message(m), ["}"]) => {
                file.messages.push(m);
                Block::Top
            }
            (Block::Enum(e), ["}"]) => {
                file.enums.push(e);
                Block::Top
            }
            (Block::Service(mut s), ["rpc", ..]) => {
                s.rpcs
                    .push(parse_rpc(decl, doc).ok_or_else(|| at("unreadable rpc"))?);
                Block::Service(s)
            }
            (Block::Message(mut m), _) => {
                m.fields
                    .push(parse_field(decl, doc).ok_or_else(|| at("unreadable field"))?);
                Block::Message(m)
            }
            (Block::Enum(mut e), [name, "=", number]) => {
                let number = number
                    .trim_end_matches(';')
                    .parse()
                    .map_err(|_| at("unreadable enum value"))?;
                e.values.push(EnumValue {
                    name: (*name).to_owned(),
                    number,
                    doc,
                });
                Block::Enum(e)
            }
            _ => return Err(at("not understood")),
        };
    }
    if !matches!(block, Block::Top) {
        return Err(format!("{path}: a block is not closed"));
    }
    Ok(file)
}

/// `rpc Name(Request) returns (Response);`
fn parse_rpc(decl: &str, doc: Vec<String>) -> Option<Rpc> {
    let rest = decl.strip_prefix("rpc ")?.strip_suffix(';')?;
    let (name, rest) = rest.split_once('(')?;
    let (request, rest) = rest.split_once(')')?;
    let rest = rest.trim().strip_prefix("returns")?.trim();
    let response = rest.strip_prefix('(')?.strip_suffix(')')?;
    let ident = |s: &str| {
        let s = s.trim();
        (!s.is_empty() && !s.contains(char::is_whitespace)).then(|| s.to_owned())
    };
    Some(Rpc {
        name: ident(name)?,
        request: ident(request)?,
        response: ident(response)?,
        doc,
    })
}

/// `[optional|repeated] type name = N;` or `map<K, V> name = N;`
fn parse_field(decl: &str, doc: Vec<String>) -> Option<Field> {
    let decl = decl.strip_suffix(';')?;
    let (lhs, number) = decl.rsplit_once('=')?;
    let number = number.trim().parse().ok()?;
    let (label, name) = lhs.trim().rsplit_once(' ')?;
    let label = label.trim();
    let value_type = if let Some(map) = label.strip_prefix("map<") {
        let (key, value) = map.strip_suffix('>')?.split_once(',')?;
        if !SCALARS.contains(&key.trim()) {
            return None;
        }
        value.trim()
    } else {
        match label.split_whitespace().collect::<Vec<_>>().as_slice() {
            [t] => *t,
            ["optional" | "repeated", t] => *t,
            _ => return None,
        }
    };
    let ident_ok = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '.')
    };
    if !ident_ok(name) || !ident_ok(value_type) {
        return None;
    }
    Some(Field {
        name: name.to_owned(),
        label: label.split_whitespace().collect::<Vec<_>>().join(" "),
        type_name: if SCALARS.contains(&value_type) {
            String::new()
        } else {
            value_type.to_owned()
        },
        number,
        doc,
    })
}

/// Every `.proto` under `dir` (recursively), parsed, in the order the reference presents them:
/// paths sorted in reverse, which puts knid.v1's Runtime first, its Extension next, KNI last.
pub fn read_all(root: &Path, dir: &str) -> Result<Vec<ProtoFile>, String> {
    let mut paths = Vec::new();
    let mut stack = vec![root.join(dir)];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).map_err(|e| format!("{}: {e}", d.display()))? {
            let p = entry.map_err(|e| e.to_string())?.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|e| e == "proto") {
                paths.push(p);
            }
        }
    }
    paths.sort();
    paths.reverse();
    paths
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
            let rel = p.strip_prefix(root).unwrap_or(p).display().to_string();
            parse(&rel, &text)
        })
        .collect()
}

/// Text for markdown: `<`, `>` and (in table cells) `|` escaped outside code spans.
fn escape(text: &str, in_cell: bool) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_code = false;
    for c in text.chars() {
        match c {
            '`' => {
                in_code = !in_code;
                out.push(c);
            }
            '<' if !in_code => out.push_str("&lt;"),
            '>' if !in_code => out.push_str("&gt;"),
            '|' if in_cell => out.push_str("\\|"),
            _ => out.push(c),
        }
    }
    out
}

/// A comment block as one table cell.
fn cell(doc: &[String]) -> String {
    let joined = doc
        .iter()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    if joined.is_empty() {
        "—".to_owned()
    } else {
        escape(&joined, true)
    }
}

/// A comment block as markdown paragraphs (lines kept, so `- ` lists stay lists).
fn paragraphs(out: &mut String, doc: &[String]) {
    if doc.is_empty() {
        return;
    }
    for line in doc {
        let _ = writeln!(out, "{}", escape(line.trim_end(), false));
    }
    out.push('\n');
}

fn anchor(package: &str, name: &str) -> String {
    format!("{package}.{name}").replace('.', "-").to_lowercase()
}

/// A type as a link to its section when the files define it, else as code.
fn type_ref(files: &[ProtoFile], package: &str, name: &str) -> String {
    let qualified = name.contains('.');
    let (pkg, short) = match name.rsplit_once('.') {
        Some((p, s)) if qualified => (p, s),
        _ => (package, name),
    };
    let known = files.iter().any(|f| {
        f.package == pkg
            && (f.messages.iter().any(|m| m.name == short)
                || f.enums.iter().any(|e| e.name == short))
    });
    if known {
        format!("[`{name}`](#{})", anchor(pkg, short))
    } else {
        format!("`{name}`")
    }
}

/// The API reference: `head` verbatim, then every file's services, messages and enums.
pub fn render(files: &[ProtoFile], head: &str, sources: &str) -> String {
    let mut out = String::new();
    out.push_str(head.trim_end());
    out.push_str("\n\n");
    let _ = writeln!(
        out,
        "<!-- Everything below is generated by tests/docs.rs from {sources}. Edit the .proto \
         comments (or docs/api.head.md), then run `KNID_UPDATE_DOCS=1 cargo test --test docs`. -->\n"
    );
    for f in files {
        let services: Vec<String> = f
            .services
            .iter()
            .map(|s| format!("`{}.{}`", f.package, s.name))
            .collect();
        let title = if services.is_empty() {
            format!("`{}`", f.package)
        } else {
            services.join(", ")
        };
        let _ = writeln!(out, "## {title} ({})\n", f.path);
        let _ = writeln!(out, "Source: `{}`, package `{}`.\n", f.path, f.package);
        if !f.imports.is_empty() {
            let _ = writeln!(
                out,
                "Imports: {}.\n",
                f.imports
                    .iter()
                    .map(|i| format!("`{i}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        paragraphs(&mut out, &f.doc);
        for s in &f.services {
            let _ = writeln!(
                out,
                "<a id=\"{}\"></a>\n### Service `{}.{}`\n",
                anchor(&f.package, &s.name),
                f.package,
                s.name
            );
            paragraphs(&mut out, &s.doc);
            out.push_str("| RPC | method path | request | response | semantics |\n");
            out.push_str("|---|---|---|---|---|\n");
            for r in &s.rpcs {
                let _ = writeln!(
                    out,
                    "| `{}` | `/{}.{}/{}` | {} | {} | {} |",
                    r.name,
                    f.package,
                    s.name,
                    r.name,
                    type_ref(files, &f.package, &r.request),
                    type_ref(files, &f.package, &r.response),
                    cell(&r.doc)
                );
            }
            out.push('\n');
        }
        if !f.messages.is_empty() {
            let _ = writeln!(out, "### Messages of `{}` ({})\n", f.package, f.path);
        }
        for m in &f.messages {
            let _ = writeln!(
                out,
                "<a id=\"{}\"></a>\n#### `{}.{}`\n",
                anchor(&f.package, &m.name),
                f.package,
                m.name
            );
            paragraphs(&mut out, &m.doc);
            if m.fields.is_empty() {
                out.push_str("No fields.\n\n");
                continue;
            }
            out.push_str("| field | number | type | description |\n");
            out.push_str("|---|---|---|---|\n");
            for field in &m.fields {
                let ty = if field.type_name.is_empty() {
                    format!("`{}`", field.label)
                } else {
                    let linked = type_ref(files, &f.package, &field.type_name);
                    match field.label.strip_prefix("map<") {
                        Some(map) => {
                            let key = map.split(',').next().unwrap_or_default().trim();
                            format!("map&lt;{key}, {linked}&gt;")
                        }
                        None => match field.label.split_once(' ') {
                            Some((modifier, _)) => format!("{modifier} {linked}"),
                            None => linked,
                        },
                    }
                };
                let _ = writeln!(
                    out,
                    "| `{}` | {} | {} | {} |",
                    field.name,
                    field.number,
                    ty,
                    cell(&field.doc)
                );
            }
            out.push('\n');
        }
        for e in &f.enums {
            let _ = writeln!(
                out,
                "<a id=\"{}\"></a>\n#### enum `{}.{}`\n",
                anchor(&f.package, &e.name),
                f.package,
                e.name
            );
            paragraphs(&mut out, &e.doc);
            out.push_str("| value | number | description |\n|---|---|---|\n");
            for v in &e.values {
                let _ = writeln!(out, "| `{}` | {} | {} |", v.name, v.number, cell(&v.doc));
            }
            out.push('\n');
        }
    }
    let trimmed = out.trim_end().len();
    out.truncate(trimmed);
    out.push('\n');
    out
}
