//! Every crate is laid out in floors (docs/design.md §10, "Floors"): no
//! module reaches up into a module that uses it, so the modules of each
//! directory form no import circle. Checked on the source text: every path
//! through `crate::` (groups `crate::{a, b}` included, and names a crate
//! root re-exports, resolved to the module that defines them) and, in a
//! nested module, through `super::` to a sibling, outside `#[cfg(test)]`
//! and comments. A test module (`#[cfg(test)]` onwards in a file, or a
//! file `tests.rs`, `*_tests.rs` or under `tests/`) may reach anywhere.
//!
//! A circle that is there by design is listed in [`DEFENDED`] with its
//! reason, and the test also fails when a listed circle is gone (so the
//! list cannot go stale).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed call should fail the test loudly

use mcs_tests::workspace_root;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Circles kept on purpose: (crate, its modules, why).
const DEFENDED: &[(&str, &[&str], &str)] = &[(
    "mcs-sim",
    &["check", "world"],
    "the invariant checker reads the whole world's state, and the world runs the checks \
     after each step; one unit, two files for length (docs/design.md §10)",
)];

/// A module path below a crate's root (`["http", "lists"]`).
type ModPath = Vec<String>;

/// Each source file of `src` by its module path; the crate roots
/// (`lib.rs`, `main.rs`) as the empty path.
fn modules(src: &Path) -> BTreeMap<ModPath, String> {
    let mut found = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let stem = path.file_stem().unwrap_or_default().to_string_lossy().into_owned();
            // Test modules in files of their own (`tests.rs`, `rule_tests.rs`,
            // `tests/`): reach anywhere, as test modules do.
            if stem == "tests" || stem.ends_with("_tests") {
                continue;
            }
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(src).unwrap().with_extension("");
            let mut parts: ModPath =
                rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
            if parts.last().is_some_and(|p| p == "mod") {
                parts.pop();
            }
            if parts == ["lib"] || parts == ["main"] {
                parts.clear();
            }
            let text = std::fs::read_to_string(&path).unwrap();
            found.entry(parts).or_insert_with(String::new).push_str(&code_of(&text));
        }
    }
    found
}

/// `text` without its test module and comments.
fn code_of(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or_default();
    text.lines().map(|l| l.split("//").next().unwrap_or_default()).collect::<Vec<_>>().join("\n")
}

fn ident(s: &str) -> &str {
    let end = s.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(s.len());
    &s[..end]
}

/// The paths that follow each `prefix` in `code` (`crate::a::b`, and one
/// per member of a group `crate::{a::b, c}`), as their segments.
fn paths_after(code: &str, prefix: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    for (at, _) in code.match_indices(prefix) {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$' || c == ':') {
            continue;
        }
        let rest = &code[at + prefix.len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            let mut member = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        paths.push(segments(&member));
                        member.clear();
                        continue;
                    }
                    _ => {}
                }
                member.push(c);
            }
            paths.push(segments(&member));
        } else {
            paths.push(segments(rest));
        }
    }
    paths.into_iter().filter(|p| !p.is_empty()).collect()
}

fn segments(path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = path.trim_start();
    loop {
        let id = ident(rest);
        if id.is_empty() {
            break;
        }
        out.push(id.to_owned());
        match rest[id.len()..].strip_prefix("::") {
            Some(next) if !next.starts_with('{') => rest = next,
            _ => break,
        }
    }
    out
}

/// The names the crate root re-exports (`pub use context::Context;`), by
/// the top-level module that defines them.
fn reexports(root: &str) -> BTreeMap<String, String> {
    let mut names = BTreeMap::new();
    for statement in root.split(';') {
        let Some(used) = statement.trim().strip_prefix("pub use ") else { continue };
        let module = ident(used);
        let members = match used.find('{') {
            Some(open) => used[open + 1..].trim_end_matches('}').to_owned(),
            None => used.rsplit("::").next().unwrap_or_default().to_owned(),
        };
        for member in members.split(',') {
            let name = member.rsplit("::").next().unwrap_or_default();
            let name = name.rsplit(" as ").next().unwrap_or_default().trim();
            if !name.is_empty() && name != module {
                names.insert(name.to_owned(), module.to_owned());
            }
        }
    }
    names
}

/// The module of `path` (relative to the crate root): its longest prefix
/// that is a module, a root re-export taken to its module.
fn resolve(
    path: &[String],
    known: &BTreeSet<ModPath>,
    reexported: &BTreeMap<String, String>,
) -> Option<ModPath> {
    if let [only, ..] = path
        && let Some(module) = reexported.get(only)
        && !known.contains(&vec![only.clone()])
    {
        return Some(vec![module.clone()]);
    }
    (1..=path.len()).rev().map(|n| path[..n].to_vec()).find(|p| known.contains(p))
}

/// The import edges between sibling modules: `from` uses `to`, both
/// children of one parent.
fn sibling_edges(modules: &BTreeMap<ModPath, String>) -> BTreeMap<ModPath, BTreeSet<String>> {
    let known: BTreeSet<ModPath> = modules.keys().cloned().collect();
    let reexported = reexports(modules.get(&Vec::new()).map_or("", String::as_str));
    let mut edges: BTreeMap<ModPath, BTreeSet<String>> = BTreeMap::new();
    for (module, code) in modules {
        let mut targets: Vec<ModPath> = paths_after(code, "crate::")
            .iter()
            .filter_map(|p| resolve(p, &known, &reexported))
            .collect();
        if let Some((_, parent)) = module.split_last() {
            for p in paths_after(code, "super::") {
                // `super::` of a file in a directory: its parent module
                // (mod.rs itself is that parent, one level up).
                let mut full = parent.to_vec();
                full.extend(p);
                targets.extend(resolve(&full, &known, &BTreeMap::new()));
            }
        }
        for target in targets {
            let common = module.iter().zip(&target).take_while(|(a, b)| a == b).count();
            if common < module.len() && common < target.len() {
                // From the child of the common parent containing `module`
                // to the one containing `target`.
                let mut from = module[..=common].to_vec();
                let to = target[common].clone();
                from.truncate(common + 1);
                edges.entry(from).or_default().insert(to);
            }
        }
    }
    edges
}

