//! gdr-guest-tests: runs inside the bench guest against /dev/picoevb0 and prints results on the console for
//! the host harness (`TEST <name> ... ok|FAILED: why|skipped (why)`, then
//! `GUEST RESULT: N passed, M failed, K skipped`).

mod bench;
mod buf;
mod dev;
mod exporter;
mod fuzz;
mod kstat;
mod loopback;
mod miss_bench;
mod perf;
mod ring;
mod rng;
mod rpc;
mod suite;
mod surface;
mod tests;

use bench::Op;
use std::process::ExitCode;

const USAGE: &str = "\
usage: gdr-guest-tests suite [--filter SUBSTR[,SUBSTR...]] [--seed N] [--extended] [--list] [--dev PATH] [--rpc PATH]
       gdr-guest-tests loopback [--bytes N] [--seed N] [--leds V] [--dev PATH] [--rpc PATH|none]
       gdr-guest-tests fuzz [--iterations N] [--threads N] [--seed N] [--dev PATH]
       gdr-guest-tests bench [--iterations N] [--seed N] [--dev PATH]   (ioctl times, registration cache on vs off)
       gdr-guest-tests perf [--sizes 4K,64K,1M,16M] [--ops h2c,c2h,h2c2h] [--volume BYTES] [--seed N] [--dev PATH] [--rpc PATH]
                            (the performance report: model timing mode, gdr vs the reference scheme)
       gdr-guest-tests perf --ring-seconds N [--dev PATH] [--rpc PATH]
                            (only the driver's stream ring, for N modeled seconds, every record checked)
       gdr-guest-tests rpc JSON [--rpc PATH]   (one model control request, e.g. '{\"cmd\":\"state\"}')
  --dev PATH   device node (default /dev/picoevb0)
  --rpc PATH   serial port to the harness's model relay (default /dev/ttyS1)";

fn parse_num(flag: &str, v: Option<String>) -> Result<u64, String> {
    let v = v.ok_or_else(|| format!("{flag} needs a value"))?;
    let r = match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => v.parse(),
    };
    r.map_err(|e| format!("{flag} {v}: {e}"))
}

