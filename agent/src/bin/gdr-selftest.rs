//! `gdr-selftest`: the short-lived self-test child the agent runs (so the daemon never holds a CUDA
//! context). Prints one JSON line (`selftest::Measurement`) on success; exit 1 with a message otherwise,
//! 75 when an application holds the card RAM, 2 on a usage error.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{ArgGroup, Parser, ValueEnum};

#[derive(Parser, Debug)]
#[command(
    name = "gdr-selftest",
    version,
    about = "The gdr agent's self-test child: loopback DMA through a PicoEVB, or a CUDA check without one",
    group(ArgGroup::new("mode")
        .required(true)
        .args(["device", "gpu_check", "gpu_paths", "gpu_wake", "gpu_stream", "gpu_ring"]))
)]
struct Cli {
    /// The card's node: run the loopback self-test through it and print its measurement as JSON.
    #[arg(long, value_name = "PATH")]
    device: Option<PathBuf>,
    /// Bytes per direction: a positive multiple of 4.
    #[arg(long, value_name = "N", default_value_t = 65536, value_parser = bytes, requires = "device")]
    bytes: u64,
    /// Which memory the pattern travels from and back to.
    #[arg(long, value_enum, default_value_t = Memory::Auto, requires = "device")]
    memory: Memory,
    /// The CUDA part of the self-test on a real GPU, without a card, over MiB of memory.
    #[arg(long, value_name = "MiB", num_args = 0..=1, default_missing_value = "256")]
    gpu_check: Option<usize>,
    /// What the GPU says about the ways its memory can reach the card.
    #[arg(long)]
    gpu_paths: bool,
    /// How fast the GPU reacts to a word written into pinned host memory, over N wakes.
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "10000")]
    gpu_wake: Option<usize>,
    /// The GPU consumer of the stream block's records, over MiB.
    #[arg(long, value_name = "MiB", num_args = 0..=1, default_missing_value = "64")]
    gpu_stream: Option<usize>,
    /// A GPU consumer of a stream ring while a CPU producer fills it, over MiB of records.
    #[arg(long, value_name = "MiB", num_args = 0..=1, default_missing_value = "256")]
    gpu_ring: Option<usize>,
}

/// `auto`: CUDA memory where CUDA works, else host memory (and the measurement says why).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Memory {
    Auto,
    Cuda,
    Host,
}

fn bytes(s: &str) -> Result<u64, &'static str> {
    match s.parse() {
        Ok(b) if b > 0 && b % 4 == 0 => Ok(b),
        _ => Err("a positive multiple of 4"),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let report = if let Some(mib) = cli.gpu_check {
        gdr_agent::selftest::gpucheck::run(mib)
    } else if let Some(n) = cli.gpu_wake {
        gdr_agent::selftest::gpuwake::run(n)
    } else if let Some(mib) = cli.gpu_stream {
        gdr_agent::selftest::gpustream::run(mib)
    } else if let Some(mib) = cli.gpu_ring {
        gdr_agent::selftest::gpuring::run(mib)
    } else if cli.gpu_paths {
        gdr_agent::selftest::gpupaths::run()
    } else {
        let device = cli.device.expect("the mode group is required");
        return selftest(&device, cli.bytes, cli.memory);
    };
    match report {
        Ok(report) => {
            print!("{report}");
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

fn selftest(device: &std::path::Path, bytes: u64, memory: Memory) -> ExitCode {
    use gdr_agent::config::Memory as M;
    let memory = match memory {
        Memory::Auto => M::Auto,
        Memory::Cuda => M::Cuda,
        Memory::Host => M::Host,
    };
    use gdr_agent::selftest::child::ChildError;
    match gdr_agent::selftest::child::run(device, bytes, memory) {
        Ok(m) => {
            println!(
                "{}",
                serde_json::to_string(&m).expect("a measurement serialises")
            );
            ExitCode::SUCCESS
        }
        Err(e @ ChildError::Busy) => {
            eprintln!("gdr-selftest: {e}");
            ExitCode::from(gdr_agent::selftest::BUSY_EXIT as u8)
        }
        Err(e) => fail(&e),
    }
}

fn fail(e: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("gdr-selftest: {e}");
    ExitCode::FAILURE
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;
    use clap::error::ErrorKind;

    use super::*;

    fn parse(line: &str) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("gdr-selftest").chain(line.split_whitespace()))
    }

    #[test]
    fn the_cli_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_caller_is_understood() {
        // As the agent's ChildTester runs it.
        let c = parse("--device /dev/picoevb0 --bytes 4096 --memory host").unwrap();
        assert_eq!(c.device, Some(PathBuf::from("/dev/picoevb0")));
        assert_eq!((c.bytes, c.memory), (4096, Memory::Host));
        let c = parse("--device /dev/picoevb0").unwrap();
        assert_eq!((c.bytes, c.memory), (65536, Memory::Auto));
        // As agent/gpu/gpu-check.sh and docs/bring-up.md run it.
        assert_eq!(parse("--gpu-check 512").unwrap().gpu_check, Some(512));
        assert_eq!(parse("--gpu-check").unwrap().gpu_check, Some(256));
        assert!(parse("--gpu-paths").unwrap().gpu_paths);
        assert_eq!(parse("--gpu-wake 20000").unwrap().gpu_wake, Some(20000));
        assert_eq!(parse("--gpu-wake").unwrap().gpu_wake, Some(10000));
        assert_eq!(parse("--gpu-stream 256").unwrap().gpu_stream, Some(256));
        assert_eq!(parse("--gpu-stream").unwrap().gpu_stream, Some(64));
        assert_eq!(parse("--gpu-ring").unwrap().gpu_ring, Some(256));
    }

    #[test]
    fn usage_errors_are_claps_and_exit_2() {
        for (line, kind) in [
            ("", ErrorKind::MissingRequiredArgument),
            ("--bytes 4096", ErrorKind::MissingRequiredArgument),
            ("--device /d --bytes 6", ErrorKind::ValueValidation),
            ("--device /d --bytes 0", ErrorKind::ValueValidation),
            ("--device /d --memory gpu", ErrorKind::InvalidValue),
            ("--device /d --gpu-paths", ErrorKind::ArgumentConflict),
            ("--gpu-check lots", ErrorKind::ValueValidation),
            ("--device /d --bogus", ErrorKind::UnknownArgument),
        ] {
            let e = parse(line).err().unwrap();
            assert_eq!(e.kind(), kind, "'{line}': {e}");
            assert_eq!(e.exit_code(), 2, "'{line}'");
        }
        let help = parse("--help").err().unwrap();
        assert_eq!(help.kind(), ErrorKind::DisplayHelp);
        assert_eq!(help.exit_code(), 0);
    }
}
