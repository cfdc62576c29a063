//! The layering of `src/`: no two top-level folders import each other, and
//! no two files (or sub-folders) of one folder do.
//!
//! The check reads the sources with `std` only: every `crate::…`,
//! `$crate::…`, `super::…` and `self::…` path outside comments and string
//! literals (grouped `use a::{b, c::d}` included), and `use child::…` paths
//! relative to the current module. A path is resolved to the file that
//! defines its item, following the `pub use` re-exports of `mod.rs` /
//! `lib.rs` facades and `#[macro_export]` macros; a facade's own `pub use`
//! lines are not imports (they are how a folder shows its contents).
//! `#[cfg(test)]` modules count: a test that needs a higher layer belongs in
//! `tests/`. `src/bin/` is a separate crate and is skipped.
//!
//! At every directory level, the children (files and sub-folders) are the
//! nodes of a graph with an edge where a file under one child uses an item
//! under another; a strongly connected component of more than one node is a
//! cycle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A module path below the crate root (`["graph", "fgraph"]`; the root is empty).
type ModPath = Vec<String>;

/// Cycles known today and removed by work under way elsewhere, as
/// `(folder, members)`. An entry that no longer matches a cycle fails the
/// test, so the list cannot go stale.
const KNOWN_CYCLES: &[(&str, &[&str])] = &[];

/// The sources of a crate: module path -> (text without comments and
/// literals, whether the file is a `mod.rs` / `lib.rs` facade).
struct Crate {
    modules: BTreeMap<ModPath, (String, bool)>,
    macros: BTreeMap<String, ModPath>,
    /// Per module, its `pub use` re-exports: name -> path, and glob paths.
    reexports: BTreeMap<ModPath, Reexports>,
}

/// The `pub use` re-exports of one module: name -> path, and glob paths.
type Reexports = (BTreeMap<String, Vec<String>>, Vec<Vec<String>>);

