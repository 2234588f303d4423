//! No module of the workspace imports another in a cycle — at any level: between the top-level
//! modules of a crate, and between the files (and inline modules) within every folder.
//!
//! The check reads each crate's sources from its root (`src/lib.rs`, `src/main.rs`, a `[lib]` or
//! `[[bin]]` path), follows its `mod` declarations to build the module tree, and collects every
//! path one module names: `crate::a::b`, `super::x`, `self::x`, a child module's name, in `use`
//! trees and in code, outside comments, string literals and `#[cfg(test)]` items. A path resolves
//! to the deepest module it names, through `pub use` re-exports. Each reference from module `A`
//! to module `B` counts at the level where their paths part: `crate::session::actor` naming
//! `crate::session::directory::Lease` is an edge `actor → directory` among the children of
//! `session`; naming `crate::session_log::SessionLog` is an edge `session → session_log` among the
//! crate's top-level modules. A module naming its own ancestors (`super::SessionError`) or its
//! descendants (`mod` and `pub use` of its children) adds no edge: that is the tree itself.
//!
//! `MODULE_GRAPH_DUMP=1` prints every level's graph (to see what an edge comes from).
//!
//! A cycle means two modules cannot be understood — or changed — one without the other; the
//! layout (docs/architecture.md) keeps the pure cores at the bottom, shared definitions in
//! leaves, and each actor depending only on what it drives.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A token of Rust source, as far as module paths go.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Ident(String),
    /// A string literal's contents (kept for `#[path = "…"]`).
    Str(String),
    /// `::`
    Sep,
    Punct(char),
}

/// The tokens of `source`, without comments, char literals and lifetimes.
fn lex(source: &str) -> Vec<Tok> {
    let chars: Vec<char> = source.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c.is_whitespace() {
            i += 1;
        } else if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == '"' {
            let mut text = String::new();
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                if let Some(&c) = chars.get(i) {
                    text.push(c);
                }
                i += 1;
            }
            i += 1;
            tokens.push(Tok::Str(text));
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{1F600}'), or a lifetime ('a, 'static).
            if next == Some('\\') {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
            }
        } else if c.is_alphanumeric()
            || c == '_'
            || (c == '$' && next.is_some_and(char::is_alphabetic))
        {
            let start = i;
            i += 1;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let raw = matches!(word.as_str(), "r" | "br" | "cr")
                && matches!(chars.get(i), Some('"') | Some('#'));
            if raw {
                // A raw string: r"…", r#"…"#.
                let mut hashes = 0;
                while chars.get(i) == Some(&'#') {
                    hashes += 1;
                    i += 1;
                }
                if chars.get(i) != Some(&'"') {
                    // `r#ident`: a raw identifier.
                    let start = i;
                    while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                        i += 1;
                    }
                    tokens.push(Tok::Ident(chars[start..i].iter().collect()));
                    continue;
                }
                i += 1;
                let start = i;
                loop {
                    if i >= chars.len() {
                        break;
                    }
                    if chars[i] == '"' && (1..=hashes).all(|k| chars.get(i + k) == Some(&'#')) {
                        break;
                    }
                    i += 1;
                }
                tokens.push(Tok::Str(chars[start..i.min(chars.len())].iter().collect()));
                i += 1 + hashes;
            } else if matches!(word.as_str(), "b" | "c") && chars.get(i) == Some(&'\'') {
                // A byte literal: b'x' — the quote is lexed next, as a char literal.
            } else {
                tokens.push(Tok::Ident(word));
            }
        } else if c == ':' && next == Some(':') {
            tokens.push(Tok::Sep);
            i += 2;
        } else {
            tokens.push(Tok::Punct(c));
            i += 1;
        }
    }
    tokens
}

