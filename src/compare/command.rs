//! The I/O half of `kneecap report` and `kneecap compare`: read the files,
//! call the pure comparison, print, write the HTML report, map `--fail-if`
//! to the exit code (0 ok, 1 a condition held, 2 errors via `Err`).

use super::input::{parse, Input};
use super::rule::{self, FailIf, Judgement};
use super::{render, runs, sweeps, Format};
use anyhow::{anyhow, bail, Context, Result};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// What `kneecap report` needs (clap-free).
#[derive(Debug, Clone)]
pub struct ReportRequest {
    pub file: PathBuf,
    pub html: Option<PathBuf>,
    pub format: Format,
}

/// What `kneecap compare` needs (clap-free; conditions still unparsed).
#[derive(Debug, Clone)]
pub struct CompareRequest {
    pub baseline: PathBuf,
    pub candidate: PathBuf,
    pub fail_if: Vec<String>,
    pub format: Format,
}

/// Read and parse one result file; errors name the file.
pub fn load(path: &Path) -> Result<Input> {
    let bytes =
        std::fs::read(path).map_err(|e| anyhow!("cannot read '{}': {e}", path.display()))?;
    parse(&String::from_utf8_lossy(&bytes)).map_err(|e| anyhow!("'{}': {e}", path.display()))
}

/// Run `kneecap report`.
pub fn report(req: &ReportRequest) -> Result<ExitCode> {
    let input = load(&req.file)?;
    let text = match &input {
        Input::Sweep(s) => render::sweep(s, req.format),
        Input::Run(r) => {
            if req.html.is_some() {
                bail!(
                    "--html: '{}' is a run result; the HTML report is drawn from a sweep JSON (kneecap sweep -o FILE)",
                    req.file.display()
                );
            }
            render::run(r, req.format)
        }
    };
    emit(&text)?;
    if let (Some(html), Input::Sweep(s)) = (&req.html, &input) {
        crate::report::save::write_atomic(html, crate::report::html::render(s).as_bytes())
            .context("--html")?;
        eprintln!("kneecap: HTML report written to {}", html.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Run `kneecap compare`.
pub fn compare(req: &CompareRequest) -> Result<ExitCode> {
    if req.format == Format::Csv {
        bail!("--format csv: compare prints text, markdown or json; csv is for `kneecap report`");
    }
    let conditions: Vec<FailIf> = req
        .fail_if
        .iter()
        .map(|c| rule::parse(c).map_err(|e| anyhow!(e)))
        .collect::<Result<_>>()?;
    let (a, b) = (load(&req.baseline)?, load(&req.candidate)?);
    let names = [display(&req.baseline), display(&req.candidate)];
    let files = [names[0].as_str(), names[1].as_str()];
    let (body, judgements) = match (&a, &b) {
        (Input::Sweep(x), Input::Sweep(y)) => {
            let c = sweeps::compare(files[0], x, files[1], y);
            let js = judge_all(&conditions, |m| sweeps::pairs(m, x, y, files))?;
            (body(&c, &js, req.format, sweeps::render)?, js)
        }
        (Input::Run(x), Input::Run(y)) => {
            let c = runs::compare(files[0], x, files[1], y);
            let js = judge_all(&conditions, |m| runs::pairs(m, x, y, files))?;
            (body(&c, &js, req.format, runs::render)?, js)
        }
        _ => bail!(
            "cannot compare a {} ('{}') with a {} ('{}'): give two sweeps or two runs",
            a.kind(),
            files[0],
            b.kind(),
            files[1]
        ),
    };
    emit(&body)?;
    let held: Vec<&Judgement> = judgements.iter().filter(|j| j.held).collect();
    for j in &held {
        eprintln!(
            "kneecap compare: --fail-if {} held: {}",
            j.condition, j.detail
        );
    }
    Ok(if held.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Print to stdout; a closed pipe (`| head`) is not an error.
fn emit(text: &str) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow!("cannot write to stdout: {e}"))
        }
        _ => Ok(()),
    }
}

/// The file name as given, for tables and messages.
fn display(p: &Path) -> String {
    p.display().to_string()
}

fn judge_all(
    conditions: &[FailIf],
    pairs: impl Fn(&rule::Metric) -> Result<Vec<rule::Pair>, String>,
) -> Result<Vec<Judgement>> {
    conditions
        .iter()
        .map(|c| {
            let p = pairs(&c.metric)
                .map_err(|e| anyhow!("--fail-if '{}' cannot be evaluated: {e}", c.text))?;
            Ok(rule::judge(c, &p))
        })
        .collect()
}

/// The printed comparison with the `--fail-if` outcomes.
fn body<C: serde::Serialize>(
    c: &C,
    judgements: &[Judgement],
    format: Format,
    render: impl Fn(&C, bool) -> String,
) -> Result<String> {
    if format == Format::Json {
        let v = json!({ "kind": "kneecap_compare", "comparison": c, "fail_if": judgements });
        return Ok(serde_json::to_string_pretty(&v)? + "\n");
    }
    let markdown = format == Format::Markdown;
    let mut out = render(c, markdown);
    if !judgements.is_empty() {
        out.push('\n');
    }
    for j in judgements {
        let verdict = if j.held { "HELD" } else { "ok" };
        let bullet = if markdown { "- " } else { "" };
        out.push_str(&format!(
            "{bullet}fail-if {}: {verdict} ({})\n",
            j.condition, j.detail
        ));
    }
    Ok(out)
}
