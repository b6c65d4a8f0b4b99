//! The command layer: one file per subcommand, and the only place that
//! sequences I/O — start the target, prepare the client, drive the engine,
//! save results. `main` calls [`dispatch`]; nothing in the library imports
//! `cmd` back. Arguments become validated configs once, in [`args`].

pub mod args;
mod cache_hits;
mod clock;
mod compare;
pub(crate) mod gpu_power;
mod live;
mod live_serve;
mod merge;
mod predict;
mod prepare;
mod profile;
mod refused;
mod report;
mod run;
mod sessions;
mod sim;
mod spec_decode;
mod sweep;
mod target;

use crate::cli::{BenchCommand, Cli, Command};
use anyhow::Result;
use args::run::DefaultTarget;
use std::process::ExitCode;
use tokio::sync::{oneshot, watch};

/// Run one parsed command. `interrupt` turns true on the first Ctrl-C or
/// SIGTERM; the commands then finish in-flight work and keep partial results.
pub async fn dispatch(cli: Cli, interrupt: watch::Receiver<bool>) -> Result<ExitCode> {
    match cli.command {
        Command::Run(args) => run::execute(&args, DefaultTarget::Simulator, interrupt).await,
        Command::Bench {
            command: BenchCommand::Serve(args),
        } => run::execute(&args, DefaultTarget::VllmLocalhost, interrupt).await,
        Command::Sweep(args) => sweep::execute(&args, interrupt).await,
        Command::Sim(args) => sim::execute(*args, interrupt).await,
        Command::Profile(args) => profile::execute(&args, interrupt).await,
        Command::Predict(args) => predict::execute(&args),
        Command::Report(args) => report::execute(&args),
        Command::Compare(args) => compare::execute(&args),
        Command::Merge(args) => merge::execute(&args),
    }
}

/// Signals: the watch turns true on the first Ctrl-C or SIGTERM; the oneshot
/// fires on the second, when the caller (`main`) should stop at once.
pub fn interrupts() -> (watch::Receiver<bool>, oneshot::Receiver<()>) {
    let (tx, rx) = watch::channel(false);
    let (abort_tx, abort_rx) = oneshot::channel();
    tokio::spawn(async move {
        wait_for_signal().await;
        eprintln!(
            "\nkneecap: interrupted; finishing in-flight requests (press Ctrl-C again to abort)"
        );
        let _ = tx.send(true);
        wait_for_signal().await;
        let _ = abort_tx.send(());
    });
    (rx, abort_rx)
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