/// Blanks comments, string and char literals (keeping line breaks), so that
/// paths in docs and messages are not taken for imports.
fn strip(src: &str) -> String {
    let b: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let blank = |out: &mut String, s: &[char]| {
        out.extend(s.iter().map(|&c| if c == '\n' { '\n' } else { ' ' }));
    };
    while i < b.len() {
        let ident_before = i > 0 && (b[i - 1].is_alphanumeric() || b[i - 1] == '_');
        if b[i] == '/' && b.get(i + 1) == Some(&'/') {
            let end = (i..b.len()).find(|&j| b[j] == '\n').unwrap_or(b.len());
            blank(&mut out, &b[i..end]);
            i = end;
        } else if b[i] == '/' && b.get(i + 1) == Some(&'*') {
            let (mut depth, mut j) = (0, i);
            while j < b.len() {
                if b[j] == '/' && b.get(j + 1) == Some(&'*') {
                    depth += 1;
                    j += 2;
                } else if b[j] == '*' && b.get(j + 1) == Some(&'/') {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank(&mut out, &b[i..j.min(b.len())]);
            i = j.min(b.len());
        } else if b[i] == 'r' && !ident_before && matches!(b.get(i + 1), Some('"') | Some('#')) {
            let hashes = b[i + 1..].iter().take_while(|&&c| c == '#').count();
            if b.get(i + 1 + hashes) != Some(&'"') {
                out.push(b[i]);
                i += 1;
                continue;
            }
            let mut j = i + 2 + hashes;
            while j < b.len()
                && !(b[j] == '"'
                    && b[j + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|&&c| c == '#')
                        .count()
                        == hashes)
            {
                j += 1;
            }
            let end = (j + 1 + hashes).min(b.len());
            blank(&mut out, &b[i..end]);
            i = end;
        } else if b[i] == '"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != '"' {
                j += if b[j] == '\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(b.len());
            blank(&mut out, &b[i..end]);
            i = end;
        } else if b[i] == '\'' {
            // A char literal ('a', '\n', '\u{..}'), else a lifetime.
            let end = if b.get(i + 1) == Some(&'\\') {
                (i + 2..b.len()).find(|&j| b[j] == '\'').map(|j| j + 1)
            } else if b.get(i + 2) == Some(&'\'') {
                Some(i + 3)
            } else {
                None
            };
            match end {
                Some(end) => {
                    blank(&mut out, &b[i..end]);
                    i = end;
                }
                None => {
                    out.push(b[i]);
                    i += 1;
                }
            }
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Parses the path starting at `i` (`a::b::{c, d::*}`) into its expansions.
fn parse_path(b: &[char], mut i: usize) -> Vec<Vec<String>> {
    let skip_ws = |i: &mut usize| {
        while *i < b.len() && b[*i].is_whitespace() {
            *i += 1;
        }
    };
    let mut prefix = Vec::new();
    loop {
        skip_ws(&mut i);
        if i < b.len() && b[i] == '{' {
            return parse_group(b, i + 1)
                .into_iter()
                .map(|tail| prefix.iter().cloned().chain(tail).collect())
                .collect();
        }
        if i < b.len() && b[i] == '*' {
            prefix.push("*".to_string());
            return vec![prefix];
        }
        let start = i;
        if i < b.len() && b[i] == '$' {
            i += 1;
        }
        while i < b.len() && is_ident_char(b[i]) {
            i += 1;
        }
        if i == start {
            return vec![prefix];
        }
        prefix.push(b[start..i].iter().collect());
        skip_ws(&mut i);
        if b.get(i) == Some(&':') && b.get(i + 1) == Some(&':') {
            i += 2;
        } else {
            return vec![prefix];
        }
    }
}

/// Parses the comma-separated paths of a group whose `{` precedes `i`.
fn parse_group(b: &[char], i: usize) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0usize, i);
    for j in i..b.len() {
        match b[j] {
            '{' => depth += 1,
            '}' if depth == 0 => {
                out.extend(parse_path(b, start));
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                out.extend(parse_path(b, start));
                start = j + 1;
            }
            _ => {}
        }
    }
    out.retain(|p| !p.is_empty());
    out
}

/// The `pub use` re-exports of a module's (stripped) text.
fn reexports_of(text: &str) -> Reexports {
    let mut named = BTreeMap::new();
    let mut globs = Vec::new();
    let b: Vec<char> = text.chars().collect();
    for pos in use_keywords(&b) {
        if !in_pub_use(&b, pos) {
            continue;
        }
        for path in parse_path(&b, pos + 4) {
            match path.last().map(String::as_str) {
                Some("*") => globs.push(path[..path.len() - 1].to_vec()),
                Some(name) => {
                    named.insert(name.to_string(), path.clone());
                }
                None => {}
            }
        }
    }
    (named, globs)
}

/// The `(start, end, name)` of every inline `mod name { … }` block.
fn inline_mods(b: &[char]) -> Vec<(usize, usize, String)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i + 4 < b.len() {
        let at_word =
            b[i..].starts_with(&['m', 'o', 'd', ' ']) && (i == 0 || !is_ident_char(b[i - 1]));
        if at_word {
            let mut j = i + 4;
            let name_start = j;
            while j < b.len() && is_ident_char(b[j]) {
                j += 1;
            }
            let name: String = b[name_start..j].iter().collect();
            while j < b.len() && b[j].is_whitespace() {
                j += 1;
            }
            if !name.is_empty() && b.get(j) == Some(&'{') {
                let mut depth = 0;
                let mut k = j;
                while k < b.len() {
                    match b[k] {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    k += 1;
                }
                out.push((i, k, name));
            }
        }
        i += 1;
    }
    out
}

/// Whether `pos` is in a `pub use` / `pub(…) use` statement (at its `use`
/// keyword or in its path).
fn in_pub_use(b: &[char], pos: usize) -> bool {
    let start = b[..pos]
        .iter()
        .rposition(|&c| c == ';' || c == '{' || c == '}')
        .map_or(0, |p| p + 1);
    let mut stmt: String = b[start..pos].iter().collect();
    if starts_with(&b[pos..], "use ") {
        stmt.push_str("use ");
    }
    let words: Vec<&str> = stmt.split_whitespace().collect();
    match words.iter().position(|&w| w == "use") {
        Some(k) if k > 0 => words[k - 1] == "pub" || words[k - 1].starts_with("pub("),
        _ => false,
    }
}

fn starts_with(b: &[char], word: &str) -> bool {
    b.iter().take(word.len()).copied().eq(word.chars())
}

/// The positions of the `use` keywords in `b`.
fn use_keywords(b: &[char]) -> impl Iterator<Item = usize> + '_ {
    (0..b.len()).filter(|&i| starts_with(&b[i..], "use ") && (i == 0 || !is_ident_char(b[i - 1])))
}

impl Crate {
    /// Reads every `.rs` file under `src` (but `src/bin/`).
    fn read(src: &Path) -> Crate {
        let mut files = Vec::new();
        let mut stack = vec![src.to_path_buf()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).expect("readable source folder") {
                let path = entry.expect("readable entry").path();
                if path.is_dir() {
                    if path != src.join("bin") {
                        stack.push(path);
                    }
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let rel = path.strip_prefix(src).expect("below src");
                    let mut m: ModPath = rel
                        .with_extension("")
                        .components()
                        .map(|c| c.as_os_str().to_string_lossy().into_owned())
                        .collect();
                    let facade = matches!(m.last().map(String::as_str), Some("mod" | "lib"));
                    if facade {
                        m.pop();
                    }
                    let text = std::fs::read_to_string(&path).expect("readable source");
                    files.push((m, text, facade));
                }
            }
        }
        Crate::from_sources(files)
    }

    /// A crate from `(module path, source, is a facade)` triples.
    fn from_sources(files: Vec<(ModPath, String, bool)>) -> Crate {
        let mut modules = BTreeMap::new();
        let mut macros = BTreeMap::new();
        let mut all_reexports = BTreeMap::new();
        for (m, text, facade) in files {
            let text = strip(&text);
            let mut rest = text.as_str();
            while let Some(p) = rest.find("#[macro_export]") {
                rest = &rest[p + 15..];
                let after = rest.trim_start();
                if let Some(def) = after.strip_prefix("macro_rules!") {
                    let name: String = def
                        .trim_start()
                        .chars()
                        .take_while(|&c| is_ident_char(c))
                        .collect();
                    macros.insert(name, m.clone());
                }
            }
            let reexports = reexports_of(&text);
            modules.insert(m.clone(), (text, facade));
            all_reexports.insert(m, reexports);
        }
        Crate {
            modules,
            macros,
            reexports: all_reexports,
        }
    }

    fn is_module(&self, m: &[String]) -> bool {
        self.modules.contains_key(m)
    }

    /// `path`, written in module `ctx`, as a path from the crate root; None
    /// for a path into another crate.
    fn absolute(&self, ctx: &[String], path: &[String]) -> Option<Vec<String>> {
        let first = path.first()?;
        // `use super::{self, x}` names the module itself.
        let path: Vec<String> = std::iter::once(first.clone())
            .chain(path[1..].iter().filter(|s| *s != "self").cloned())
            .collect();
        let path = path.as_slice();
        match first.as_str() {
            "crate" | "$crate" => Some(path[1..].to_vec()),
            "self" => Some(ctx.iter().chain(&path[1..]).cloned().collect()),
            "super" => {
                let ups = path.iter().take_while(|s| *s == "super").count();
                let base = &ctx[..ctx.len().checked_sub(ups)?];
                Some(base.iter().chain(&path[ups..]).cloned().collect())
            }
            _ => {
                let local: Vec<String> = ctx.iter().chain(path).cloned().collect();
                self.is_module(&local[..ctx.len() + 1]).then_some(local)
            }
        }
    }

    /// The module (file) that defines the item `path` (from the crate root).
    fn resolve(&self, path: &[String], depth: usize) -> ModPath {
        if let Some(m) = path.first().and_then(|f| self.macros.get(f)) {
            return m.clone();
        }
        let mut cur: ModPath = Vec::new();
        for (k, seg) in path.iter().enumerate() {
            let mut next = cur.clone();
            next.push(seg.clone());
            if self.is_module(&next) {
                cur = next;
                continue;
            }
            if depth > 16 {
                return cur;
            }
            let (named, globs) = &self.reexports[&cur];
            if let Some(target) = named.get(seg) {
                return match self.absolute(&cur, target) {
                    Some(abs) => {
                        let full: Vec<String> = abs
                            .into_iter()
                            .chain(path[k + 1..].iter().cloned())
                            .collect();
                        self.resolve(&full, depth + 1)
                    }
                    None => cur,
                };
            }
            for g in globs {
                if let Some(abs) = self.absolute(&cur, g) {
                    let full: Vec<String> =
                        abs.into_iter().chain(path[k..].iter().cloned()).collect();
                    return self.resolve(&full, depth + 1);
                }
            }
            return cur;
        }
        cur
    }

    /// Every import edge between distinct files: `from -> {to}`.
    fn edges(&self) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
        let mut edges: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
        for (m, (text, facade)) in &self.modules {
            let b: Vec<char> = text.chars().collect();
            let mods = inline_mods(&b);
            let ctx_at = |pos: usize| -> ModPath {
                let mut ctx = m.clone();
                ctx.extend(
                    mods.iter()
                        .filter(|(s, e, _)| *s < pos && pos < *e)
                        .map(|(_, _, n)| n.clone()),
                );
                ctx
            };
            let mut add = |from_ctx: &[String], path: &[String]| {
                if let Some(abs) = self.absolute(from_ctx, path) {
                    let target = self.resolve(&abs, 0);
                    if &target != m {
                        edges.entry(m.clone()).or_default().insert(target);
                    }
                }
            };
            let mut i = 0;
            while i < b.len() {
                let boundary = i == 0 || !(is_ident_char(b[i - 1]) || b[i - 1] == ':');
                let rooted = ["$crate::", "crate::", "super::", "self::"]
                    .iter()
                    .any(|w| starts_with(&b[i..], w));
                if boundary && rooted {
                    if !(*facade && in_pub_use(&b, i)) {
                        let ctx = ctx_at(i);
                        for path in parse_path(&b, i) {
                            add(&ctx, &path);
                        }
                    }
                } else if boundary
                    && starts_with(&b[i..], "use ")
                    && !(*facade && in_pub_use(&b, i))
                {
                    let ctx = ctx_at(i);
                    for path in parse_path(&b, i + 4) {
                        let rel = path.first().is_some_and(|f| {
                            !["crate", "$crate", "super", "self"].contains(&f.as_str())
                        });
                        if rel {
                            add(&ctx, &path);
                        }
                    }
                }
                i += 1;
            }
        }
        edges
    }
}

