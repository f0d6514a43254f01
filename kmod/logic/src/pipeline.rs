//! The full-duplex round trip (H2C2H) through the card's RAM: the request is cut into chunks that fit half
//! of the RAM; while C2H drains chunk k from one half, H2C fills the other half with chunk k + 1. H2C and
//! C2H use opposite directions of the link, so a round trip costs about one pass of the slower direction
//! instead of the sum of both (the serial scheme: H2C a RAM-sized window, wait, C2H it back, wait).
//!
//! The driver runs the schedule in lockstep: each [`Step`] starts at most one H2C and one C2H chain and
//! ends when both finished. Lockstep is what makes it safe without any help from the hardware: a half is
//! written only after the C2H reading its previous chunk completed (the step before), and read only after
//! the H2C writing it completed (also the step before).
//!
//! Interrupt bounds for `n` chunks: `n + 1` steps, each needing one completion the driver must wait for,
//! so at least `n + 1` interrupts; at most `2n` when every run interrupts (the first and last steps run one
//! engine only). The driver (`kmod/picoevb/duplex.rs`) reaches the lower bound: when both engines run it
//! arms only C2H's interrupt (the faster direction on the PicoEVB's link, so it ends first) and then
//! watches H2C's write-back word, arming H2C's interrupt only if it is still busy after the spin. Chunks of
//! at most [`POLL_BYTES`] are polled whatever runs beside them (latency first): they interrupt only when
//! the spin gives up, so the lower bound is 0. The serial scheme needs `2 * ceil(len / ram)`.

use crate::errno::Errno;
use core::num::NonZeroU64;

/// `a / b` rounded up, with a divisor that cannot be zero (no panic path in the kernel build).
fn ceil_div(a: u64, b: NonZeroU64) -> u64 {
    a / b + u64::from(a % b != 0)
}

/// One chain of a step: `len` bytes at byte `offset` of the request, to or from RAM address `ram_addr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Move {
    /// Chunk number (0-based).
    pub chunk: u64,
    /// Offset of the chunk in the caller's source (H2C) or destination (C2H) buffer.
    pub offset: u64,
    /// Bytes.
    pub len: u64,
    /// FPGA RAM address of the half the chunk goes through.
    pub ram_addr: u64,
}

/// What runs at once: H2C of the next chunk and C2H of the previous one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    /// H2C chain, if a chunk is left to send.
    pub h2c: Option<Move>,
    /// C2H chain, if a chunk is waiting in RAM.
    pub c2h: Option<Move>,
}

/// How the driver learns that a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// The run's interrupt wakes the waiter.
    Irq,
    /// No interrupt: the waiter reads the engine's status when the other run has ended, and arms the
    /// interrupt only if this run is still busy after a few reads.
    Poll,
}

/// Chains of at most this many bytes are polled (the engine protocol watches their write-back word, then
/// arms the interrupt): a round trip's chunk (half the PicoEVB's 64 KiB RAM), about 90 us on Gen2 x1, so
/// that no step of a round trip pays an interrupt's wake-up and its handler's register reads (about 7 us
/// of each 90). Longer chains (one-way requests beyond 32 KiB) sleep on their interrupt, which costs the
/// CPU nothing while the data moves.
pub const POLL_BYTES: u64 = 32 * 1024;

/// How a lone chain of `len` bytes is waited for (one-way requests, and a round trip's first and last
/// steps).
pub fn wake_for(len: u64) -> Wake {
    if len <= POLL_BYTES {
        Wake::Poll
    } else {
        Wake::Irq
    }
}

/// The wake-ups of an H2C run of `h2c` bytes and a C2H run of `c2h` bytes started together (0: that
/// engine does not run). When both run, H2C is polled after C2H (the faster direction on the PicoEVB's
/// link, so it ends first), which interrupts unless it is small; a lone run as [`wake_for`] says. At most
/// one interrupt per step is what makes the `n + 1` of [`Pipeline::irq_bounds`].
pub fn wakes(h2c: u64, c2h: u64) -> (Wake, Wake) {
    if h2c > 0 && c2h > 0 {
        (Wake::Poll, wake_for(c2h))
    } else {
        (wake_for(h2c), wake_for(c2h))
    }
}

/// The schedule of one round trip.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pipeline {
    len: u64,
    half: u64,
    chunk: u64,
    chunks: u64,
}

impl Pipeline {
    /// Plans a round trip of `len` bytes through `ram` bytes of card RAM. Chunks are as equal as `align`
    /// (a power of two, the page size: descriptors and TLPs stay whole) allows and at most half the RAM,
    /// so the steps are balanced and the pipeline fills and drains with the smallest chunk that works.
    pub fn new(len: u64, ram: u64, align: u64) -> Result<Self, Errno> {
        let nz = |v: u64| NonZeroU64::new(v).ok_or(Errno::EINVAL);
        let (len_nz, align_nz) = (nz(len)?, nz(align)?);
        let pair = align.checked_mul(2).ok_or(Errno::EINVAL)?;
        if !align.is_power_of_two() || ram < pair || ram % pair != 0 {
            return Err(Errno::EINVAL);
        }
        let half = nz(ram / 2)?;
        // At least one chunk (len > 0), and a chunk holds at least one byte.
        let chunks = nz(ceil_div(len, half))?;
        let even = ceil_div(len_nz.get(), chunks);
        let chunk = nz(ceil_div(even, align_nz)
            .saturating_mul(align)
            .min(half.get()))?;
        Ok(Self {
            len,
            half: half.get(),
            chunk: chunk.get(),
            chunks: ceil_div(len, chunk),
        })
    }

