//! gdr-bench: the host side of the bench. Builds the guest initramfs, starts the PicoEVB model and QEMU
//! (inside the bench chroot), relays the guest's RPC to the model, and judges the guest console.

mod appliance;
mod cli;
mod console;
mod control;
mod cpio;
mod initramfs;
mod machine;
mod procs;
mod relay;
mod report;
mod run;

use std::path::Path;
use std::process::ExitCode;

use clap::Parser;

use cli::{Cli, Command};

/// `gdr-bench relay`: only the RPC relay, serving one connection after another, for running QEMU by hand
/// against a model.
fn relay_only(listen: &Path, control: &Path) -> Result<(), String> {
    let _ = std::fs::remove_file(listen);
    let l = std::os::unix::net::UnixListener::bind(listen)
        .map_err(|e| format!("{}: {e}", listen.display()))?;
    for conn in l.incoming() {
        let conn = conn.map_err(|e| e.to_string())?;
        match relay::serve(conn, control, &mut std::io::stdout()) {
            Ok(n) => eprintln!("connection closed after {n} request(s)"),
            Err(e) => eprintln!("connection failed: {e}"),
        }
    }
    Ok(())
}

/// Exit status 0: the run passed; 1: it ran and failed; 2: it could not run (clap's usage errors too).
fn main() -> ExitCode {
    let (what, result) = match Cli::parse().command {
        Command::Run(r) => ("gdr-bench", r.into_run().and_then(|a| run::run(&a))),
        Command::Appliance(r) => (
            "gdr-bench appliance",
            r.into_run().and_then(|a| run::run(&a)),
        ),
        Command::Relay { listen, control } => (
            "gdr-bench relay",
            relay_only(&listen, &control).map(|()| true),
        ),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("{what}: {e}");
            ExitCode::from(2)
        }
    }
}
