//! The house kept: no two files of one crate import each other, directly or through others;
//! core's top level stays a handful of rooms (docs/architecture.md#inside-knid-core); and no file
//! stands beside a folder of its submodules (that file is the folder's `mod.rs`).
//!
//! Each crate's module tree is read from its `src/lib.rs` down its `mod` declarations. A file
//! imports another when it names a path into it: `use crate::…`, `use super::…`, or a `crate::`,
//! `super::`, `self::` or child-module path in its code. A `pub use` re-export hands a name on:
//! it ties no file by itself, and a path through it leads on to the file that defines the name,
//! so `crate::Error` ties a file to `error.rs`, not to `lib.rs`. Unit tests (`#[cfg(test)]`
//! items, `mod tests`) are no rooms and are left out. No root needed.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// The crates whose files must not import each other in a circle.
const CRATES: &[&str] = &["core", "transport", "netops", "store", "testkit"];

/// The most entries (files and folders) `core/src` may hold.
const CORE_TOP_LEVEL_MAX: usize = 15;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rel(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    /// `::`
    Path,
    Punct(char),
}

/// The tokens of Rust source that matter for paths, with their lines: comments, string and
/// character literals and lifetimes are dropped.
fn tokens(src: &str) -> Vec<(Tok, usize)> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if chars[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if (c == 'r' || (c == 'b' && at(i + 1) == 'r'))
            && matches!(at(i + 1 + usize::from(c == 'b')), '"' | '#')
            && {
                let mut j = i + 1 + usize::from(c == 'b');
                while at(j) == '#' {
                    j += 1;
                }
                at(j) == '"'
            }
        {
            let mut j = i + 1 + usize::from(c == 'b');
            let mut hashes = 0;
            while at(j) == '#' {
                hashes += 1;
                j += 1;
            }
            j += 1;
            loop {
                if j >= chars.len() {
                    break;
                }
                if chars[j] == '"' && (1..=hashes).all(|k| at(j + k) == '#') {
                    j += 1 + hashes;
                    break;
                }
                if chars[j] == '\n' {
                    line += 1;
                }
                j += 1;
            }
            i = j;
        } else if c == '"' || (c == 'b' && at(i + 1) == '"') {
            let mut j = i + if c == 'b' { 2 } else { 1 };
            while j < chars.len() && chars[j] != '"' {
                if chars[j] == '\\' {
                    j += 1;
                }
                if at(j) == '\n' {
                    line += 1;
                }
                j += 1;
            }
            i = j + 1;
        } else if c == '\'' || (c == 'b' && at(i + 1) == '\'') {
            let start = i + if c == 'b' { 1 } else { 0 };
            if at(start + 1) == '\\' {
                let mut j = start + 2;
                while j < chars.len() && chars[j] != '\'' {
                    j += 1;
                }
                i = j + 1;
            } else if at(start + 2) == '\'' {
                i = start + 3;
            } else {
                // A lifetime: its name follows as an identifier, harmless.
                i = start + 1;
            }
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            // `$crate` in a macro is the defining crate, seen where the macro is defined.
            if start > 0 && chars[start - 1] == '$' {
                continue;
            }
            out.push((Tok::Ident(word), line));
        } else if c == ':' && at(i + 1) == ':' {
            out.push((Tok::Path, line));
            i += 2;
        } else {
            out.push((Tok::Punct(c), line));
            i += 1;
        }
    }
    out
}

fn is_ident(t: Option<&(Tok, usize)>, word: &str) -> bool {
    matches!(t, Some((Tok::Ident(w), _)) if w == word)
}

fn is_punct(t: Option<&(Tok, usize)>, c: char) -> bool {
    matches!(t, Some((Tok::Punct(p), _)) if *p == c)
}

/// The index just past the item that starts at `i`: at its `;` or its closing brace.
fn item_end(toks: &[(Tok, usize)], mut i: usize) -> usize {
    // Further attributes first.
    while is_punct(toks.get(i), '#') && is_punct(toks.get(i + 1), '[') {
        i = group_end(toks, i + 1);
    }
    let mut depth = 0i32;
    while i < toks.len() {
        match &toks[i].0 {
            Tok::Punct('(' | '[') => depth += 1,
            Tok::Punct(')' | ']') => depth -= 1,
            Tok::Punct('{') => {
                if depth == 0 {
                    return group_end(toks, i);
                }
                depth += 1;
            }
            Tok::Punct('}') => depth -= 1,
            Tok::Punct(';') if depth == 0 => return i + 1,
            _ => {}
        }
        i += 1;
    }
    i
}

