//! The result types stay typed (issue 26), checked by reading `src/`:
//! - no `serde_json::Value` field in a type under `src/result/`;
//! - no verdict (or confidence decision) compared as a string literal
//!   (`== "pass"`, `"undecided" =>`, ...): they are the `Verdict` and
//!   `Decision` enums, named by serde;
//! - no key of a sweep or shard block (a field of `SweepResult`, the shard
//!   blocks or the evidence written beside them) read or written by a
//!   string literal outside `src/result/` (`v["steadiness"]`,
//!   `.get("kind")`): the module that writes a key owns it as a typed field.
//!   vLLM's run keys (`completed`, ...) are an outside contract, read by
//!   name from vLLM's own files too, and are not counted.
//!
//! Test code (`*_tests.rs`, `mod tests { .. }` at the end of a file) is not
//! checked. Each rule is also run on a planted violation, so it can fail.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const VERDICT_WORDS: [&str; 5] = [
    "pass",
    "fail",
    "undecided",
    "generator_limited",
    "interrupted",
];

/// The files whose types' fields are keys of the sweep and shard blocks.
const BLOCK_FILES: [&str; 4] = ["sweep.rs", "shard.rs", "shard_sweep.rs", "evidence.rs"];

/// Floors that parse JSON written by others (servers, datasets, traces),
/// whose keys may share a name with ours.
const FOREIGN_JSON: [&str; 3] = ["sim", "client", "workload"];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

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

/// A file's code lines (1-based numbers), without comments and without its
/// unit tests; `None` for a test-only file.
fn code_lines(path: &Path, text: &str) -> Option<Vec<(usize, String)>> {
    let name = path.file_name()?.to_string_lossy();
    if name.ends_with("_tests.rs") || name == "fixture.rs" || name == "testing.rs" {
        return None;
    }
    let lines: Vec<&str> = text.lines().collect();
    // The unit tests: `mod tests {` (and its `#[cfg(test)]`) to its `}`.
    let tests = lines
        .iter()
        .position(|l| l.starts_with("mod tests {"))
        .map(|i| {
            let end = (i..lines.len())
                .find(|&j| lines[j] == "}")
                .unwrap_or(lines.len() - 1);
            let start = if i > 0 && lines[i - 1].trim() == "#[cfg(test)]" {
                i - 1
            } else {
                i
            };
            start..=end
        });
    Some(
        lines
            .iter()
            .enumerate()
            .filter(|(i, _)| !tests.as_ref().is_some_and(|t| t.contains(i)))
            .filter(|(_, l)| !l.trim_start().starts_with("//"))
            .map(|(i, l)| (i + 1, l.to_string()))
            .collect(),
    )
}

/// A field declaration (`pub name: Type,` or `name: Type,`): its name and type.
fn field(line: &str) -> Option<(String, String)> {
    let l = line.trim();
    let l = l
        .strip_prefix("pub(crate) ")
        .or_else(|| l.strip_prefix("pub "))
        .unwrap_or(l);
    let (name, ty) = l.split_once(':')?;
    let is_ident = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    (is_ident && l.ends_with(',') && !ty.starts_with(':'))
        .then(|| (name.to_string(), ty.trim().to_string()))
}

/// `file:line: text` for each field of a result type holding a JSON value.
fn value_fields(files: &[(PathBuf, String)]) -> Vec<String> {
    let mut bad = Vec::new();
    for (path, text) in files {
        for (n, line) in code_lines(path, text).unwrap_or_default() {
            if let Some((_, ty)) = field(&line) {
                let words: Vec<&str> = ty
                    .split(|c: char| !c.is_alphanumeric() && c != '_')
                    .collect();
                if words.contains(&"Value") || words.contains(&"Map") {
                    bad.push(format!("{}:{n}: {}", path.display(), line.trim()));
                }
            }
        }
    }
    bad
}

/// `file:line: text` for each verdict word compared or matched as a string.
fn string_verdicts(files: &[(PathBuf, String)]) -> Vec<String> {
    let mut bad = Vec::new();
    for (path, text) in files {
        for (n, line) in code_lines(path, text).unwrap_or_default() {
            let squeezed: String = line.split_whitespace().collect::<Vec<_>>().join(" ");
            let hit = VERDICT_WORDS.iter().any(|w| {
                let lit = format!("\"{w}\"");
                ["== ", "!= ", "Some("]
                    .iter()
                    .any(|op| squeezed.contains(&format!("{op}{lit}")))
                    || [" ==", " !=", " =>", " |"]
                        .iter()
                        .any(|op| squeezed.contains(&format!("{lit}{op}")))
            });
            if hit {
                bad.push(format!("{}:{n}: {}", path.display(), line.trim()));
            }
        }
    }
    bad
}

/// The keys of vLLM's run JSON (the fields of the file that declares
/// `RunJson`): an outside contract, read by name from vLLM's own files too
/// (`kneecap compare` conditions name them).
fn vllm_keys(files: &[(PathBuf, String)]) -> BTreeSet<String> {
    let (path, text) = files
        .iter()
        .find(|(_, t)| t.contains("pub struct RunJson {"))
        .expect("a file declares RunJson");
    code_lines(path, text)
        .unwrap_or_default()
        .iter()
        .filter_map(|(_, l)| field(l).map(|(name, _)| name))
        .collect()
}

