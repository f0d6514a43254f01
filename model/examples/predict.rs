//! What the timing model predicts for each way of driving the card, without a VM: a scripted driver
//! (the same register accesses as gdr's `engine.rs` and `duplex.rs`) against the model's `Timing`.
//! `cargo run -p picoevb-model --example predict [-- mps=256,irq_latency_ns=2000]` prints MB/s on the
//! modeled clock beside the link ceiling, for gdr's round trip before the pipeline (serial, window by
//! window), gdr (one chain per request; the round trip as the full-duplex pipeline of
//! `picoevb_logic::pipeline`, H2C polled, C2H's interrupt waking the waiter), and the reference scheme
//! (one descriptor and one interrupt per DMA, serial through the 64 KiB RAM) on contiguous and on
//! page-scattered buffers.

use picoevb_logic::pipeline::Pipeline;
use picoevb_model::timing::{self, Params, RunCost, Timing};
use picoevb_regs::xdma::{self, Dir};

const RAM: u64 = 64 * 1024;
const PAGE: u64 = 4096;

/// Host pieces of `len` bytes at buffer offset `off`: one per page when scattered, else one.
fn pieces(off: u64, len: u64, scattered: bool) -> Vec<(u64, u64)> {
    // Scattered pages sit 8 KiB apart in bus space, so no two are contiguous.
    let base = 0x1_0000_0000u64;
    if !scattered {
        return vec![(base + off, len)];
    }
    let mut v = Vec::new();
    let mut o = off;
    while o < off + len {
        let n = (PAGE - o % PAGE).min(off + len - o);
        v.push((base + (o / PAGE) * 2 * PAGE + o % PAGE, n));
        o += n;
    }
    v
}

/// gdr's register accesses to start one run (engine.rs `program`), then the run itself; `irq`: its
/// interrupt armed.
fn start(t: &mut Timing, dir: Dir, descs: &[(u64, u64)], irq: bool) {
    // Three SGDMA writes, the interrupt mask (and the channel enable when armed), Run.
    let writes = if irq { 6 } else { 5 };
    for _ in 0..writes {
        t.mmio_write();
    }
    let p = t
        .start(dir, t.params.mps, t.params.mrrs)
        .expect("timing on");
    let mut c = RunCost::new(dir, p);
    // Adjacent blocks of at most 64 (a chain in one 4 KiB table never needs more than 2).
    for b in descs.chunks(64) {
        c.block(b.len() as u32);
    }
    for &(host, len) in descs {
        c.descriptor(host, len);
    }
    t.finish(dir, &c, irq);
}

/// The interrupt handler of a run (request bits, the engine's status, its channel enable off).
fn interrupt(t: &mut Timing, dir: Dir) {
    t.mmio_read(Some(xdma::IRQ_BLOCK + xdma::IRQ_CHAN_REQ), dir.irq_bit());
    t.mmio_read(Some(dir.channel_base() + xdma::CH_STATUS_RC), 6);
    t.mmio_write();
}

/// A polled run: the status read that finds it stopped.
fn poll(t: &mut Timing, dir: Dir) {
    t.mmio_read(Some(dir.channel_base() + xdma::CH_STATUS_RC), 6);
}

/// `Run::finish` after a clean run: the completed count, then Run and the mask cleared.
fn finish(t: &mut Timing, dir: Dir) {
    t.mmio_read(Some(dir.channel_base() + xdma::CH_COMPLETED_COUNT), 1);
    t.mmio_write();
    t.mmio_write();
}

fn one_run(t: &mut Timing, dir: Dir, descs: &[(u64, u64)]) {
    start(t, dir, descs, true);
    interrupt(t, dir);
    finish(t, dir);
}

#[derive(Clone, Copy)]
enum Scheme {
    /// One chain per 64 KiB ioctl; the round trip serial, window by window (gdr before the pipeline).
    Serial,
    /// The round trip through `pipeline` as `duplex.rs` runs it: H2C polled, C2H's interrupt wakes.
    Duplex,
    /// One run per contiguous piece, serial.
    Reference,
}

/// Modeled ns for one request of `len` bytes.
fn request(p: Params, scheme: Scheme, dir: Option<Dir>, len: u64, scattered: bool) -> u64 {
    let mut t = Timing::new(true, p);
    let windows: Vec<(u64, u64)> = (0..len)
        .step_by(RAM as usize)
        .map(|s| (s, RAM.min(len - s)))
        .collect();
    match (scheme, dir) {
        (Scheme::Duplex, None) => {
            let pl = Pipeline::new(len, RAM, PAGE).expect("valid");
            for step in pl.iter() {
                let both = step.h2c.is_some() && step.c2h.is_some();
                if let Some(m) = step.h2c {
                    start(&mut t, Dir::H2c, &pieces(m.offset, m.len, scattered), !both);
                }
                if let Some(m) = step.c2h {
                    start(&mut t, Dir::C2h, &pieces(m.offset, m.len, scattered), true);
                    interrupt(&mut t, Dir::C2h);
                    finish(&mut t, Dir::C2h);
                }
                if step.h2c.is_some() {
                    if both {
                        poll(&mut t, Dir::H2c);
                    } else {
                        interrupt(&mut t, Dir::H2c);
                    }
                    finish(&mut t, Dir::H2c);
                }
            }
        }
        (Scheme::Reference, _) => {
            for &(s, l) in &windows {
                for d in [Dir::H2c, Dir::C2h] {
                    if dir.is_none() || dir == Some(d) {
                        for piece in pieces(s, l, scattered) {
                            one_run(&mut t, d, &[piece]);
                        }
                    }
                }
            }
        }
        _ => {
            for &(s, l) in &windows {
                for d in [Dir::H2c, Dir::C2h] {
                    if dir.is_none() || dir == Some(d) {
                        one_run(&mut t, d, &pieces(s, l, scattered));
                    }
                }
            }
        }
    }
    t.clock_ns()
}

fn main() -> Result<(), String> {
    let p = match std::env::args().nth(1) {
        Some(spec) => timing::parse_spec(&spec)?,
        None => Params::default(),
    };
    let (ch, cc) = (p.ceiling_mbps(Dir::H2c), p.ceiling_mbps(Dir::C2h));
    println!(
        "ceilings: H2C {ch:.1} MB/s, C2H {cc:.1} MB/s, round trip full duplex {:.1}",
        ch.min(cc)
    );
    println!(
        "{:<6} {:>9} {:>10} | {:>16} {:>16} {:>16} | {:>10}",
        "op", "size", "buffer", "gdr serial", "gdr", "reference", "gdr / ref"
    );
    for (name, dir, ceiling) in [
        ("h2c", Some(Dir::H2c), ch),
        ("c2h", Some(Dir::C2h), cc),
        ("h2c2h", None, ch.min(cc)),
    ] {
        for len in [4 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20] {
            for scattered in [false, true] {
                let mbps = |s| len as f64 * 1000.0 / request(p, s, dir, len, scattered) as f64;
                let (serial, r) = (mbps(Scheme::Serial), mbps(Scheme::Reference));
                let gdr = if dir.is_none() {
                    mbps(Scheme::Duplex)
                } else {
                    serial
                };
                let cell = |v: f64| format!("{v:6.1} ({:5.1}%)", 100.0 * v / ceiling);
                println!(
                    "{name:<6} {len:>9} {:>10} | {} {} {} | {:>9.2}x",
                    if scattered { "4K pages" } else { "contiguous" },
                    cell(serial),
                    cell(gdr),
                    cell(r),
                    gdr / r
                );
            }
        }
    }
    Ok(())
}