    /// Number of chunks.
    pub fn chunks(&self) -> u64 {
        self.chunks
    }

    /// Number of steps: one per chunk plus the last chunk's C2H.
    pub fn steps(&self) -> u64 {
        self.chunks + 1
    }

    /// The least and most interrupts the schedule needs (see the module comment).
    pub fn irq_bounds(&self) -> (u64, u64) {
        let least = if self.chunk <= POLL_BYTES {
            0
        } else {
            self.steps()
        };
        (least, 2 * self.chunks)
    }

    /// Interrupts the serial scheme (H2C a RAM-sized window, then C2H it) needs for `len` through `ram`.
    pub fn serial_irqs(len: u64, ram: u64) -> u64 {
        2 * ceil_div(len, NonZeroU64::new(ram).unwrap_or(NonZeroU64::MIN))
    }

    fn chunk_move(&self, k: u64) -> Move {
        let offset = k * self.chunk;
        Move {
            chunk: k,
            offset,
            len: self.chunk.min(self.len - offset),
            ram_addr: (k % 2) * self.half,
        }
    }

    /// Step `s` (0-based, below [`Pipeline::steps`]).
    pub fn step(&self, s: u64) -> Step {
        Step {
            h2c: (s < self.chunks).then(|| self.chunk_move(s)),
            c2h: (s >= 1 && s <= self.chunks).then(|| self.chunk_move(s - 1)),
        }
    }

    /// Every step in order.
    pub fn iter(&self) -> impl Iterator<Item = Step> + '_ {
        (0..self.steps()).map(|s| self.step(s))
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::{vec, vec::Vec};

    const RAM: u64 = 64 * 1024;
    const PAGE: u64 = 4096;

    /// Runs the schedule against a simulated RAM, checking the lockstep rules, and returns the output.
    fn simulate(len: u64) -> (Pipeline, Vec<u8>) {
        let p = Pipeline::new(len, RAM, PAGE).unwrap();
        let src: Vec<u8> = (0..len).map(|i| (i * 7 + i / 251) as u8).collect();
        let mut ram = vec![0u8; RAM as usize];
        let mut dst = vec![0u8; len as usize];
        // Which chunk each half holds, and whether its C2H is done.
        let mut holds: [Option<(u64, bool)>; 2] = [None, None];
        for step in p.iter() {
            // Both chains of a step run at once: they must not touch the same half.
            if let (Some(h), Some(c)) = (step.h2c, step.c2h) {
                assert_ne!(h.ram_addr, c.ram_addr, "H2C and C2H share a half");
            }
            if let Some(c) = step.c2h {
                let half = (c.ram_addr / (RAM / 2)) as usize;
                assert_eq!(
                    holds[half],
                    Some((c.chunk, false)),
                    "C2H of a chunk not in RAM"
                );
                let r = c.ram_addr as usize;
                dst[c.offset as usize..(c.offset + c.len) as usize]
                    .copy_from_slice(&ram[r..r + c.len as usize]);
                holds[half] = Some((c.chunk, true));
            }
            if let Some(h) = step.h2c {
                let half = (h.ram_addr / (RAM / 2)) as usize;
                assert!(
                    matches!(holds[half], None | Some((_, true))),
                    "H2C overwrites a chunk not yet drained"
                );
                assert!(h.ram_addr + h.len <= RAM);
                let r = h.ram_addr as usize;
                ram[r..r + h.len as usize]
                    .copy_from_slice(&src[h.offset as usize..(h.offset + h.len) as usize]);
                holds[half] = Some((h.chunk, false));
            }
        }
        assert_eq!(dst, src, "round trip of {len} bytes");
        (p, dst)
    }

    #[test]
    fn every_byte_arrives_in_order() {
        for len in [
            1,
            4095,
            4096,
            32 * 1024,
            32 * 1024 + 1,
            40 * 1024,
            RAM,
            RAM + 1,
            1 << 20,
            (1 << 20) + 12345,
        ] {
            simulate(len);
        }
    }

