//! Command-line parsing (plain std: the model should build fast).

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::options::{Design, DeviceOptions};

/// Usage text.
pub const USAGE: &str = "\
usage: picoevb-model --socket PATH [--control PATH] [--design gdr|reference]
                     [--bandwidth-mbps N] [--timing on|K=V,...] [--build-hash HEX] [--build-time SECS] [-v]

Serves a software model of the PicoEVB FPGA (XDMA + 64 KiB BRAM + LEDs) to one QEMU vfio-user-pci client
and exits when it disconnects.

  --socket PATH         vfio-user socket to listen on
  --control PATH        control socket (newline-delimited JSON, see README.md)
  --design NAME         gdr (default: GPIO + ID block in BAR0) or reference (NVIDIA's bitstream: GPIO only)
  --bandwidth-mbps N    limit each DMA engine to N MB/s (default: as fast as possible)
  --timing SPEC         timing mode: a modeled PCIe Gen2 x1 clock (docs/perf.md); 'on' or 'jetson' for the
                        PicoEVB behind a Jetson (MPS 256, MRRS 512), 'pcie-reset' for the PCIe reset values
                        (MPS 128, MRRS 512, or what the OS programs), then parameters such as
                        irq_latency_ns=2000 (e.g. pcie-reset,mps=256)
  --build-hash HEX      ID block BUILD_HASH (default 0)
  --build-time SECS     ID block BUILD_TIME (default: the model's start time)
  -v                    debug logging (RUST_LOG overrides)
  -h, --help            this text";

/// Parsed command line.
#[derive(Clone, Debug)]
pub struct Cli {
    /// vfio-user socket path.
    pub socket: PathBuf,
    /// Control socket path.
    pub control: Option<PathBuf>,
    /// Device settings.
    pub options: DeviceOptions,
    /// `-v` given.
    pub verbose: bool,
}

/// Outcome of parsing.
#[derive(Debug)]
pub enum Parsed {
    /// Run with these settings.
    Run(Cli),
    /// `--help`: print [`USAGE`] and exit 0.
    Help,
}

/// Parses the arguments after the program name.
pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Parsed, String> {
    let mut args = args.into_iter();
    let mut socket = None;
    let mut control = None;
    let mut verbose = false;
    let mut build_time = None;
    let mut options = DeviceOptions::default();
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or(format!("{flag} needs a value"))
        };
        match flag.as_str() {
            "--socket" => socket = Some(PathBuf::from(value()?)),
            "--control" => control = Some(PathBuf::from(value()?)),
            "--design" => options.design = value()?.parse::<Design>()?,
            "--bandwidth-mbps" => {
                let v = value()?;
                let n: u64 = v
                    .parse()
                    .map_err(|_| format!("--bandwidth-mbps: '{v}' is not a number"))?;
                options.bandwidth_mbps = (n > 0).then_some(n);
            }
            "--timing" => options.timing = Some(crate::timing::parse_spec(&value()?)?),
            "--build-hash" => {
                let v = value()?;
                let digits = v.trim_start_matches("0x");
                let hex = digits.get(..digits.len().min(8)).unwrap_or(digits);
                options.build_hash = u32::from_str_radix(hex, 16)
                    .map_err(|_| format!("--build-hash: '{v}' is not hexadecimal"))?;
            }
            "--build-time" => {
                let v = value()?;
                build_time = Some(
                    v.parse()
                        .map_err(|_| format!("--build-time: '{v}' is not a number"))?,
                );
            }
            "-v" | "--verbose" => verbose = true,
            "-h" | "--help" => return Ok(Parsed::Help),
            other => return Err(format!("unknown argument '{other}'")),
        }
    }
    let socket = socket.ok_or("--socket PATH is required")?;
    options.build_time = build_time.unwrap_or_else(|| {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        u32::try_from(now).unwrap_or(u32::MAX)
    });
    Ok(Parsed::Run(Cli {
        socket,
        control,
        options,
        verbose,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Result<Cli, String> {
        match parse(args.iter().map(|s| s.to_string()))? {
            Parsed::Run(c) => Ok(c),
            Parsed::Help => Err("help".into()),
        }
    }

    #[test]
    fn full_command_line() {
        let c = run(&[
            "--socket",
            "/tmp/s",
            "--control=/tmp/c",
            "--design",
            "reference",
            "--bandwidth-mbps",
            "400",
            "--build-hash",
            "81690a8c0ffee",
            "--build-time",
            "1700000000",
            "-v",
        ])
        .unwrap();
        assert_eq!(c.socket, PathBuf::from("/tmp/s"));
        assert_eq!(c.control, Some(PathBuf::from("/tmp/c")));
        assert_eq!(c.options.design, Design::Reference);
        assert_eq!(c.options.bandwidth_mbps, Some(400));
        assert_eq!(
            c.options.build_hash, 0x81690a8c,
            "first 32 bits of the hash"
        );
        assert_eq!(c.options.build_time, 1_700_000_000);
        assert!(c.verbose);
    }

    #[test]
    fn errors_are_clear() {
        assert_eq!(run(&[]).unwrap_err(), "--socket PATH is required");
        assert_eq!(run(&["--socket"]).unwrap_err(), "--socket needs a value");
        assert!(
            run(&["--socket", "s", "--design", "x"])
                .unwrap_err()
                .contains("unknown design 'x'")
        );
        assert!(
            run(&["--socket", "s", "--build-hash", "xyz"])
                .unwrap_err()
                .contains("not hexadecimal")
        );
        assert!(matches!(parse(["--help".to_string()]), Ok(Parsed::Help)));
    }
}
