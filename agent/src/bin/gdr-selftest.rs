//! `gdr-selftest`: the short-lived self-test child the agent runs (so the daemon never holds a CUDA
//! context). Prints one JSON line (`selftest::Measurement`) on success; exit 1 with a message otherwise.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut device = None;
    let mut bytes = 65536u64;
    let mut memory = "auto".to_string();
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().map(String::as_str) == Some("--gpu-check") {
        let mib = std::env::args()
            .nth(2)
            .and_then(|m| m.parse().ok())
            .unwrap_or(256);
        return match gdr_agent::selftest::gpucheck::run(mib) {
            Ok(report) => {
                print!("{report}");
                ExitCode::SUCCESS
            }
            Err(e) => fail(&e),
        };
    }
    if args.peek().map(String::as_str) == Some("--gpu-wake") {
        let n = std::env::args()
            .nth(2)
            .and_then(|m| m.parse().ok())
            .unwrap_or(10_000);
        return match gdr_agent::selftest::gpuwake::run(n) {
            Ok(report) => {
                print!("{report}");
                ExitCode::SUCCESS
            }
            Err(e) => fail(&e),
        };
    }
    if args.peek().map(String::as_str) == Some("--gpu-stream") {
        let mib = std::env::args()
            .nth(2)
            .and_then(|m| m.parse().ok())
            .unwrap_or(64);
        return match gdr_agent::selftest::gpustream::run(mib) {
            Ok(report) => {
                print!("{report}");
                ExitCode::SUCCESS
            }
            Err(e) => fail(&e),
        };
    }
    if args.peek().map(String::as_str) == Some("--gpu-paths") {
        return match gdr_agent::selftest::gpupaths::run() {
            Ok(report) => {
                print!("{report}");
                ExitCode::SUCCESS
            }
            Err(e) => fail(&e),
        };
    }
    while let Some(a) = args.next() {
        let mut val = || args.next().unwrap_or_default();
        match a.as_str() {
            "--device" => device = Some(PathBuf::from(val())),
            "--bytes" => match val().parse() {
                Ok(b) if b > 0 && b % 4 == 0 => bytes = b,
                _ => return fail("--bytes needs a positive multiple of 4"),
            },
            "--memory" => memory = val(),
            _ => {
                return fail(
                    "usage: gdr-selftest --device PATH [--bytes N] [--memory auto|cuda|host] | --gpu-check [MiB] | --gpu-paths | --gpu-wake [N] | --gpu-stream [MiB]",
                );
            }
        }
    }
    let Some(device) = device else {
        return fail("--device PATH is required");
    };
    match gdr_agent::selftest::child::run(&device, bytes, &memory) {
        Ok(m) => {
            println!(
                "{}",
                serde_json::to_string(&m).expect("a measurement serialises")
            );
            ExitCode::SUCCESS
        }
        Err(e) if e == gdr_agent::selftest::BUSY => {
            eprintln!("gdr-selftest: {e}");
            ExitCode::from(gdr_agent::selftest::BUSY_EXIT as u8)
        }
        Err(e) => fail(&e),
    }
}

fn fail(e: &str) -> ExitCode {
    eprintln!("gdr-selftest: {e}");
    ExitCode::FAILURE
}