/// The index just past the bracketed group opening at `start` (`(`, `[` or `{`).
fn group_end(tokens: &[Tok], start: usize) -> usize {
    let mut depth = 0usize;
    for (index, token) in tokens.iter().enumerate().skip(start) {
        match token {
            Tok::Punct('(' | '[' | '{') => depth += 1,
            Tok::Punct(')' | ']' | '}') => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return index + 1;
                }
            }
            _ => {}
        }
    }
    tokens.len()
}

/// The index just past the item starting at `start`: its `;` at depth 0, or the `}` closing its
/// body (and a `;` right after it).
fn item_end(tokens: &[Tok], start: usize) -> usize {
    let mut index = start;
    while index < tokens.len() {
        match &tokens[index] {
            Tok::Punct(';') => return index + 1,
            Tok::Punct('{') => {
                let end = group_end(tokens, index);
                return if tokens.get(end) == Some(&Tok::Punct(';')) { end + 1 } else { end };
            }
            Tok::Punct('(' | '[') => index = group_end(tokens, index),
            _ => index += 1,
        }
    }
    tokens.len()
}

fn ident(token: Option<&Tok>) -> Option<&str> {
    match token {
        Some(Tok::Ident(name)) => Some(name),
        _ => None,
    }
}

/// One module of a crate: its path from the crate root, and its own tokens (without its child
/// modules' and without its `#[cfg(test)]` items).
#[derive(Debug)]
struct Module {
    path: Vec<String>,
    tokens: Vec<Tok>,
    children: BTreeSet<String>,
}

/// Reads the module at `path` from `tokens` (a file, or an inline module's body) and, through its
/// `mod` declarations, its descendants. `file_dir`: the directory of the file it is in;
/// `children_dir`: where its children's files are.
fn read_module(
    path: Vec<String>,
    tokens: &[Tok],
    file_dir: &Path,
    children_dir: &Path,
    read: &dyn Fn(&Path) -> Option<String>,
    modules: &mut Vec<Module>,
) {
    let mut own = Vec::new();
    let mut children = BTreeSet::new();
    let mut index = 0;
    while index < tokens.len() {
        // The item's outer attributes (inner ones, `#![…]`, are skipped the same way).
        let mut test_only = false;
        let mut path_attr = None;
        while tokens.get(index) == Some(&Tok::Punct('#')) {
            let mut open = index + 1;
            if tokens.get(open) == Some(&Tok::Punct('!')) {
                open += 1;
            }
            if tokens.get(open) != Some(&Tok::Punct('[')) {
                break;
            }
            let end = group_end(tokens, open);
            let inside = &tokens[open + 1..end - 1];
            let cfg = |flag: &str| {
                inside
                    == [
                        Tok::Ident("cfg".into()),
                        Tok::Punct('('),
                        Tok::Ident(flag.into()),
                        Tok::Punct(')'),
                    ]
            };
            test_only |= cfg("test") || cfg("doctest");
            if let [Tok::Ident(name), Tok::Punct('='), Tok::Str(value)] = inside
                && name == "path"
            {
                path_attr = Some(value.clone());
            }
            index = end;
        }
        if index >= tokens.len() {
            break;
        }
        let start = index;
        // Visibility, then `mod name;` or `mod name { … }`.
        let mut at = start;
        if ident(tokens.get(at)) == Some("pub") {
            at += 1;
            if tokens.get(at) == Some(&Tok::Punct('(')) {
                at = group_end(tokens, at);
            }
        }
        let declared = (ident(tokens.get(at)) == Some("mod"))
            .then(|| ident(tokens.get(at + 1)).map(str::to_owned))
            .flatten();
        let end = item_end(tokens, start);
        if test_only {
            index = end;
            continue;
        }
        match (declared, tokens.get(at + 2)) {
            (Some(name), Some(Tok::Punct(';'))) => {
                let candidates = match &path_attr {
                    Some(relative) => vec![file_dir.join(relative)],
                    None => vec![
                        children_dir.join(format!("{name}.rs")),
                        children_dir.join(&name).join("mod.rs"),
                    ],
                };
                let (file, source) = candidates
                    .iter()
                    .find_map(|file| read(file).map(|source| (file.clone(), source)))
                    .unwrap_or_else(|| panic!("module {name}: none of {candidates:?} reads"));
                let dir = file.parent().unwrap().to_path_buf();
                let grandchildren = if file.file_name().unwrap() == "mod.rs" {
                    dir.clone()
                } else {
                    dir.join(file.file_stem().unwrap())
                };
                let mut child = path.clone();
                child.push(name.clone());
                read_module(child, &lex(&source), &dir, &grandchildren, read, modules);
                children.insert(name);
            }
            (Some(name), Some(Tok::Punct('{'))) => {
                let body = &tokens[at + 3..end - 1];
                let mut child = path.clone();
                child.push(name.clone());
                let dir = children_dir.join(&name);
                read_module(child, body, file_dir, &dir, read, modules);
                children.insert(name);
            }
            _ => own.extend_from_slice(&tokens[start..end]),
        }
        index = end;
    }
    modules.push(Module { path, tokens: own, children });
}

