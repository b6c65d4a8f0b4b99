//! Writing results: vLLM's file naming, atomic writes (temporary file then
//! rename, so an existing file is never half-overwritten), `--append-result`,
//! and a writability check made before the run starts.

use super::python_float;
use crate::result::RunResult;
use anyhow::{Context, Result};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Where the result goes: `--result-dir` + (`--result-filename` or vLLM's
/// `{label}-{rate}qps[-concurrency{N}]-{model}-{date}.json`).
pub fn result_path(dir: Option<&Path>, filename: Option<&str>, r: &RunResult) -> PathBuf {
    let name = match filename {
        Some(f) => f.to_string(),
        None => {
            let label = r.header.label.as_deref().unwrap_or(&r.header.backend);
            let model = r
                .header
                .model_id
                .rsplit('/')
                .next()
                .unwrap_or(&r.header.model_id);
            let conc = r
                .header
                .max_concurrency
                .map(|c| format!("-concurrency{c}"))
                .unwrap_or_default();
            let load = match &r.header.ramp_up {
                Some((s, a, b)) => format!("ramp-up-{s}-{a}qps-{b}qps"),
                None => format!("{}qps", python_float(r.header.request_rate)),
            };
            format!("{label}-{load}{conc}-{model}-{}.json", r.date)
        }
    };
    match dir {
        Some(d) => d.join(name),
        None => PathBuf::from(name),
    }
}

/// Fail early (before any load is sent) when the result cannot be written.
/// `flag` names the option the directory came from, for the error message.
pub fn check_writable(dir: Option<&Path>, flag: &str) -> Result<()> {
    let dir = dir
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    fs::create_dir_all(&dir)
        .with_context(|| format!("{flag}: cannot create the directory '{}'", dir.display()))?;
    let probe = dir.join(format!(".kneecap-write-test-{}", std::process::id()));
    fs::write(&probe, b"")
        .with_context(|| format!("{flag}: the directory '{}' is not writable", dir.display()))?;
    let _ = fs::remove_file(&probe);
    Ok(())
}

/// Write `text` to `path` atomically: a temporary file in the same directory,
/// flushed, then renamed over the target.
pub fn write_atomic(path: &Path, text: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    fs::create_dir_all(dir).with_context(|| format!("cannot create '{}'", dir.display()))?;
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{file_name}.tmp-{}", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(text)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = fs::remove_file(&tmp);
        anyhow::anyhow!("cannot write '{}': {e}", path.display())
    })
}

/// Save the run: a new file (atomic), or one more JSON line with `append`.
pub fn save(r: &RunResult, path: &Path, detailed: bool, append: bool) -> Result<()> {
    let text = crate::result::json::to_vec(r, detailed);
    if !append {
        return write_atomic(path, &text);
    }
    let mut existing = fs::read(path).unwrap_or_default();
    if !existing.is_empty() && existing.last() != Some(&b'\n') {
        existing.push(b'\n');
    }
    existing.extend_from_slice(&text);
    write_atomic(path, &existing)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(backend: &str, rate: f64, conc: Option<usize>, model: &str) -> RunResult {
        RunResult {
            date: "20261201-120000".into(),
            header: crate::result::RunHeader {
                backend: backend.into(),
                model_id: model.into(),
                num_prompts: 1,
                request_rate: rate,
                burstiness: 1.0,
                max_concurrency: conc,
                ..Default::default()
            },
            summary: Default::default(),
            records: vec![],
            kneecap: Default::default(),
        }
    }

    #[test]
    fn default_file_name_follows_vllm() {
        let r = result("vllm", 10.0, Some(8), "org/llama-7b");
        let p = result_path(None, None, &r);
        assert_eq!(
            p,
            PathBuf::from("vllm-10.0qps-concurrency8-llama-7b-20261201-120000.json")
        );
        let mut r = result("openai", f64::INFINITY, None, "m");
        assert_eq!(
            result_path(Some(Path::new("out")), None, &r),
            PathBuf::from("out/openai-infqps-m-20261201-120000.json")
        );
        r.header.ramp_up = Some(("linear".into(), 1, 5));
        r.header.label = Some("x".into());
        assert_eq!(
            result_path(None, None, &r),
            PathBuf::from("x-ramp-up-linear-1qps-5qps-m-20261201-120000.json")
        );
        assert_eq!(
            result_path(None, Some("given.json"), &r),
            PathBuf::from("given.json")
        );
    }

    #[test]
    fn atomic_write_replaces_whole_file_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        write_atomic(&path, b"first version, longer").unwrap();
        write_atomic(&path, b"second").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"second");
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "temp file left behind: {names:?}");
    }

    #[test]
    fn unwritable_result_dir_is_detected_up_front() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a-file");
        fs::write(&file, b"x").unwrap();
        let err = check_writable(Some(&file.join("sub")), "--result-dir").unwrap_err();
        assert!(format!("{err:#}").contains("--result-dir"), "{err:#}");
    }
}
