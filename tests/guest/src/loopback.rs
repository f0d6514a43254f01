//! The appliance's main job as a demo: host memory -> FPGA RAM -> host memory through the card, every byte
//! checked, with a one-line account of what was verified.

use std::time::Instant;

use picoevb_regs::gpio::leds_lit;

use crate::buf::compare;
use crate::dev::Device;
use crate::rng::Rng;
use crate::rpc::Rpc;
use crate::suite::{report, summary};

pub struct Options {
    pub bytes: usize,
    pub seed: u64,
    /// LED value to show while the copy runs (active-low: 2 lights LEDs 0 and 2).
    pub leds: u32,
    pub dev_path: String,
    pub rpc_path: String,
}

pub fn run(opts: &Options) -> i32 {
    println!("GUEST SEED {}", opts.seed);
    let r = loopback(opts).map(|line| println!("{line}"));
    report("loopback", &r);
    summary(usize::from(r.is_ok()), usize::from(r.is_err()), 0)
}

fn loopback(opts: &Options) -> Result<String, String> {
    let dev = Device::open(&opts.dev_path).map_err(|e| format!("open {}: {e}", opts.dev_path))?;
    let info = dev.card_info().map_err(|e| format!("CARD_INFO: {e}"))?;
    dev.set_leds(opts.leds)
        .map_err(|e| format!("LED {:#x}: {e}", opts.leds))?;
    let leds = check_leds(opts)?;

    let n = opts.bytes;
    let mut src = vec![0u8; n];
    Rng::new(opts.seed).fill(&mut src);
    // The complement, so a byte the DMA did not write cannot match by accident.
    let mut dst: Vec<u8> = src.iter().map(|b| !b).collect();
    let t0 = Instant::now();
    let dma_ns = dev
        .h2c2h(&src, &mut dst)
        .map_err(|e| format!("H2C2H {n} bytes: {e}"))?;
    let wall = t0.elapsed();
    compare(&format!("loopback of {n} bytes"), &src, &dst)?;
    if dma_ns == 0 {
        return Err("dma_time_ns is 0".into());
    }
    Ok(format!(
        "LOOPBACK verified {n} bytes host->FPGA->host in {} ms (dma {} ms), fpga_ram_size {}, leds {leds}",
        wall.as_millis(),
        dma_ns / 1_000_000,
        info.fpga_ram_size
    ))
}

/// Asks the model which LEDs are lit; "unverified" with `--rpc none` (no harness to ask).
fn check_leds(opts: &Options) -> Result<&'static str, String> {
    if opts.rpc_path == "none" {
        return Ok("set (unverified: no rpc)");
    }
    let st = Rpc::open(&opts.rpc_path)?.state()?;
    if st.leds != leds_lit(opts.leds) {
        return Err(format!(
            "LED {:#x}: model shows lit mask {:#x}, expected {:#x}",
            opts.leds,
            st.leds,
            leds_lit(opts.leds)
        ));
    }
    Ok("ok")
}