/// The index just past the bracket group that opens at `i`.
fn group_end(toks: &[(Tok, usize)], mut i: usize) -> usize {
    let mut depth = 0i32;
    while i < toks.len() {
        match &toks[i].0 {
            Tok::Punct('(' | '[' | '{') => depth += 1,
            Tok::Punct(')' | ']' | '}') => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    i
}

/// `toks` without unit tests: items under `#[cfg(test)]` and modules named `tests`.
fn without_tests(toks: Vec<(Tok, usize)>) -> Vec<(Tok, usize)> {
    let cfg_test = [
        Tok::Punct('#'),
        Tok::Punct('['),
        Tok::Ident("cfg".into()),
        Tok::Punct('('),
        Tok::Ident("test".into()),
        Tok::Punct(')'),
        Tok::Punct(']'),
    ];
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        if toks[i..].len() >= cfg_test.len()
            && toks[i..i + cfg_test.len()]
                .iter()
                .zip(&cfg_test)
                .all(|((t, _), want)| t == want)
        {
            i = item_end(&toks, i + cfg_test.len());
        } else if is_ident(toks.get(i), "mod") && is_ident(toks.get(i + 1), "tests") {
            i = item_end(&toks, i);
        } else {
            out.push(toks[i].clone());
            i += 1;
        }
    }
    out
}

/// A `use` tree's paths, each as its segments (a glob ends in `*`, a rename keeps the old name).
fn use_paths(
    toks: &[(Tok, usize)],
    i: &mut usize,
    prefix: Vec<String>,
    out: &mut Vec<Vec<String>>,
) {
    let mut segs = prefix;
    while *i < toks.len() {
        match &toks[*i].0 {
            Tok::Path => *i += 1,
            Tok::Ident(w) => {
                segs.push(w.clone());
                *i += 1;
                if toks.get(*i).map(|t| &t.0) == Some(&Tok::Path) {
                    continue;
                }
                if is_ident(toks.get(*i), "as") {
                    *i += 2;
                }
                out.push(segs);
                return;
            }
            Tok::Punct('*') => {
                *i += 1;
                segs.push("*".into());
                out.push(segs);
                return;
            }
            Tok::Punct('{') => {
                *i += 1;
                while *i < toks.len() && !is_punct(toks.get(*i), '}') {
                    use_paths(toks, i, segs.clone(), out);
                    if is_punct(toks.get(*i), ',') {
                        *i += 1;
                    }
                }
                *i += 1;
                return;
            }
            _ => return,
        }
    }
}

type ModPath = Vec<String>;

/// One module of a crate: its file, what it defines, what its `use` declarations bring in.
#[derive(Default)]
struct Module {
    file: PathBuf,
    items: BTreeSet<String>,
    /// name → the path it was imported from.
    uses: HashMap<String, Vec<String>>,
    /// Paths of `use …::*`.
    globs: Vec<Vec<String>>,
}

/// A path a file names, where, and from which module.
struct Reference {
    from: ModPath,
    path: Vec<String>,
    line: usize,
}

struct Crate {
    modules: BTreeMap<ModPath, Module>,
    references: Vec<(PathBuf, Reference)>,
}

const ITEM_KEYWORDS: &[&str] = &[
    "fn", "struct", "enum", "trait", "type", "const", "static", "union",
];

/// Reads one file into `krate`: the modules it declares (and reads in turn), its items, its
/// `use` declarations and the paths its code names.
fn read_module(krate: &mut Crate, file: &Path, module: ModPath) {
    let src =
        std::fs::read_to_string(file).unwrap_or_else(|e| panic!("read {}: {e}", file.display()));
    let toks = without_tests(tokens(&src));
    let name = file
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default();
    let dir = match name {
        "lib" | "main" | "mod" => file.parent().map(Path::to_path_buf).unwrap_or_default(),
        _ => file.with_extension(""),
    };
    // (module, the folder its `mod x;` children live in, the brace depth that closes it)
    let mut stack: Vec<(ModPath, PathBuf, i32)> = vec![(module.clone(), dir, -1)];
    krate.modules.entry(module).or_default().file = file.to_path_buf();
    let mut depth = 0i32;
    let mut i = 0;
    let mut children = Vec::new();
    while i < toks.len() {
        let (current, cur_dir, _) = stack.last().cloned().unwrap_or_default();
        let prev_is_path = i > 0 && toks[i - 1].0 == Tok::Path;
        match &toks[i].0 {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                depth -= 1;
                if stack.last().is_some_and(|s| s.2 == depth) {
                    stack.pop();
                }
            }
            Tok::Ident(w) if w == "mod" => {
                if let Some((Tok::Ident(child), _)) = toks.get(i + 1) {
                    let mut path = current.clone();
                    path.push(child.clone());
                    if is_punct(toks.get(i + 2), ';') {
                        let flat = cur_dir.join(format!("{child}.rs"));
                        let nested = cur_dir.join(child).join("mod.rs");
                        let child_file = if flat.exists() { flat } else { nested };
                        children.push((child_file, path));
                        i += 3;
                        continue;
                    }
                    if is_punct(toks.get(i + 2), '{') {
                        // An inline module: its `mod x;` children live in a folder of its name.
                        krate.modules.entry(path.clone()).or_default().file = file.to_path_buf();
                        stack.push((path, cur_dir.join(child), depth));
                        depth += 1;
                        i += 3;
                        continue;
                    }
                }
            }
            Tok::Ident(w) if w == "use" && !prev_is_path => {
                let line = toks[i].1;
                let mut j = i + 1;
                let mut paths = Vec::new();
                use_paths(&toks, &mut j, Vec::new(), &mut paths);
                // `pub use` hands a name on: a path through it leads on to the defining file
                // (see `defining`), and the face that re-exports is not tied by it.
                let re_export = is_ident(toks.get(i.wrapping_sub(1)), "pub")
                    || (is_punct(toks.get(i.wrapping_sub(1)), ')')
                        && (2..=4).any(|k| is_ident(toks.get(i.wrapping_sub(k)), "pub")));
                let m = krate.modules.entry(current.clone()).or_default();
                for path in paths {
                    if path.last().map(String::as_str) == Some("*") {
                        m.globs.push(path[..path.len() - 1].to_vec());
                    } else if let Some(last) = path.last() {
                        let name = if last == "self" && path.len() > 1 {
                            path[path.len() - 2].clone()
                        } else {
                            last.clone()
                        };
                        m.uses.insert(name, path.clone());
                    }
                    if re_export {
                        continue;
                    }
                    krate.references.push((
                        file.to_path_buf(),
                        Reference {
                            from: current.clone(),
                            path,
                            line,
                        },
                    ));
                }
                i = j;
                continue;
            }
            Tok::Ident(w)
                if ITEM_KEYWORDS.contains(&w.as_str()) && depth == stack_depth(&stack) =>
            {
                if let Some((Tok::Ident(item), _)) = toks.get(i + 1) {
                    krate
                        .modules
                        .entry(current.clone())
                        .or_default()
                        .items
                        .insert(item.clone());
                }
            }
            Tok::Ident(w) if !prev_is_path && toks.get(i + 1).map(|t| &t.0) == Some(&Tok::Path) => {
                let line = toks[i].1;
                let mut path = vec![w.clone()];
                let mut j = i + 1;
                while toks.get(j).map(|t| &t.0) == Some(&Tok::Path) {
                    match toks.get(j + 1) {
                        Some((Tok::Ident(seg), _)) => {
                            path.push(seg.clone());
                            j += 2;
                        }
                        _ => break,
                    }
                }
                krate.references.push((
                    file.to_path_buf(),
                    Reference {
                        from: current.clone(),
                        path,
                        line,
                    },
                ));
                i = j;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    for (child_file, path) in children {
        read_module(krate, &child_file, path);
    }
}

/// The brace depth of the innermost module's body.
fn stack_depth(stack: &[(ModPath, PathBuf, i32)]) -> i32 {
    stack.last().map_or(0, |s| s.2 + 1)
}

impl Crate {
    fn read(dir: &str) -> Crate {
        let mut krate = Crate {
            modules: BTreeMap::new(),
            references: Vec::new(),
        };
        read_module(&mut krate, &root().join(dir).join("src/lib.rs"), Vec::new());
        krate
    }

    /// Where a path named in module `from` starts: its anchor module and the segments after
    /// it. `None` for paths into other crates, std, types and locals.
    fn anchor(&self, from: &ModPath, path: &[String]) -> Option<(ModPath, usize)> {
        let mut module = from.clone();
        let mut at = 0;
        match path.first().map(String::as_str) {
            Some("crate") => return Some((Vec::new(), 1)),
            Some("self") => at = 1,
            Some("super") => {
                while path.get(at).map(String::as_str) == Some("super") {
                    module.pop();
                    at += 1;
                }
            }
            Some(first) => {
                let mut child = module.clone();
                child.push(first.to_owned());
                if !self.modules.contains_key(&child) {
                    return None;
                }
            }
            None => return None,
        }
        Some((module, at))
    }

    /// The file a path named in module `from` leads to, following `use` declarations to the
    /// file that defines the name.
    fn resolve(&self, from: &ModPath, path: &[String], hops: usize) -> Option<PathBuf> {
        let (mut module, mut at) = self.anchor(from, path)?;
        while let Some(seg) = path.get(at) {
            let mut child = module.clone();
            child.push(seg.clone());
            if seg == "self" {
                at += 1;
            } else if self.modules.contains_key(&child) {
                module = child;
                at += 1;
            } else if let Some(re_exported) = self.re_exported_module(&module, seg, hops) {
                module = re_exported;
                at += 1;
            } else {
                break;
            }
        }
        let file = self.modules.get(&module)?.file.clone();
        match path.get(at) {
            Some(name) if hops < 16 => Some(self.defining(&module, name, hops).unwrap_or(file)),
            _ => Some(file),
        }
    }

    /// The module that `module` brings in as `name` with a `use` (`pub use node::cluster;`).
    fn re_exported_module(&self, module: &ModPath, name: &str, hops: usize) -> Option<ModPath> {
        let path = self.modules.get(module)?.uses.get(name)?;
        if hops >= 16 {
            return None;
        }
        let (mut target, mut at) = self.anchor(module, path)?;
        while let Some(seg) = path.get(at) {
            let mut child = target.clone();
            child.push(seg.clone());
            if seg == "self" {
                at += 1;
            } else if self.modules.contains_key(&child) {
                target = child;
                at += 1;
            } else {
                target = self.re_exported_module(&target, seg, hops + 1)?;
                at += 1;
            }
        }
        Some(target)
    }

    /// The file that defines `name` as module `module` sees it, when it can be told.
    fn defining(&self, module: &ModPath, name: &str, hops: usize) -> Option<PathBuf> {
        let m = self.modules.get(module)?;
        if m.items.contains(name) {
            return Some(m.file.clone());
        }
        if let Some(path) = m.uses.get(name) {
            return self.resolve(module, path, hops + 1);
        }
        m.globs.iter().find_map(|glob| {
            let (mut target, mut at) = self.anchor(module, glob)?;
            while let Some(seg) = glob.get(at) {
                target.push(seg.clone());
                at += 1;
            }
            let found = self.defining(&target, name, hops + 1)?;
            let t = self.modules.get(&target)?;
            // Only a glob that really holds the name counts.
            (found != t.file || t.items.contains(name)).then_some(found)
        })
    }

    /// file → file → the first place the first names a path into the second.
    fn imports(&self) -> BTreeMap<PathBuf, BTreeMap<PathBuf, String>> {
        let mut out: BTreeMap<PathBuf, BTreeMap<PathBuf, String>> = BTreeMap::new();
        for m in self.modules.values() {
            out.entry(m.file.clone()).or_default();
        }
        for (file, r) in &self.references {
            let Some(to) = self.resolve(&r.from, &r.path, 0) else {
                continue;
            };
            if &to != file {
                out.entry(file.clone())
                    .or_default()
                    .entry(to)
                    .or_insert_with(|| format!("line {}: {}", r.line, r.path.join("::")));
            }
        }
        out
    }
}

/// The strongly connected components of `graph` with more than one file (Tarjan's algorithm).
fn circles(graph: &BTreeMap<PathBuf, BTreeMap<PathBuf, String>>) -> Vec<Vec<PathBuf>> {
    struct State<'a> {
        graph: &'a BTreeMap<PathBuf, BTreeMap<PathBuf, String>>,
        index: HashMap<&'a PathBuf, usize>,
        low: HashMap<&'a PathBuf, usize>,
        on_stack: BTreeSet<&'a PathBuf>,
        stack: Vec<&'a PathBuf>,
        out: Vec<Vec<PathBuf>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a PathBuf) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        let graph = s.graph;
        for w in graph.get(v).into_iter().flat_map(|e| e.keys()) {
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.clone());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.out.push(component);
            }
        }
    }
    let mut s = State {
        graph,
        index: HashMap::new(),
        low: HashMap::new(),
        on_stack: BTreeSet::new(),
        stack: Vec::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out
}

