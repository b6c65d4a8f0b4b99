//! kneecap binary: parse the command line, run, map the outcome to an exit
//! code (0 ok, 1 an SLO/--fail-if condition failed, 2 usage or runtime error).

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args = kneecap::cli::normalize_args(std::env::args());
    let cli = match kneecap::cli::Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let outcome = runtime.block_on(async {
        let (interrupt, abort) = kneecap::cmd::interrupts();
        tokio::select! {
            outcome = kneecap::cmd::dispatch(cli, interrupt) => outcome,
            Ok(()) = abort => {
                // A second Ctrl-C: stop now, without waiting for in-flight work.
                eprintln!("kneecap: aborted");
                std::process::exit(2);
            }
        }
    });
    match outcome {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
