//! `picoevb-model`: serve the PicoEVB model to one QEMU vfio-user client.

use std::io::Write;
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use picoevb_model::cli::{self, Parsed};
use picoevb_model::control::ControlServer;
use picoevb_model::program;
use picoevb_model::vfio::{self, Backend};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("make-image") {
        return match picoevb_model::image::make_image(&args[1..]) {
            Ok(text) => {
                print!("{text}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("picoevb-model: {e}");
                ExitCode::from(2)
            }
        };
    }
    let (args, program_args) = match program::split_args(args) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("picoevb-model: {e}");
            return ExitCode::from(2);
        }
    };
    let cli = match cli::parse(args) {
        Ok(Parsed::Run(cli)) => cli,
        Ok(Parsed::Help) => {
            println!("{}\n{}", cli::USAGE, program::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("picoevb-model: {e}\n\n{}\n{}", cli::USAGE, program::USAGE);
            return ExitCode::from(2);
        }
    };
    init_logging(cli.verbose);
    log::info!(
        "PicoEVB model: design {}, bandwidth {}, build hash {:#010x}",
        cli.options.design,
        cli.options
            .bandwidth_mbps
            .map_or("unlimited".to_string(), |b| format!("{b} MB/s")),
        cli.options.build_hash
    );

    let mut backend = Backend::new(cli.options.clone());
    program::apply(backend.device(), &program_args);
    let _control = match &cli.control {
        Some(path) => match ControlServer::spawn(path, backend.device().clone()) {
            Ok(server) => Some(server),
            Err(e) => {
                eprintln!("picoevb-model: {e}");
                return ExitCode::FAILURE;
            }
        },
        None => None,
    };
    match vfio::serve(&cli.socket, &mut backend) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("picoevb-model: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Logs to stderr as `HH:MM:SS.mmm LEVEL target: message` (UTC wall clock, to line up with QEMU and guest
/// logs); RUST_LOG overrides the level.
fn init_logging(verbose: bool) {
    let level = if verbose { "debug" } else { "info" };
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(level))
        .format(|buf, record| {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default();
            let secs = now.as_secs() % 86_400;
            writeln!(
                buf,
                "{:02}:{:02}:{:02}.{:03} {:<5} {}: {}",
                secs / 3600,
                secs / 60 % 60,
                secs % 60,
                now.subsec_millis(),
                record.level(),
                record.target(),
                record.args()
            )
        })
        .init();
}
