//! gdr-appliance-probe: what an application does with the agent, for the appliance's test scenarios (run as
//! a test user through `runuser`). Every outcome is one line on stdout, the exit code says pass or fail.
//!
//! * `dma`: Open card 0 through the agent, write a pattern to the FPGA and read it back; `DMA ok N bytes`.
//!   Refused callers print `DENIED <error>` and exit 3, so a test can tell a refusal from a broken card.
//! * `hold`: as `dma`, then print `HOLDING`, wait for a line on stdin (the test reprograms the card
//!   meanwhile), DMA again through the same fd and print `AFTER ok` or `AFTER errno N`; exit 0 only for
//!   ENODEV (the fd was revoked).

use std::io::BufRead;
use std::process::ExitCode;

use gdr_client::{Agent, Device, Error};

const LEN: usize = 4096;

/// One H2C and one C2H of a pattern through `dev`; the bytes must come back unchanged.
fn round_trip(dev: &Device, seed: u8) -> Result<(), Error> {
    let src: Vec<u8> = (0..LEN).map(|i| (i as u8).wrapping_mul(7) ^ seed).collect();
    let mut dst = vec![0u8; LEN];
    dev.h2c(&src, 0)?;
    dev.c2h(&mut dst, 0)?;
    match src.iter().zip(&dst).position(|(a, b)| a != b) {
        None => Ok(()),
        Some(i) => Err(Error::InvalidArgument(format!(
            "byte {i} came back {:#04x}, wrote {:#04x}",
            dst[i], src[i]
        ))),
    }
}

fn open() -> Result<Device, ExitCode> {
    let opened = Agent::system().and_then(|a| a.open(0));
    match opened {
        Ok(d) => Ok(d),
        Err(e @ Error::AccessDenied(_)) => {
            println!("DENIED {e}");
            Err(ExitCode::from(3))
        }
        Err(e) => {
            println!("ERROR open: {e}");
            Err(ExitCode::FAILURE)
        }
    }
}

fn run(cmd: &str) -> ExitCode {
    let dev = match open() {
        Ok(d) => d,
        Err(code) => return code,
    };
    if let Err(e) = round_trip(&dev, 0x5a) {
        println!("ERROR dma: {e}");
        return ExitCode::FAILURE;
    }
    println!("DMA ok {} bytes", 2 * LEN);
    if cmd == "dma" {
        return ExitCode::SUCCESS;
    }
    println!("HOLDING");
    let _ = std::io::stdin().lock().lines().next();
    match round_trip(&dev, 0xa5) {
        Ok(()) => {
            println!("AFTER ok");
            ExitCode::FAILURE
        }
        Err(e) => match e.errno() {
            Some(n) => {
                println!("AFTER errno {n} ({e})");
                if n == libc_enodev() {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::FAILURE
                }
            }
            None => {
                println!("AFTER error {e}");
                ExitCode::FAILURE
            }
        },
    }
}

/// ENODEV on Linux (asm-generic/errno-base.h); spelled out to keep the probe free of a libc dependency.
const fn libc_enodev() -> i32 {
    19
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        [cmd @ ("dma" | "hold")] => run(cmd),
        _ => {
            eprintln!("usage: gdr-appliance-probe dma|hold");
            ExitCode::from(2)
        }
    }
}