/// The JSON keys of the sweep and shard blocks: their fields' names (or
/// `rename`s) in `src/result/`.
fn block_keys(result_files: &[(PathBuf, String)]) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    for (path, text) in result_files {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if !BLOCK_FILES.contains(&name.as_ref()) {
            continue;
        }
        for (_, line) in code_lines(path, text).unwrap_or_default() {
            if let Some((name, _)) = field(&line) {
                keys.insert(name);
            }
            if let Some(rest) = line.split("rename = \"").nth(1) {
                keys.insert(rest.split('"').next().unwrap_or_default().to_string());
            }
        }
    }
    keys
}

/// `file:line: text` for each block key read or written by a string literal.
fn keys_by_literal(files: &[(PathBuf, String)], keys: &BTreeSet<String>) -> Vec<String> {
    let mut bad = Vec::new();
    for (path, text) in files {
        for (n, line) in code_lines(path, text).unwrap_or_default() {
            let hit = keys.iter().find(|k| {
                line.contains(&format!("[\"{k}\"]")) || line.contains(&format!(".get(\"{k}\")"))
            });
            if let Some(k) = hit {
                bad.push(format!("{}:{n}: `{k}`: {}", path.display(), line.trim()));
            }
        }
    }
    bad
}

/// Every source file under `src/`, read.
fn sources() -> Vec<(PathBuf, String)> {
    let mut paths = Vec::new();
    rust_files(&src(), &mut paths);
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("readable source");
            (p, text)
        })
        .collect()
}

fn under(files: &[(PathBuf, String)], top: &str) -> Vec<(PathBuf, String)> {
    let root = src().join(top);
    files
        .iter()
        .filter(|(p, _)| p.starts_with(&root))
        .cloned()
        .collect()
}

fn outside(files: &[(PathBuf, String)], tops: &[&str]) -> Vec<(PathBuf, String)> {
    let roots: Vec<PathBuf> = tops.iter().map(|t| src().join(t)).collect();
    files
        .iter()
        .filter(|(p, _)| !roots.iter().any(|r| p.starts_with(r)))
        .cloned()
        .collect()
}

#[test]
fn no_result_type_holds_a_json_value() {
    let bad = value_fields(&under(&sources(), "result"));
    assert!(
        bad.is_empty(),
        "serde_json::Value fields in result types:\n{}",
        bad.join("\n")
    );
}

#[test]
fn no_verdict_is_compared_as_a_string() {
    let bad = string_verdicts(&sources());
    assert!(
        bad.is_empty(),
        "verdicts compared as strings (use Verdict / Decision):\n{}",
        bad.join("\n")
    );
}

#[test]
fn no_block_key_is_read_or_written_by_a_literal_outside_result() {
    let all = sources();
    let vllm = vllm_keys(&all);
    assert!(
        vllm.contains("completed") && vllm.contains("request_throughput"),
        "{vllm:?}"
    );
    let keys: BTreeSet<String> = block_keys(&under(&all, "result"))
        .difference(&vllm)
        .cloned()
        .collect();
    for k in [
        "steadiness",
        "slo_attainment",
        "kind",
        "histograms",
        "overran_slot_ms",
    ] {
        assert!(keys.contains(k), "the key reader missed `{k}`: {keys:?}");
    }
    let mut excluded = vec!["result"];
    excluded.extend(FOREIGN_JSON);
    let bad = keys_by_literal(&outside(&all, &excluded), &keys);
    assert!(
        bad.is_empty(),
        "block keys used as string literals outside src/result:\n{}",
        bad.join("\n")
    );
}

#[test]
fn each_rule_fails_on_a_planted_violation() {
    let planted = |text: &str| vec![(src().join("result/planted.rs"), text.to_string())];
    let field_of_value = "pub struct S {\n    pub merged: Option<serde_json::Value>,\n}\n";
    assert_eq!(value_fields(&planted(field_of_value)).len(), 1);
    let in_tests = "#[cfg(test)]\nmod tests {\n    pub x: Value,\n}\n";
    assert!(
        value_fields(&planted(in_tests)).is_empty(),
        "test code is not checked"
    );
    let after_tests = format!("{in_tests}pub struct T {{\n    pub x: Value,\n}}\n");
    assert_eq!(
        value_fields(&planted(&after_tests)).len(),
        1,
        "code after the tests is checked"
    );
    for line in [
        "if d.decision == \"undecided\" {",
        "let ok = step.verdict.name() != \"pass\";",
        "    \"generator_limited\" => 2,",
        "matches!(v.as_str(), \"fail\" | \"interrupted\")",
    ] {
        assert_eq!(string_verdicts(&planted(line)).len(), 1, "{line}");
    }
    assert!(string_verdicts(&planted("Verdict::Pass => \"pass\",")).is_empty());
    let keys: BTreeSet<String> = ["steadiness".to_string()].into();
    for line in [
        "v[\"steadiness\"] = json!(s);",
        "let s = v.get(\"steadiness\");",
    ] {
        assert_eq!(keys_by_literal(&planted(line), &keys).len(), 1, "{line}");
    }
    assert!(keys_by_literal(&planted("// v[\"steadiness\"]"), &keys).is_empty());
}
