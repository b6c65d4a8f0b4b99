//! The floors of docs/ARCHITECTURE.md, checked: every `crate::x` reference
//! in `src/` (imports and paths alike, comments excluded) between top-level
//! modules points to a lower floor, `cli` is used by `main` and `cmd` alone,
//! and every top-level module has a floor. Prints the graph's size
//! (`cargo test --test architecture -- --nocapture`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each top-level module's floor; a module may only reference higher numbers.
const FLOORS: &[(&str, u32)] = &[
    ("cmd", 2),
    ("cli", 3),
    ("config", 4),
    ("merge", 5),
    ("compare", 5),
    ("live", 5),
    ("twin", 5),
    ("sweep", 6),
    ("report", 7),
    ("result", 8),
    ("shard", 9),
    ("engine", 10),
    ("client", 11),
    ("metrics", 12),
    ("workload", 12),
    ("schedule", 12),
    ("sim", 12),
    ("rxstamp", 13),
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src/ is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to (`schedule_tests.rs` → `schedule`).
fn module_of(src: &Path, file: &Path) -> String {
    let first = file
        .strip_prefix(src)
        .expect("under src/")
        .components()
        .next()
        .expect("a path component");
    let name = first.as_os_str().to_string_lossy();
    let name = name.trim_end_matches(".rs");
    name.strip_suffix("_tests").unwrap_or(name).to_string()
}

/// Top-level modules a source text names as `crate::x` or `crate::{x, ..}`.
fn referenced(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let code = line.trim_start();
        if code.starts_with("//") {
            continue;
        }
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                for item in group[..end].split(',') {
                    let name: String = item
                        .trim()
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    out.insert(name);
                }
            } else {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                out.insert(name);
            }
        }
    }
    out
}

/// module → the other top-level modules it references.
fn import_graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let floors: BTreeMap<&str, u32> = FLOORS.iter().copied().collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let module = module_of(&src, &file);
        if module == "main" || module == "lib" {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("readable source");
        let targets = graph.entry(module.clone()).or_default();
        for target in referenced(&text) {
            if target != module && floors.contains_key(target.as_str()) {
                targets.insert(target);
            }
        }
    }
    graph
}

#[test]
fn every_import_between_top_level_modules_points_to_a_lower_floor() {
    let floors: BTreeMap<&str, u32> = FLOORS.iter().copied().collect();
    let graph = import_graph();
    let mut upward = Vec::new();
    for (from, targets) in &graph {
        let Some(&f) = floors.get(from.as_str()) else {
            panic!("src/{from} has no floor: add it to FLOORS and docs/ARCHITECTURE.md");
        };
        for to in targets {
            if floors[to.as_str()] <= f {
                upward.push(format!(
                    "{from} (floor {f}) -> {to} (floor {})",
                    floors[to.as_str()]
                ));
            }
        }
    }
    let arrows: usize = graph.values().map(BTreeSet::len).sum();
    let used: BTreeSet<u32> = graph.keys().map(|m| floors[m.as_str()]).collect();
    println!(
        "{} top-level modules on {} floors (+ main), {arrows} arrows, {} pointing up or sideways",
        graph.len(),
        used.len(),
        upward.len()
    );
    assert!(
        upward.is_empty(),
        "imports that point up or sideways:\n{}",
        upward.join("\n")
    );
}

#[test]
fn only_the_command_layer_uses_the_clap_definitions() {
    let users: Vec<String> = import_graph()
        .into_iter()
        .filter(|(from, targets)| from != "cmd" && targets.contains("cli"))
        .map(|(from, _)| from)
        .collect();
    assert!(users.is_empty(), "cli used by {users:?}");
}

#[test]
fn the_reference_reader_sees_paths_groups_and_skips_comments() {
    let text = "use crate::{sweep::knee, metrics};\n// crate::cmd in a comment\nlet x = crate::report::json::render(r);";
    let got: Vec<String> = referenced(text).into_iter().collect();
    assert_eq!(got, ["metrics", "report", "sweep"]);
}
