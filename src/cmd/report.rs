//! `kneecap report`: read one saved sweep or run JSON, print it in the chosen
//! format, and write the HTML report of a sweep.

use crate::cli::report::{ReportArgs, ReportFormat};
use crate::compare::input::{parse, Input};
use crate::compare::{render, Format};
use anyhow::{anyhow, bail, Context, Result};
use std::path::Path;
use std::process::ExitCode;

/// Read and parse one result file; errors name the file.
pub(super) fn load(path: &Path) -> Result<Input> {
    let bytes =
        std::fs::read(path).map_err(|e| anyhow!("cannot read '{}': {e}", path.display()))?;
    parse(&String::from_utf8_lossy(&bytes)).map_err(|e| anyhow!("'{}': {e}", path.display()))
}

/// Run `kneecap report`.
pub fn execute(req: &ReportArgs) -> Result<ExitCode> {
    let format = format(req.format);
    let input = load(&req.file)?;
    let text = match &input {
        Input::Sweep(s) => render::sweep(s, format),
        Input::Run(r) => {
            if req.html.is_some() {
                bail!(
                    "--html: '{}' is a run result; the HTML report is drawn from a sweep JSON (kneecap sweep -o FILE)",
                    req.file.display()
                );
            }
            render::run(r, format)
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

/// Print to stdout; a closed pipe (`| head`) is not an error.
pub(super) fn emit(text: &str) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow!("cannot write to stdout: {e}"))
        }
        _ => Ok(()),
    }
}

fn format(f: ReportFormat) -> Format {
    match f {
        ReportFormat::Text => Format::Text,
        ReportFormat::Markdown => Format::Markdown,
        ReportFormat::Csv => Format::Csv,
        ReportFormat::Json => Format::Json,
    }
}
