//! The architecture holds: no import cycles between the modules of any folder of any crate,
//! the host's modules import only from their own layer or the layers below it (the
//! order ARCHITECTURE.md gives), and every source file says what it is in a `//!` line.
//!
//! Module dependencies are read from the source text: every `crate::`, `super::` and
//! `self::` path (in `use` trees, inline, and in doc links) is resolved to the module it
//! names as written and, through re-exports, to the module that defines it; each becomes
//! an edge between the two children of the folder that holds both. Test modules count
//! too: a test that reaches up a layer ties the layers together as much as code does.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crates whose modules are checked, by source folder.
const CRATES: [&str; 6] = [
    "host/src",
    "cli/src",
    "apiserver/src",
    "guest-sdk/src",
    "guest-sdk/macros/src",
    "bench/src",
];

/// The host's top-level modules by layer, bottom to top (ARCHITECTURE.md, "The host,
/// bottom to top"): a module may import from its own layer and the layers below.
const HOST_LAYERS: [&[&str]; 7] = [
    // Ground.
    &[
        "clock",
        "error",
        "faults",
        "journal",
        "limits",
        "metrics",
        "object_log",
        "persistence",
        "proptesting",
        "pyformat",
        "rate",
        "settings",
        "sharding",
    ],
    &["runtime"],
    &["cluster", "recording"],
    &["handlers"],
    &["peering", "rbac"],
    &["activities", "admission", "health", "reactor"],
    &["embedding", "reloading", "running", "testing", "tools"],
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A module path inside a crate: `["operator", "changing"]`.
type ModPath = Vec<String>;

/// Every `.rs` file under `dir`, with its module path.
fn modules(dir: &Path, prefix: &ModPath, out: &mut Vec<(ModPath, PathBuf)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for path in entries {
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_owned();
        if path.is_dir() {
            let mut child = prefix.clone();
            child.push(name);
            modules(&path, &child, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let module = match name.as_str() {
                "lib" | "main" | "mod" => prefix.clone(),
                _ => {
                    let mut child = prefix.clone();
                    child.push(name);
                    child
                }
            };
            out.push((module, path));
        }
    }
}

/// The source without comments and without its test module.
fn production_text(source: &str) -> String {
    let mut text = String::new();
    let mut lines = source.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]")
            && lines
                .peek()
                .is_some_and(|next| next.trim_start().starts_with("mod tests"))
        {
            break;
        }
        if trimmed.starts_with("//") {
            continue;
        }
        text.push_str(line.split(" //").next().unwrap_or_default());
        text.push('\n');
    }
    text
}

/// The paths `source` names that start with `crate`, `super` or `self`, as written
/// (`super::calls::Failure`), `use` trees expanded.
fn named_paths(source: &str) -> Vec<Vec<String>> {
    let chars: Vec<char> = source.chars().collect();
    let mut paths = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let at_word = i == 0 || !(chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        let rest: String = chars[i..chars.len().min(i + 6)].iter().collect();
        if at_word
            && (rest.starts_with("crate:")
                || rest.starts_with("super:")
                || rest.starts_with("self::"))
        {
            let (tree, end) = read_tree(&chars, i);
            expand(&tree, &mut Vec::new(), &mut paths);
            i = end.max(i + 1);
        } else {
            i += 1;
        }
    }
    paths
}

/// A path tree: `a::b::{c, d::e}`.
#[derive(Debug)]
struct Tree {
    segments: Vec<String>,
    children: Vec<Tree>,
}

fn read_tree(chars: &[char], mut i: usize) -> (Tree, usize) {
    let mut segments = Vec::new();
    let mut children = Vec::new();
    loop {
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        if i < chars.len() && chars[i] == '{' {
            i += 1;
            loop {
                while i < chars.len() && (chars[i].is_whitespace() || chars[i] == ',') {
                    i += 1;
                }
                if i >= chars.len() || chars[i] == '}' {
                    i += 1;
                    break;
                }
                let (child, end) = read_tree(chars, i);
                children.push(child);
                i = end;
            }
            break;
        }
        let start = i;
        while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == '*')
        {
            i += 1;
        }
        if start == i {
            break;
        }
        segments.push(chars[start..i].iter().collect());
        if chars.get(i) == Some(&':') && chars.get(i + 1) == Some(&':') {
            i += 2;
        } else {
            break;
        }
    }
    (Tree { segments, children }, i)
}

fn expand(tree: &Tree, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let depth = prefix.len();
    prefix.extend(tree.segments.iter().cloned());
    if tree.children.is_empty() {
        out.push(prefix.clone());
    }
    for child in &tree.children {
        expand(child, prefix, out);
    }
    prefix.truncate(depth);
}