/// The paths of a `use` tree starting at `tokens[index]`, each with the name it binds; the index
/// past the tree.
fn use_tree(
    tokens: &[Tok],
    mut index: usize,
    prefix: &[String],
) -> (Vec<(Vec<String>, String)>, usize) {
    let mut path = prefix.to_vec();
    let mut found = Vec::new();
    loop {
        match tokens.get(index) {
            Some(Tok::Sep) => index += 1,
            Some(Tok::Ident(name)) if name == "as" => {
                let alias = ident(tokens.get(index + 1)).unwrap_or("_").to_owned();
                found.push((path, alias));
                return (found, index + 2);
            }
            Some(Tok::Ident(name)) if name == "self" && !path.is_empty() => {
                // `a::{self}` binds `a`; a leading `self::` is kept to resolve.
                index += 1;
            }
            Some(Tok::Ident(name)) => {
                path.push(name.clone());
                index += 1;
            }
            Some(Tok::Punct('*')) => {
                found.push((path, "*".to_owned()));
                return (found, index + 1);
            }
            Some(Tok::Punct('{')) => {
                index += 1;
                loop {
                    match tokens.get(index) {
                        Some(Tok::Punct('}')) | None => return (found, index + 1),
                        Some(Tok::Punct(',')) => index += 1,
                        _ => {
                            let (inner, next) = use_tree(tokens, index, &path);
                            found.extend(inner);
                            index = next;
                        }
                    }
                }
            }
            _ => {
                let name = path.last().cloned().unwrap_or_default();
                found.push((path, name));
                return (found, index);
            }
        }
    }
}

/// The paths a module's own tokens name (`use` trees and paths in code), and those it re-exports
/// (`pub use`: the name it binds → the path).
fn paths(tokens: &[Tok]) -> (Vec<Vec<String>>, BTreeMap<String, Vec<String>>) {
    let mut named = Vec::new();
    let mut exports = BTreeMap::new();
    let mut index = 0;
    while index < tokens.len() {
        match &tokens[index] {
            Tok::Ident(word) if word == "use" => {
                let public = index > 0
                    && (ident(tokens.get(index - 1)) == Some("pub")
                        || tokens.get(index - 1) == Some(&Tok::Punct(')')));
                let (tree, next) = use_tree(tokens, index + 1, &[]);
                for (path, alias) in tree {
                    if public && alias != "*" {
                        exports.insert(alias, path.clone());
                    }
                    named.push(path);
                }
                index = next;
            }
            Tok::Ident(first) if tokens.get(index + 1) == Some(&Tok::Sep) => {
                let preceded = index > 0 && tokens[index - 1] == Tok::Sep;
                let mut path = vec![first.clone()];
                index += 1;
                while tokens.get(index) == Some(&Tok::Sep) {
                    match ident(tokens.get(index + 1)) {
                        Some(name) => path.push(name.to_owned()),
                        None => break,
                    }
                    index += 2;
                }
                if !preceded {
                    named.push(path);
                }
            }
            _ => index += 1,
        }
    }
    (named, exports)
}

