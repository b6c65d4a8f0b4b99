//! `kneecap compare`: read two saved sweeps or runs, compare them (the pure
//! [`crate::compare`]), print, and map `--fail-if` to the exit code (0 ok,
//! 1 a condition held, 2 errors via `Err`).

use super::report::{emit, load};
use crate::cli::compare::{CompareArgs, CompareFormat};
use crate::compare::input::Input;
use crate::compare::rule::{self, FailIf, Judgement};
use crate::compare::{runs, sweeps, Format};
use anyhow::{anyhow, bail, Result};
use serde_json::json;
use std::path::Path;
use std::process::ExitCode;

/// Run `kneecap compare`.
pub fn execute(req: &CompareArgs) -> Result<ExitCode> {
    let format = format(req.format);
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
            (body(&c, &js, format, sweeps::render)?, js)
        }
        (Input::Run(x), Input::Run(y)) => {
            let c = runs::compare(files[0], x, files[1], y);
            let js = judge_all(&conditions, |m| runs::pairs(m, x, y, files))?;
            (body(&c, &js, format, runs::render)?, js)
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

fn format(f: CompareFormat) -> Format {
    match f {
        CompareFormat::Text => Format::Text,
        CompareFormat::Markdown => Format::Markdown,
        CompareFormat::Json => Format::Json,
    }
}