/// The module a path names from `module`, as an absolute module path (its last segment
/// may be an item rather than a module; that does not change which children it is under).
fn resolve(module: &ModPath, path: &[String]) -> Option<ModPath> {
    let mut segments = path.iter();
    // A `mod.rs`/`lib.rs` is its folder's module; a plain file's `super` is its folder.
    let mut base: ModPath = match segments.next()?.as_str() {
        "crate" => Vec::new(),
        "self" => module.clone(),
        "super" => {
            let mut base = module.clone();
            base.pop()?;
            base
        }
        _ => return None,
    };
    let mut rest: Vec<&String> = segments.collect();
    while rest.first().is_some_and(|s| *s == "super") {
        base.pop()?;
        rest.remove(0);
    }
    base.extend(rest.into_iter().filter(|s| *s != "self").cloned());
    Some(base)
}

/// The re-exports of each module (`pub use`, `pub(crate) use`, ...): `module + name` →
/// the path it stands for, so that a path through a re-export (`crate::Error`) counts as
/// a reference to the module that defines it.
fn re_exports(files: &[(ModPath, PathBuf)]) -> BTreeMap<ModPath, ModPath> {
    let modules: BTreeSet<&ModPath> = files.iter().map(|(module, _)| module).collect();
    let mut aliases = BTreeMap::new();
    for (module, path) in files {
        if path.file_stem().is_some_and(|s| s == "tests") {
            continue;
        }
        let source = production_text(&std::fs::read_to_string(path).unwrap_or_default());
        for statement in source.split(';') {
            let statement = statement.trim();
            let Some(rest) = statement
                .strip_prefix("pub use ")
                .or_else(|| statement.strip_prefix("pub(crate) use "))
                .or_else(|| statement.strip_prefix("pub(super) use "))
            else {
                continue;
            };
            // Relative re-exports (`pub use cause::Cause`) name a child of this folder.
            let rest = rest.trim();
            let written = if rest.starts_with("crate::")
                || rest.starts_with("super::")
                || rest.starts_with("self::")
            {
                rest.to_owned()
            } else {
                format!("self::{rest}")
            };
            let chars: Vec<char> = written.chars().collect();
            let (tree, _) = read_tree(&chars, 0);
            let mut expanded = Vec::new();
            expand(&tree, &mut Vec::new(), &mut expanded);
            for named in expanded {
                let Some(target) = resolve(module, &named) else {
                    continue;
                };
                let Some(name) = named.last().filter(|n| *n != "self" && *n != "*") else {
                    continue;
                };
                let mut alias = module.clone();
                alias.push(name.clone());
                // A module's path is never an item's alias (`pub use tools::rbac`).
                if alias != target && !modules.contains(&alias) {
                    aliases.insert(alias, target);
                }
            }
        }
    }
    aliases
}

/// A path with re-exports followed (a few levels deep), longest prefix first.
fn unalias(mut path: ModPath, aliases: &BTreeMap<ModPath, ModPath>) -> ModPath {
    for _ in 0..4 {
        let hit = (1..=path.len())
            .rev()
            .find_map(|n| aliases.get(&path[..n]).map(|target| (n, target.clone())));
        let Some((n, mut target)) = hit else { break };
        target.extend(path[n..].iter().cloned());
        path = target;
    }
    path
}

/// Edges between siblings: for a reference from `from` to `to`, the two children of
/// their deepest common folder that hold them.
fn sibling_edge(
    from: &ModPath,
    to: &ModPath,
    folders: &BTreeSet<ModPath>,
) -> Option<(ModPath, String, String)> {
    let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
    let (a, b) = (from.get(common)?, to.get(common)?);
    let folder: ModPath = from[..common].to_vec();
    if !folders.contains(&folder) {
        return None;
    }
    Some((folder, a.clone(), b.clone()))
}