/// A byte count with an optional K or M suffix (binary).
fn parse_size(v: &str) -> Result<u64, String> {
    let (digits, unit) = match v.strip_suffix(['K', 'k']) {
        Some(d) => (d, 1 << 10),
        None => match v.strip_suffix(['M', 'm']) {
            Some(d) => (d, 1 << 20),
            None => (v, 1),
        },
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .filter(|&n| n > 0 && n <= 256 << 20)
        .ok_or_else(|| format!("size {v:?}: expected 1..256M, e.g. 4K, 64K, 1M"))
}

/// A comma-separated list of operations (`h2c`, `c2h`, `h2c2h`).
fn parse_ops(v: &str) -> Result<Vec<Op>, String> {
    v.split(',')
        .map(|name| {
            Op::ALL
                .into_iter()
                .find(|op| op.name() == name)
                .ok_or_else(|| format!("--ops: unknown operation '{name}' (h2c, c2h, h2c2h)"))
        })
        .collect()
}

fn parse_sizes(v: &str) -> Result<Vec<u64>, String> {
    v.split(',').map(parse_size).collect()
}

fn run(args: Vec<String>) -> Result<i32, String> {
    let mut it = args.into_iter();
    let mode = it.next().ok_or("missing subcommand")?;
    let request = if mode == "rpc" {
        Some(it.next().ok_or("rpc needs a JSON request")?)
    } else {
        None
    };
    let (mut seed, mut filter, mut extended, mut list) = (None, None, false, false);
    let (mut bytes, mut leds) = (4u64 << 20, 2u64);
    // Defaults per subcommand: fuzz 2000 calls, bench 200 timed ioctls per file and case.
    let (mut iterations, mut threads) = (None, 4u64);
    let mut dev_path = dev::DEFAULT_PATH.to_string();
    let mut rpc_path = rpc::DEFAULT_TTY.to_string();
    let (mut sizes, mut volume) = (vec![4 << 10, 64 << 10, 1 << 20, 16 << 20], 2u64 << 20);
    let mut ops = Op::ALL.to_vec();
    let mut ring_seconds = None;
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--seed" => seed = Some(parse_num(&flag, it.next())?),
            "--filter" => filter = Some(it.next().ok_or("--filter needs a value")?),
            "--extended" => extended = true,
            "--list" => list = true,
            "--bytes" => bytes = parse_num(&flag, it.next())?,
            "--leds" => leds = parse_num(&flag, it.next())?,
            "--iterations" => iterations = Some(parse_num(&flag, it.next())?),
            "--threads" => threads = parse_num(&flag, it.next())?,
            "--dev" => dev_path = it.next().ok_or("--dev needs a value")?,
            "--rpc" => rpc_path = it.next().ok_or("--rpc needs a value")?,
            "--sizes" => sizes = parse_sizes(&it.next().ok_or("--sizes needs a value")?)?,
            "--ops" => ops = parse_ops(&it.next().ok_or("--ops needs a value")?)?,
            "--volume" => volume = parse_size(&it.next().ok_or("--volume needs a value")?)?,
            "--ring-seconds" => {
                ring_seconds = Some(parse_num(&flag, it.next())?)
                    .filter(|m| (1..=36_000).contains(m))
                    .map(Some)
                    .ok_or("--ring-seconds must be 1..36000")?;
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(0);
            }
            _ => return Err(format!("unknown argument {flag:?}")),
        }
    }
    let seed = seed.unwrap_or_else(rng::clock_seed);
    match mode.as_str() {
        "suite" => Ok(suite::run(&suite::Options {
            seed,
            filter,
            extended,
            list,
            dev_path,
            rpc_path,
        })),
        "loopback" => {
            let bytes = usize::try_from(bytes).map_err(|_| "--bytes too large")?;
            if bytes == 0 {
                return Err("--bytes must be > 0".into());
            }
            let leds = u32::try_from(leds).map_err(|_| "--leds must fit 32 bits")?;
            Ok(loopback::run(&loopback::Options {
                bytes,
                seed,
                leds,
                dev_path,
                rpc_path,
            }))
        }
        "fuzz" => {
            let threads = u32::try_from(threads)
                .ok()
                .filter(|t| (1..=64).contains(t))
                .ok_or("--threads must be 1..64")?;
            Ok(fuzz::run(&fuzz::Options {
                seed,
                iterations: iterations.unwrap_or(2000),
                threads,
                dev_path,
            }))
        }
        "bench" => {
            let iterations = iterations.unwrap_or(200);
            if iterations == 0 {
                return Err("--iterations must be > 0".into());
            }
            Ok(bench::run(&bench::Options {
                seed,
                iterations,
                dev_path,
            }))
        }
        "perf" => Ok(perf::run(&perf::Options {
            seed,
            dev_path,
            rpc_path,
            sizes,
            ops,
            volume,
            ring_seconds,
        })),
        "rpc" => {
            let req = request.unwrap_or_default();
            let req = gdr_model_control::Request::from_line(&req)?;
            match rpc::Rpc::open(&rpc_path).and_then(|mut r| r.call::<serde_json::Value>(&req)) {
                Ok(answer) => {
                    println!("{answer}");
                    Ok(0)
                }
                Err(e) => {
                    eprintln!("{e}");
                    Ok(1)
                }
            }
        }
        "-h" | "--help" => {
            println!("{USAGE}");
            Ok(0)
        }
        _ => Err(format!("unknown subcommand {mode:?}")),
    }
}

fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(code) => ExitCode::from(code as u8),
        Err(e) => {
            eprintln!("gdr-guest-tests: {e}\n{USAGE}");
            ExitCode::from(2)
        }
    }
}
