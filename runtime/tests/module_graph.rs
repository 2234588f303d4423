//! The runtime's modules import one another without a cycle: reading the crate's sources, every
//! top-level module's `crate::…` paths (outside comments and tests) form a graph with no cycle.
//!
//! A cycle means two modules cannot be understood — or changed — one without the other; the
//! layout (docs/architecture.md) keeps the pure core at the bottom, the shared context in a leaf,
//! and each actor depending only on what it drives.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The top-level module a source file belongs to (`session/actor.rs` → `session`).
fn module_of(path: &Path, src: &Path) -> String {
    let relative = path.strip_prefix(src).unwrap();
    let first = relative.components().next().unwrap().as_os_str().to_string_lossy().into_owned();
    first.trim_end_matches(".rs").to_owned()
}

/// The source without comments, and without what follows a `#[cfg(test)]` (test modules sit at
/// the end of a file, or in files of their own, which are skipped).
fn code(source: &str) -> String {
    let mut out = String::new();
    for line in source.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]") {
            break;
        }
        if trimmed.starts_with("//") {
            continue;
        }
        let line = line.split(" //").next().unwrap_or_default();
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Every `crate::name` that names a top-level module in `text`.
fn references(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (index, _) in text.match_indices("crate::") {
        let rest = &text[index + "crate::".len()..];
        let name: String =
            rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        if !name.is_empty() {
            found.insert(name);
        }
    }
    found
}

fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let name = path.file_name().unwrap().to_string_lossy();
            if !name.ends_with(".rs") || name == "tests.rs" || name == "lib.rs" {
                continue;
            }
            let module = module_of(&path, src);
            let source = std::fs::read_to_string(&path).unwrap();
            let deps = references(&code(&source));
            graph
                .entry(module.clone())
                .or_default()
                .extend(deps.into_iter().filter(|d| *d != module));
        }
    }
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    for deps in graph.values_mut() {
        deps.retain(|d| modules.contains(d));
    }
    graph
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

#[test]
fn the_runtimes_modules_import_one_another_without_a_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = graph(&src);
    assert!(graph.len() > 20, "the sources were read: {graph:?}");
    assert!(graph["session"].contains("session_log"), "references are found: {graph:?}");
    if let Some(cycle) = cycle(&graph) {
        panic!("the runtime's modules import one another in a cycle: {}", cycle.join(" → "));
    }
}

#[test]
fn the_check_finds_a_cycle_when_there_is_one() {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    graph.insert("a".into(), ["b".to_owned()].into());
    graph.insert("b".into(), ["c".to_owned()].into());
    graph.insert("c".into(), ["a".to_owned()].into());
    graph.insert("d".into(), ["a".to_owned()].into());
    assert_eq!(cycle(&graph), Some(vec!["a".into(), "b".into(), "c".into(), "a".into()]));
    graph.get_mut("c").unwrap().clear();
    assert_eq!(cycle(&graph), None);
    assert_eq!(
        references("use crate::a::b;\nlet x = crate::c::d();"),
        ["a", "c"].map(String::from).into()
    );
    assert_eq!(
        code("use crate::a; // crate::b\n/// crate::c\n#[cfg(test)]\nuse crate::d;"),
        "use crate::a;\n"
    );
}
