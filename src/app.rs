//! App: dispatches a parsed command to its orchestrator and turns Ctrl-C /
//! SIGTERM into a watch signal that the orchestrators honour.

use crate::cli::{BenchCommand, Cli, Command};
use anyhow::Result;
use std::process::ExitCode;
use tokio::sync::watch;

/// Run one parsed command.
pub async fn run(cli: Cli) -> Result<ExitCode> {
    let interrupt = interrupt_signal();
    match cli.command {
        Command::Run(args)
        | Command::Bench {
            command: BenchCommand::Serve(args),
        } => crate::run::execute(&args, interrupt).await,
        Command::Sweep(args) => crate::sweep::drive::execute(&args, interrupt).await,
        Command::Sim(args) => {
            crate::sim::run(args.into_options()?).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Report(args) => crate::compare::command::report(&args.to_request()),
        Command::Compare(args) => crate::compare::command::compare(&args.to_request()),
        Command::Merge(args) => crate::merge::command::execute(&args),
    }
}

/// A watch that turns true on the first Ctrl-C or SIGTERM.
fn interrupt_signal() -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        wait_for_signal().await;
        eprintln!(
            "\nkneecap: interrupted; finishing in-flight requests (press Ctrl-C again to abort)"
        );
        let _ = tx.send(true);
        wait_for_signal().await;
        eprintln!("kneecap: aborted");
        std::process::exit(2);
    });
    rx
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(mut term) = signal(SignalKind::terminate()) else {
            let _ = tokio::signal::ctrl_c().await;
            return;
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