/// Strongly connected components with more than one member (Tarjan).
fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Search<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<String, usize>,
        low: BTreeMap<String, usize>,
        stack: Vec<String>,
        on_stack: BTreeSet<String>,
        found: Vec<Vec<String>>,
    }
    impl Search<'_> {
        fn visit(&mut self, node: &str) {
            let n = self.index.len();
            self.index.insert(node.to_owned(), n);
            self.low.insert(node.to_owned(), n);
            self.stack.push(node.to_owned());
            self.on_stack.insert(node.to_owned());
            for next in self.edges.get(node).into_iter().flatten() {
                if !self.index.contains_key(next) {
                    self.visit(next);
                    let low = self.low[node].min(self.low[next]);
                    self.low.insert(node.to_owned(), low);
                } else if self.on_stack.contains(next) {
                    let low = self.low[node].min(self.index[next]);
                    self.low.insert(node.to_owned(), low);
                }
            }
            if self.low[node] == self.index[node] {
                let mut component = Vec::new();
                while let Some(top) = self.stack.pop() {
                    self.on_stack.remove(&top);
                    let done = top == node;
                    component.push(top);
                    if done {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut search = Search {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for node in edges.keys() {
        if !search.index.contains_key(node) {
            search.visit(node);
        }
    }
    search.found
}

/// Which children of a folder import which (by folder).
type Graph = BTreeMap<ModPath, BTreeMap<String, BTreeSet<String>>>;

/// The import graph of the crate at `src`: for each folder, which of its children import
/// which.
fn crate_graph(src: &Path) -> Graph {
    let mut files = Vec::new();
    modules(src, &Vec::new(), &mut files);
    let folders: BTreeSet<ModPath> = files
        .iter()
        .filter(|(_, path)| {
            let stem = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default();
            matches!(stem, "lib" | "main" | "mod")
        })
        .map(|(module, _)| module.clone())
        .collect();
    let aliases = re_exports(&files);
    let mut graph = Graph::new();
    for (module, path) in &files {
        let source = std::fs::read_to_string(path).unwrap_or_default();
        for named in named_paths(&source) {
            let Some(written) = resolve(module, &named) else {
                continue;
            };
            let defined = unalias(written.clone(), &aliases);
            for target in [written, defined] {
                if let Some((folder, from, to)) = sibling_edge(module, &target, &folders) {
                    graph
                        .entry(folder)
                        .or_default()
                        .entry(from)
                        .or_default()
                        .insert(to);
                }
            }
        }
    }
    graph
}

/// The import cycles among the children of each folder of the crate at `src`, as
/// `folder: {a, b, c}` lines.
fn crate_cycles(src: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for (folder, edges) in &crate_graph(src) {
        for cycle in cycles(edges) {
            let name = if folder.is_empty() {
                "(crate root)".to_owned()
            } else {
                folder.join("::")
            };
            found.push(format!("{name}: {{{}}}", cycle.join(", ")));
        }
    }
    found
}

#[test]
fn no_module_imports_run_in_a_cycle() {
    let mut all = Vec::new();
    for src in CRATES {
        let dir = workspace().join(src);
        if dir.is_dir() {
            for cycle in crate_cycles(&dir) {
                all.push(format!("{src}: {cycle}"));
            }
        }
    }
    assert!(all.is_empty(), "import cycles:\n{}", all.join("\n"));
}

/// The imports between the crate root's `modules` that go up a layer of `layers` (bottom
/// to top), and the modules that are in no layer. (The graph also names items the root
/// re-exports: they are no modules.)
fn layer_violations(graph: &Graph, modules: &BTreeSet<String>, layers: &[&[&str]]) -> Vec<String> {
    let rank = |module: &str| layers.iter().position(|layer| layer.contains(&module));
    let mut found = Vec::new();
    for (from, targets) in graph.get(&Vec::new()).into_iter().flatten() {
        for to in targets
            .iter()
            .filter(|to| modules.contains(*to) && modules.contains(from))
        {
            match (rank(from), rank(to)) {
                (Some(a), Some(b)) if b > a => {
                    found.push(format!("{from} (layer {a}) imports {to} (layer {b})"));
                }
                (Some(_), Some(_)) => {}
                (None, _) => found.push(format!("{from} is in no layer")),
                (_, None) => found.push(format!("{to} is in no layer")),
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

#[test]
fn host_modules_import_only_down_the_layers() {
    let src = workspace().join("host/src");
    let mut files = Vec::new();
    modules(&src, &Vec::new(), &mut files);
    let top: BTreeSet<String> = files
        .iter()
        .filter_map(|(m, _)| m.first().cloned())
        .collect();
    let graph = crate_graph(&src);
    let found = layer_violations(&graph, &top, &HOST_LAYERS);
    let unplaced: Vec<&String> = top
        .iter()
        .filter(|m| !HOST_LAYERS.iter().any(|layer| layer.contains(&m.as_str())))
        .collect();
    assert!(unplaced.is_empty(), "modules in no layer: {unplaced:?}");
    assert!(
        found.is_empty(),
        "imports up a layer:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_layer_check_finds_imports_up_a_layer() {
    let mut graph = Graph::new();
    let modules: BTreeSet<String> = ["low", "high", "stray"].map(str::to_owned).into();
    let root = graph.entry(Vec::new()).or_default();
    root.entry("low".to_owned())
        .or_default()
        .insert("high".to_owned());
    root.entry("high".to_owned())
        .or_default()
        .insert("stray".to_owned());
    assert_eq!(
        layer_violations(&graph, &modules, &[&["low"], &["high"]]),
        [
            "low (layer 0) imports high (layer 1)",
            "stray is in no layer"
        ]
    );
}

#[test]
fn the_cycle_check_finds_cycles() {
    // Two modules naming each other through every spelling the check reads.
    let dir = std::env::temp_dir().join(format!("kapsel-architecture-{}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("a")).expect("temp dir");
    std::fs::write(src.join("lib.rs"), "//! x\nmod a;\nmod b;\nmod c;\n").expect("write");
    std::fs::write(src.join("a/mod.rs"), "//! a\nmod inner;\n").expect("write");
    std::fs::write(
        src.join("a/inner.rs"),
        "//! inner\nuse crate::{b::{self, B}, c};\n",
    )
    .expect("write");
    std::fs::write(src.join("b.rs"), "//! b\nfn f() { super::a::g(); }\n").expect("write");
    std::fs::write(
        src.join("c.rs"),
        "//! c\n#[cfg(test)]\nmod tests { use crate::a::X; }\n",
    )
    .expect("write");
    let found = crate_cycles(&src);
    assert_eq!(
        found,
        vec!["(crate root): {a, b, c}".to_owned()],
        "c's test module counts"
    );
    // Through a re-export of the crate root: `crate::D` is `d::D`.
    std::fs::remove_dir_all(src.join("a")).expect("remove a");
    std::fs::remove_file(src.join("b.rs")).expect("remove b");
    std::fs::write(src.join("lib.rs"), "//! x\nmod c;\nmod d;\npub use d::D;\n").expect("write");
    std::fs::write(src.join("c.rs"), "//! c\nuse crate::D;\n").expect("write");
    std::fs::write(src.join("d.rs"), "//! d\nfn f() { crate::c::g(); }\n").expect("write");
    let found = crate_cycles(&src);
    assert_eq!(
        found,
        vec!["(crate root): {c, d}".to_owned()],
        "re-exports are followed"
    );
    // Through a module that re-exports another's item (`crate::e::f` is `g::f`), and
    // through a doc link: both name the module as written.
    std::fs::write(src.join("lib.rs"), "//! x\nmod e;\nmod g;\nmod h;\n").expect("write");
    std::fs::write(src.join("g.rs"), "//! g\npub(crate) fn f() {}\n").expect("write");
    std::fs::write(
        src.join("h.rs"),
        "//! h, see [`E`](crate::e::E)\nfn k() { crate::e::f(); }\n",
    )
    .expect("write");
    std::fs::write(
        src.join("e.rs"),
        "//! e\npub(crate) use crate::g::f;\nuse crate::h;\n",
    )
    .expect("write");
    for gone in ["c.rs", "d.rs"] {
        std::fs::remove_file(src.join(gone)).expect("remove");
    }
    assert_eq!(
        crate_cycles(&src),
        vec!["(crate root): {e, h}".to_owned()],
        "paths count as written"
    );
    let src = dir.join("j-src");
    std::fs::create_dir_all(src.join("j")).expect("temp dir");
    for (file, text) in [
        ("lib.rs", "//! x\nmod j;\nmod k;\npub use k::j;\n"),
        ("k.rs", "//! k\npub(crate) fn j() { crate::j::x::g(); }\n"),
        ("j/mod.rs", "//! j\nmod x;\nmod y;\n"),
        ("j/x.rs", "//! x\nuse super::y::Y;\n"),
        ("j/y.rs", "//! y\npub(crate) struct Y;\n"),
    ] {
        std::fs::write(src.join(file), text).expect("write");
    }
    let found = crate_cycles(&src);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        found.is_empty(),
        "a module is not an item of its name: {found:?}"
    );
}

#[test]
fn every_source_file_says_what_it_is() {
    let mut missing = Vec::new();
    for src in CRATES {
        let mut files = Vec::new();
        modules(&workspace().join(src), &Vec::new(), &mut files);
        for (_, path) in files {
            let source = std::fs::read_to_string(&path).unwrap_or_default();
            if !source.trim_start().starts_with("//!") {
                missing.push(path.display().to_string());
            }
        }
    }
    assert!(
        missing.is_empty(),
        "files without a `//!` line:\n{}",
        missing.join("\n")
    );
}