    #[test]
    fn chunk_counts_and_interrupt_bounds() {
        let (p, _) = simulate(1 << 20);
        assert_eq!((p.chunks(), p.steps()), (32, 33));
        // The PicoEVB's chunks (32 KiB) are polled: from no interrupt to two per chunk.
        assert_eq!(p.irq_bounds(), (0, 64));
        assert_eq!(Pipeline::serial_irqs(1 << 20, RAM), 32);
        let one = Pipeline::new(100, RAM, PAGE).unwrap();
        assert_eq!(
            (one.chunks(), one.steps(), one.irq_bounds()),
            (1, 2, (0, 2))
        );
        // 16 MiB: 512 chunks of 32 KiB.
        let big = Pipeline::new(16 << 20, RAM, PAGE).unwrap();
        assert_eq!(big.irq_bounds(), (0, 1024));
        // Through a RAM four times larger the chunks (128 KiB) interrupt: one per step at least.
        let larger = Pipeline::new(16 << 20, 4 * RAM, PAGE).unwrap();
        assert_eq!(larger.irq_bounds(), (129, 256));
    }

    #[test]
    fn chunks_are_balanced_and_page_sized() {
        // 40 KiB: two chunks of 20 KiB, not 32 + 8.
        let p = Pipeline::new(40 * 1024, RAM, PAGE).unwrap();
        let lens: Vec<u64> = p.iter().filter_map(|s| s.h2c).map(|m| m.len).collect();
        assert_eq!(lens, [20 * 1024, 20 * 1024]);
        // 33 KiB + 1: two chunks, the first rounded up to whole pages.
        let p = Pipeline::new(33 * 1024 + 1, RAM, PAGE).unwrap();
        let lens: Vec<u64> = p.iter().filter_map(|s| s.h2c).map(|m| m.len).collect();
        assert_eq!(lens, [20 * 1024, 13 * 1024 + 1]);
        for s in Pipeline::new((5 << 20) + 3, RAM, PAGE).unwrap().iter() {
            for m in [s.h2c, s.c2h].into_iter().flatten() {
                assert!(m.len <= RAM / 2 && m.len > 0);
                assert_eq!(m.offset % PAGE, 0);
            }
        }
    }

    #[test]
    fn first_and_last_steps_run_one_engine() {
        let p = Pipeline::new(RAM, RAM, PAGE).unwrap();
        let steps: Vec<Step> = p.iter().collect();
        assert_eq!(steps.len(), 3);
        assert!(steps[0].h2c.is_some() && steps[0].c2h.is_none());
        assert!(steps[1].h2c.is_some() && steps[1].c2h.is_some());
        assert!(steps[2].h2c.is_none() && steps[2].c2h.is_some());
        assert_eq!(steps[1].h2c.unwrap().ram_addr, RAM / 2);
        assert_eq!(steps[1].c2h.unwrap().ram_addr, 0);
    }

    /// Interrupts armed over a schedule.
    fn armed(p: &Pipeline) -> u64 {
        p.iter()
            .map(|s| {
                let len = |m: Option<Move>| m.map_or(0, |m| m.len);
                let (h, c) = wakes(len(s.h2c), len(s.c2h));
                u64::from(s.h2c.is_some() && h == Wake::Irq)
                    + u64::from(s.c2h.is_some() && c == Wake::Irq)
            })
            .sum()
    }

    #[test]
    fn one_interrupt_armed_per_step() {
        let big = POLL_BYTES + PAGE;
        assert_eq!(wakes(big, big), (Wake::Poll, Wake::Irq));
        assert_eq!(wakes(big, 0).0, Wake::Irq);
        assert_eq!(wakes(0, big).1, Wake::Irq);
        // Over a schedule of big chunks (a RAM larger than the PicoEVB's): exactly one armed run per step,
        // the lower bound of `irq_bounds`.
        let p = Pipeline::new(1 << 20, 4 * RAM, PAGE).unwrap();
        assert!(p.chunks() > 1 && p.irq_bounds().0 == p.steps());
        assert_eq!(armed(&p), p.irq_bounds().0);
    }

    #[test]
    fn small_chunks_are_polled() {
        assert_eq!(wakes(POLL_BYTES, POLL_BYTES), (Wake::Poll, Wake::Poll));
        assert_eq!(wakes(PAGE, 0), (Wake::Poll, Wake::Poll));
        assert_eq!(wake_for(POLL_BYTES + 1), Wake::Irq);
        for len in [PAGE, POLL_BYTES, 1 << 20] {
            let p = Pipeline::new(len, RAM, PAGE).unwrap();
            assert_eq!((armed(&p), p.irq_bounds().0), (0, 0));
        }
    }

    #[test]
    fn bad_arguments() {
        assert_eq!(Pipeline::new(0, RAM, PAGE), Err(Errno::EINVAL));
        assert_eq!(Pipeline::new(1, RAM, 3000), Err(Errno::EINVAL));
        assert_eq!(
            Pipeline::new(1, PAGE, PAGE),
            Err(Errno::EINVAL),
            "RAM below two pages"
        );
        assert_eq!(
            Pipeline::new(1, 3 * PAGE, PAGE),
            Err(Errno::EINVAL),
            "odd number of pages"
        );
        // The largest request the ABI allows plans without overflow.
        let p = Pipeline::new(u64::MAX / 2, RAM, PAGE).unwrap();
        assert_eq!(p.step(p.steps() - 1).c2h.unwrap().chunk, p.chunks() - 1);
    }
}