/// The cycles at every directory level: `(folder, members)`, members sorted.
fn cycles(edges: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Vec<(String, Vec<String>)> {
    let mut dirs: BTreeSet<ModPath> = BTreeSet::new();
    for m in edges.keys().chain(edges.values().flatten()) {
        for k in 0..m.len() {
            dirs.insert(m[..k].to_vec());
        }
    }
    let mut out = Vec::new();
    for dir in dirs {
        // Children of `dir`; `dir`'s own file (its mod.rs) is "<mod>".
        let child = |m: &ModPath| -> Option<String> {
            if !m.starts_with(&dir) {
                return None;
            }
            Some(
                m.get(dir.len())
                    .cloned()
                    .unwrap_or_else(|| "<mod>".to_string()),
            )
        };
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (from, tos) in edges {
            let Some(a) = child(from) else { continue };
            for to in tos {
                if let Some(b) = child(to) {
                    if a != b {
                        graph.entry(a.clone()).or_default().insert(b);
                    }
                }
            }
        }
        for scc in strongly_connected(&graph) {
            if scc.len() > 1 {
                out.push((dir.join("/"), scc));
            }
        }
    }
    out
}

/// The strongly connected components of `graph` (Tarjan), members sorted.
fn strongly_connected(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        if let Some(ws) = s.graph.get(v) {
            for w in ws {
                if !s.index.contains_key(w.as_str()) {
                    visit(s, w);
                    let lw = s.low[w.as_str()];
                    let lv = s.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(lw);
                } else if s.on_stack.contains(w.as_str()) {
                    let iw = s.index[w.as_str()];
                    let lv = s.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(iw);
                }
            }
        }
        if s.low[v] == s.index[v] {
            let mut scc = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                scc.push(w.to_string());
                if w == v {
                    break;
                }
            }
            scc.sort();
            s.out.push(scc);
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

fn path(s: &str) -> ModPath {
    s.split('/')
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn src_has_no_import_cycles() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let krate = Crate::read(&src);
    let edges = krate.edges();
    // The parser sees the imports it must see (a check of the check).
    for (from, to) in [
        ("ops", "types/dtype"),
        ("graph/fgraph", "ops"),
        ("rewrites/register", "rewriting/optdb"),
        ("gradient/reverse", "gradient/pullback"),
    ] {
        assert!(
            edges
                .get(&path(from))
                .is_some_and(|t| t.contains(&path(to))),
            "the layering check no longer sees {from} -> {to}: its parser is broken"
        );
    }
    let found = cycles(&edges);
    let known: Vec<(String, Vec<String>)> = KNOWN_CYCLES
        .iter()
        .map(|(d, m)| (d.to_string(), m.iter().map(|s| s.to_string()).collect()))
        .collect();
    let new: Vec<_> = found.iter().filter(|c| !known.contains(c)).collect();
    assert!(
        new.is_empty(),
        "import cycles in src/ (folder: members that import each other): {new:?}"
    );
    let gone: Vec<_> = known.iter().filter(|c| !found.contains(c)).collect();
    assert!(
        gone.is_empty(),
        "{gone:?} no longer form a cycle: delete them from KNOWN_CYCLES in tests/layering.rs"
    );
}

/// The check on a small synthetic crate: a cycle through `super::`, a
/// grouped `use`, a re-export through a facade and a doc comment.
#[test]
fn the_check_finds_cycles_and_ignores_facades_and_comments() {
    let src = |m: &str, text: &str, facade: bool| (path(m), text.to_string(), facade);
    let krate = Crate::from_sources(vec![
        src(
            "",
            "pub mod low;\npub mod high;\npub use low::Thing;\n",
            true,
        ),
        src(
            "low",
            "//! See [`crate::high::Top`].\npub mod a;\npub mod b;\npub use a::Thing;\n",
            true,
        ),
        src("low/a", "use super::b::Helper;\npub struct Thing;\n", false),
        src(
            "low/b",
            "use crate::{low::a::Thing, Thing as T2};\npub struct Helper;\n",
            false,
        ),
        src(
            "high",
            "use crate::Thing;\nconst S: &str = \"crate::high\";\npub struct Top;\n",
            false,
        ),
    ]);
    let edges = krate.edges();
    assert_eq!(
        edges.get(&path("high")),
        Some(&BTreeSet::from([path("low/a")]))
    );
    assert_eq!(
        cycles(&edges),
        vec![("low".to_string(), vec!["a".to_string(), "b".to_string()])]
    );
}