#[test]
fn no_files_of_a_crate_import_each_other_directly_or_through_others() {
    let mut report = String::new();
    for dir in CRATES {
        let krate = Crate::read(dir);
        let graph = krate.imports();
        let files = graph.len();
        let arrows: usize = graph.values().map(BTreeMap::len).sum();
        // A reader that saw nothing would pass anything.
        assert!(
            files > 5 && arrows > files / 2,
            "{dir}: read only {files} files and {arrows} imports"
        );
        for circle in circles(&graph) {
            let names: Vec<String> = circle.iter().map(|f| rel(f)).collect();
            report.push_str(&format!(
                "\n{dir}: {} files import each other: {}\n",
                circle.len(),
                names.join(", ")
            ));
            for from in &circle {
                for (to, at) in &graph[from] {
                    if circle.contains(to) {
                        report.push_str(&format!("  {} -> {} ({at})\n", rel(from), rel(to)));
                    }
                }
            }
        }
    }
    assert!(
        report.is_empty(),
        "import circles (define what both sides share below them):{report}"
    );
}

#[test]
fn the_reader_finds_a_planted_circle() {
    let dir = std::env::temp_dir().join(format!("knid-structure-{}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("room")).expect("mkdir");
    let write = |p: &str, text: &str| std::fs::write(src.join(p), text).expect("write");
    // a -> b through a re-export at the crate's face, b -> a through `super::`; b -> low only
    // in a comment and low -> b only in a unit test and a string, which are no imports.
    write(
        "lib.rs",
        "mod room;\nmod low;\npub use room::Thing;\npub use room::b::Other;\n",
    );
    write("room/mod.rs", "mod a;\npub mod b;\npub use a::Thing;\n");
    write("room/a.rs", "use crate::Other;\npub struct Thing;\n");
    write(
        "room/b.rs",
        "/* use crate::low::S; */\npub struct Other(super::a::Thing);\n",
    );
    write(
        "low.rs",
        "#[cfg(test)]\nmod t { use crate::room::b::Other; }\npub const S: &str = \"crate::room::b\";\n",
    );
    let mut krate = Crate {
        modules: BTreeMap::new(),
        references: Vec::new(),
    };
    read_module(&mut krate, &src.join("lib.rs"), Vec::new());
    let found = circles(&krate.imports());
    let names: Vec<Vec<String>> = found
        .iter()
        .map(|c| {
            c.iter()
                .map(|f| f.strip_prefix(&src).unwrap_or(f).display().to_string())
                .collect()
        })
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        names,
        vec![vec!["room/a.rs".to_owned(), "room/b.rs".to_owned()]]
    );
}

#[test]
fn core_top_level_holds_at_most_fifteen_rooms() {
    let src = root().join("core/src");
    let mut entries: Vec<String> = std::fs::read_dir(&src)
        .unwrap_or_else(|e| panic!("read {}: {e}", src.display()))
        .map(|e| {
            e.expect("dir entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|name| !name.starts_with('.'))
        .collect();
    entries.sort();
    assert!(
        entries.len() <= CORE_TOP_LEVEL_MAX,
        "core/src holds {} entries, at most {CORE_TOP_LEVEL_MAX} may stand there (put the file \
         in the room that uses it): {}",
        entries.len(),
        entries.join(", ")
    );
}

#[test]
fn no_file_stands_beside_a_folder_of_its_submodules() {
    let mut wrong = Vec::new();
    for dir in CRATES {
        let mut pending = vec![root().join(dir).join("src")];
        while let Some(d) = pending.pop() {
            for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
                let path = entry.expect("dir entry").path();
                if path.is_dir() {
                    pending.push(path.clone());
                    let beside = path.with_extension("rs");
                    let only_tests = std::fs::read_dir(&path)
                        .map(|it| {
                            it.flatten()
                                .all(|e| e.file_name() == "tests.rs" || e.path().is_dir())
                        })
                        .unwrap_or(true);
                    if beside.is_file() && !only_tests {
                        wrong.push(format!(
                            "{} beside {}/ (make it {}/mod.rs)",
                            rel(&beside),
                            rel(&path),
                            rel(&path)
                        ));
                    }
                }
            }
        }
    }
    wrong.sort();
    assert!(
        wrong.is_empty(),
        "files beside folders of their submodules:\n{}",
        wrong.join("\n")
    );
}