/// A crate's module tree and the references between its modules.
#[derive(Debug)]
struct Crate {
    name: String,
    /// Every module's path → its children.
    children: BTreeMap<Vec<String>, BTreeSet<String>>,
    /// Module → the modules it names.
    edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
}

impl Crate {
    /// Reads the crate whose root file is `root` (through `read`, so a test can give files of its
    /// own).
    fn read(name: &str, root: &Path, read: &dyn Fn(&Path) -> Option<String>) -> Self {
        let source = read(root).unwrap_or_else(|| panic!("{}: cannot read", root.display()));
        let dir = root.parent().unwrap();
        let mut modules = Vec::new();
        read_module(Vec::new(), &lex(&source), dir, dir, read, &mut modules);
        let children: BTreeMap<_, _> =
            modules.iter().map(|m| (m.path.clone(), m.children.clone())).collect();
        let mut named = BTreeMap::new();
        let mut exports = BTreeMap::new();
        for module in &modules {
            let (paths, exported) = paths(&module.tokens);
            named.insert(module.path.clone(), paths);
            exports.insert(module.path.clone(), exported);
        }
        let mut krate = Self { name: name.to_owned(), children, edges: BTreeMap::new() };
        for (from, paths) in &named {
            let targets: BTreeSet<_> = paths
                .iter()
                .filter_map(|path| krate.absolute(from, path))
                .map(|path| krate.resolve(&path, &exports, 0))
                .collect();
            krate.edges.insert(from.clone(), targets);
        }
        krate
    }

    /// `path`, named in module `from`, from the crate root; `None` when it is not the crate's
    /// (another crate, or an item in scope).
    fn absolute(&self, from: &[String], path: &[String]) -> Option<Vec<String>> {
        let first = path.first()?;
        let (mut base, rest) = match first.as_str() {
            "crate" | "$crate" => (Vec::new(), &path[1..]),
            "self" | "super" => (from.to_vec(), path),
            child if self.children[from].contains(child) => (from.to_vec(), path),
            _ => return None,
        };
        for segment in rest {
            match segment.as_str() {
                "super" => {
                    base.pop()?;
                }
                "self" => {}
                name => base.push(name.to_owned()),
            }
        }
        Some(base)
    }

    /// The deepest module an absolute path names, following re-exports.
    fn resolve(
        &self,
        path: &[String],
        exports: &BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>>,
        depth: usize,
    ) -> Vec<String> {
        let mut module = Vec::new();
        for (index, segment) in path.iter().enumerate() {
            if self.children[&module].contains(segment) {
                module.push(segment.clone());
                continue;
            }
            let exported = exports.get(&module).and_then(|e| e.get(segment));
            if let Some(target) = exported
                && depth < 8
                && let Some(target) = self.absolute(&module, target)
            {
                let mut through = target;
                through.extend(path[index + 1..].iter().cloned());
                return self.resolve(&through, exports, depth + 1);
            }
            break;
        }
        module
    }

    /// For every module with children, the graph among its children: module `a` names something
    /// under sibling `b` (or `a`'s descendants do) — see the module docs.
    fn levels(&self) -> BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> {
        let mut levels: BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
        for (parent, children) in &self.children {
            if !children.is_empty() {
                let level = levels.entry(parent.clone()).or_default();
                for child in children {
                    level.entry(child.clone()).or_default();
                }
            }
        }
        for (from, targets) in &self.edges {
            for to in targets {
                let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
                if common == from.len() || common == to.len() {
                    // An ancestor or a descendant (or itself): the tree, not an edge.
                    continue;
                }
                let level = levels.get_mut(&from[..common]).unwrap();
                level.get_mut(&from[common]).unwrap().insert(to[common].clone());
            }
        }
        levels
    }

