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

use std::process::ExitCode;

/// `gdr-bench relay --listen SOCK --control CTL`: only the RPC relay, serving one connection after another,
/// for running QEMU by hand against a model.
fn relay_only(args: &[String]) -> Result<(), String> {
    let (mut listen, mut control) = (None, None);
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let v = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--listen" => listen = Some(std::path::PathBuf::from(v)),
            "--control" => control = Some(std::path::PathBuf::from(v)),
            _ => return Err(format!("unknown argument {flag:?}")),
        }
    }
    let (listen, control) = listen
        .zip(control)
        .ok_or("--listen and --control are required")?;
    let _ = std::fs::remove_file(&listen);
    let l = std::os::unix::net::UnixListener::bind(&listen)
        .map_err(|e| format!("{}: {e}", listen.display()))?;
    for conn in l.incoming() {
        let conn = conn.map_err(|e| e.to_string())?;
        match relay::serve(conn, &control, &mut std::io::stdout()) {
            Ok(n) => eprintln!("connection closed after {n} request(s)"),
            Err(e) => eprintln!("connection failed: {e}"),
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("run") => match cli::parse_run(&args[1..]).and_then(|a| run::run(&a)) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::from(1),
            Err(e) => {
                eprintln!("gdr-bench: {e}");
                ExitCode::from(2)
            }
        },
        Some("appliance") => match cli::parse_appliance(&args[1..]).and_then(|a| run::run(&a)) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::from(1),
            Err(e) => {
                eprintln!("gdr-bench appliance: {e}");
                ExitCode::from(2)
            }
        },
        Some("relay") => match relay_only(&args[1..]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("gdr-bench relay: {e}");
                ExitCode::from(2)
            }
        },
        Some("-h" | "--help") => {
            println!("{}", cli::USAGE);
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("{}", cli::USAGE);
            ExitCode::from(2)
        }
    }
}