/// The circles (strongly connected groups of two or more) among the
/// children of each parent, as sorted module names with their parent.
fn circles(edges: &BTreeMap<ModPath, BTreeSet<String>>) -> Vec<(ModPath, Vec<String>)> {
    let mut by_parent: BTreeMap<ModPath, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (from, tos) in edges {
        let (name, parent) = from.split_last().unwrap();
        by_parent.entry(parent.to_vec()).or_default().insert(name.clone(), tos.clone());
    }
    let mut found = Vec::new();
    for (parent, graph) in by_parent {
        let reach = |start: &String| {
            let mut seen = BTreeSet::new();
            let mut todo = vec![start.clone()];
            while let Some(n) = todo.pop() {
                for next in graph.get(&n).into_iter().flatten() {
                    if seen.insert(next.clone()) {
                        todo.push(next.clone());
                    }
                }
            }
            seen
        };
        let reaches: BTreeMap<&String, BTreeSet<String>> =
            graph.keys().map(|n| (n, reach(n))).collect();
        let mut done = BTreeSet::new();
        for (n, r) in &reaches {
            if done.contains(*n) || !r.contains(*n) {
                continue;
            }
            let group: Vec<String> = r
                .iter()
                .filter(|m| reaches.get(m).is_some_and(|back| back.contains(*n)))
                .cloned()
                .collect();
            done.extend(group.iter().cloned());
            found.push((parent.clone(), group));
        }
    }
    found
}

#[test]
fn the_parsing_finds_groups_reexports_and_siblings() {
    let code = code_of(
        "use crate::{a::X, b};\nuse crate::Ctx; // crate::z\nfn f() { crate::c::g(); $crate::d; }\n\
         #[cfg(test)]\nmod tests { use crate::e; }",
    );
    let paths = paths_after(&code, "crate::");
    let firsts: Vec<&str> = paths.iter().map(|p| p[0].as_str()).collect();
    assert_eq!(firsts, ["a", "b", "Ctx", "c"]);
    let roots = reexports("pub use ctx::{Ctx, Other as O};\npub use a::X;\nmod b;");
    assert_eq!(roots.get("Ctx").map(String::as_str), Some("ctx"));
    assert_eq!(roots.get("O").map(String::as_str), Some("ctx"));
    let mods: BTreeMap<ModPath, String> = [
        (vec![], "pub use ctx::Ctx;".to_owned()),
        (vec!["ctx".to_owned()], "use crate::http::State;".to_owned()),
        (vec!["http".to_owned()], "use crate::Ctx;".to_owned()),
        (vec!["http".to_owned(), "a".to_owned()], "use super::b::B;".to_owned()),
        (vec!["http".to_owned(), "b".to_owned()], "use crate::http::a::A;".to_owned()),
        (vec!["low".to_owned()], String::new()),
    ]
    .into_iter()
    .collect();
    let found = circles(&sibling_edges(&mods));
    assert_eq!(
        found,
        vec![
            (vec![], vec!["ctx".to_owned(), "http".to_owned()]),
            (vec!["http".to_owned()], vec!["a".to_owned(), "b".to_owned()]),
        ]
    );
}

#[test]
fn no_module_reaches_up_into_a_module_that_uses_it() {
    let crates = workspace_root().join("crates");
    let mut undefended = Vec::new();
    let mut seen_defended = BTreeSet::new();
    let mut names: Vec<_> =
        std::fs::read_dir(&crates).unwrap().map(|e| e.unwrap().path()).collect();
    names.sort();
    for dir in names {
        let src = dir.join("src");
        if !src.is_dir() {
            continue;
        }
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let edges = sibling_edges(&modules(&src));
        for (parent, group) in circles(&edges) {
            let defended = DEFENDED
                .iter()
                .any(|(c, members, _)| *c == name && parent.is_empty() && *members == group);
            if defended {
                seen_defended.insert((name.clone(), group));
            } else {
                let uses: Vec<String> = group
                    .iter()
                    .map(|m| {
                        let mut from = parent.clone();
                        from.push(m.clone());
                        let to = edges[&from].iter().filter(|t| group.contains(t));
                        format!("{m} -> {}", to.cloned().collect::<Vec<_>>().join(" "))
                    })
                    .collect();
                let prefix = path_prefix(&parent);
                undefended.push(format!("{name}: {prefix}{{{}}}", uses.join("; ")));
            }
        }
    }
    assert!(undefended.is_empty(), "modules in an import circle:\n{}", undefended.join("\n"));
    for (name, members, _) in DEFENDED {
        let members: Vec<String> = members.iter().map(|m| (*m).to_owned()).collect();
        assert!(
            seen_defended.contains(&(name.to_string(), members.clone())),
            "{name}: the defended circle {members:?} is gone; take it off DEFENDED"
        );
    }
}

fn path_prefix(parent: &[String]) -> String {
    parent.iter().map(|p| format!("{p}::")).collect()
}