    /// Every cycle, one per knot (modules that all reach one another), each as
    /// `crate: a::b → a::c → a::b`.
    fn cycles(&self) -> Vec<String> {
        let mut found = Vec::new();
        for (parent, graph) in self.levels() {
            let prefix: String = parent.iter().map(|p| format!("{p}::")).collect();
            for knot in knots(&graph) {
                let cycle = cycle(&knot).expect("a knot has a cycle");
                let named: Vec<String> = cycle.iter().map(|m| format!("{prefix}{m}")).collect();
                let members: Vec<&str> = knot.keys().map(String::as_str).collect();
                let (name, cycle) = (&self.name, named.join(" → "));
                let knot = members.join(", ");
                found.push(format!("{name}: {cycle} (in a knot of {prefix}{{{knot}}})"));
            }
        }
        found
    }
}

/// The knots of `graph` (its strongly connected components of more than one node), each as a
/// graph of its own.
fn knots(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeMap<String, BTreeSet<String>>> {
    let reach = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(node) = stack.pop() {
            for next in graph.get(&node).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|node| (node, reach(node))).collect();
    let mut placed = BTreeSet::new();
    let mut knots = Vec::new();
    for node in graph.keys() {
        if placed.contains(node) || !reaches[node].contains(node) {
            continue;
        }
        let members: BTreeSet<String> =
            reaches[node].iter().filter(|other| reaches[*other].contains(node)).cloned().collect();
        if members.len() < 2 {
            continue;
        }
        let knot = members
            .iter()
            .map(|m| (m.clone(), graph[m].intersection(&members).cloned().collect()))
            .collect();
        placed.extend(members);
        knots.push(knot);
    }
    knots
}

/// A cycle in `graph`, if there is one (depth-first search).
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|n| n == node) {
            let mut found = path[start..].to_vec();
            found.push(node.to_owned());
            return Some(found);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, graph, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

/// The workspace's members (`members = […]` in its manifest), each with its crate roots: the
/// files under `src/` its manifest names, and `src/lib.rs`, `src/main.rs`.
fn workspace() -> Vec<(String, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let members = manifest
        .lines()
        .find_map(|line| line.trim().strip_prefix("members = ["))
        .expect("the workspace lists its members on one line");
    let mut crates = Vec::new();
    for member in members.trim_end_matches(']').split(',') {
        let member = member.trim().trim_matches('"');
        if member.is_empty() {
            continue;
        }
        let dir = root.join(member);
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        let mut roots: BTreeSet<PathBuf> = ["src/lib.rs", "src/main.rs"]
            .iter()
            .map(|file| dir.join(file))
            .filter(|file| file.exists())
            .collect();
        for line in manifest.lines() {
            if let Some(path) = line.trim().strip_prefix("path = \"") {
                let path = path.trim_end_matches('"');
                if path.starts_with("src/") {
                    roots.insert(dir.join(path));
                }
            }
        }
        assert!(!roots.is_empty(), "{member}: no crate root found");
        for file in roots {
            let name = format!("{member}/{}", file.strip_prefix(&dir).unwrap().display());
            crates.push((name, file));
        }
    }
    crates
}

#[test]
fn no_module_of_the_workspace_imports_another_in_a_cycle() {
    let read = |path: &Path| std::fs::read_to_string(path).ok();
    let crates: Vec<Crate> =
        workspace().iter().map(|(name, root)| Crate::read(name, root, &read)).collect();
    let names: Vec<&str> = crates.iter().map(|c| c.name.as_str()).collect();
    for expected in ["runtime/src/lib.rs", "event/src/lib.rs", "./src/rein_cli.rs", "./src/main.rs"]
    {
        assert!(names.contains(&expected), "every crate is read: {names:?}");
    }
    let modules: usize = crates.iter().map(|c| c.children.len()).sum();
    assert!(modules > 200, "the sources were read: {modules} modules");
    let runtime = crates.iter().find(|c| c.name == "runtime/src/lib.rs").unwrap();
    let session = runtime.levels().remove(&Vec::new()).unwrap().remove("session").unwrap();
    assert!(session.contains("session_log"), "references are found: {session:?}");
    let cycles: Vec<String> = crates.iter().flat_map(Crate::cycles).collect();
    if std::env::var_os("MODULE_GRAPH_DUMP").is_some() {
        for krate in &crates {
            for (parent, graph) in krate.levels() {
                eprintln!("{} {}: {graph:?}", krate.name, parent.join("::"));
            }
        }
    }
    assert!(
        cycles.is_empty(),
        "modules import one another in a cycle (cut one of its edges):\n{}",
        cycles.join("\n")
    );
}

/// The check itself, on a crate of its own: it finds the cycles there are, at every level.
#[test]
fn the_check_finds_a_cycle_when_there_is_one() {
    let files: BTreeMap<PathBuf, &str> = [
        ("src/lib.rs", "pub mod a;\nmod b;\n#[cfg(test)]\nmod tests;\npub use b::Thing;\nmod c { pub(crate) use crate::a::x::X; }"),
        // Within `a`: x → y (through a group), y → x (through `super`): a cycle.
        ("src/a.rs", "mod x;\nmod y;\nuse crate::Thing; // crate::c\n"),
        ("src/a/x.rs", "use super::{y::Y, Z};\npub struct X;\n"),
        ("src/a/y.rs", "pub struct Y(super::x::X);\n/// super::z\nconst S: &str = \"crate::b\";\nconst R: &str = r#\"crate::c\"#;\n"),
        // Top level: b → a (naming `crate::a::x` in code); a → b through the root's re-export.
        // A brace in a char literal does not unbalance the items; a lifetime is no char literal.
        ("src/b/mod.rs", "pub struct Thing;\nfn f<'a>(_: &'a str) -> char { let _ = crate::a::x::X; '{' }\n#[cfg(test)]\nfn g() { crate::c::X; }\n#[path = \"elsewhere.rs\"]\nmod d;"),
        ("src/b/elsewhere.rs", "use self::super::super::c;"),
        ("src/tests.rs", "use crate::c;"),
    ]
    .into_iter()
    .map(|(path, text)| (PathBuf::from(path), text))
    .collect();
    let read = |path: &Path| files.get(path).map(|text| (*text).to_owned());
    let krate = Crate::read("demo", Path::new("src/lib.rs"), &read);
    let modules: Vec<String> = krate.children.keys().map(|p| p.join("::")).collect();
    assert_eq!(modules, ["", "a", "a::x", "a::y", "b", "b::d", "c"], "{krate:?}");
    let levels = krate.levels();
    let top = &levels[&Vec::new()];
    assert_eq!(
        top["a"],
        ["b".to_owned()].into(),
        "a names Thing, which the root re-exports from b"
    );
    assert_eq!(
        top["b"],
        ["a", "c"].map(String::from).into(),
        "b names a::x in code (its test is skipped), b::d names c through `self::super::super`"
    );
    assert_eq!(top["c"], ["a".to_owned()].into(), "an inline module is a module");
    assert_eq!(
        krate.cycles(),
        [
            "demo: a → b → a (in a knot of {a, b, c})",
            "demo: a::x → a::y → a::x (in a knot of a::{x, y})"
        ],
        "comments and strings name nothing: {levels:?}"
    );
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    graph.insert("a".into(), ["b".to_owned()].into());
    graph.insert("b".into(), ["c".to_owned()].into());
    graph.insert("c".into(), ["a".to_owned()].into());
    graph.insert("d".into(), ["a".to_owned()].into());
    assert_eq!(cycle(&graph), Some(vec!["a".into(), "b".into(), "c".into(), "a".into()]));
    graph.get_mut("c").unwrap().clear();
    assert_eq!(cycle(&graph), None);
}
