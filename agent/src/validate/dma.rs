//! The DMA measurements, over any [`Dma`] (the card through `gdr_client::Device`; a fake RAM in tests):
//! integrity over sizes, FPGA offsets and host alignments, bandwidth each way and through the round trip,
//! and small-transfer latency. Only measuring here; [`super::judge`] decides.

use std::time::Instant;

use gdr_client::{Clock, Device, Error, Sink, Source, Transfer};

/// What validation needs of a card.
pub trait Dma {
    fn h2c(&self, src: &[u8], fpga: u64) -> Result<Transfer, Error>;
    fn c2h(&self, dst: &mut [u8], fpga: u64) -> Result<Transfer, Error>;
    /// Host -> FPGA RAM -> host in one request.
    fn h2c2h(&self, src: &[u8], dst: &mut [u8]) -> Result<Transfer, Error>;
}

impl Dma for Device {
    fn h2c(&self, src: &[u8], fpga: u64) -> Result<Transfer, Error> {
        Device::h2c(self, src, fpga)
    }

    fn c2h(&self, dst: &mut [u8], fpga: u64) -> Result<Transfer, Error> {
        Device::c2h(self, dst, fpga)
    }

    fn h2c2h(&self, src: &[u8], dst: &mut [u8]) -> Result<Transfer, Error> {
        let len = src.len() as u64;
        Device::h2c2h(self, Source::Host(src), Sink::Host(dst), len)
    }
}

/// The data each transfer carries: a counter that shows misplaced words, its complement (every bit
/// flips) and seeded pseudo-random bytes (no structure a bug could reproduce by accident).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    Counter,
    Inverted,
    Random(u64),
}

impl Pattern {
    pub fn name(self) -> String {
        match self {
            Pattern::Counter => "counter".into(),
            Pattern::Inverted => "inverted counter".into(),
            Pattern::Random(seed) => format!("random (seed {seed:#x})"),
        }
    }

    /// Fills `buf` with the pattern.
    pub fn fill(self, buf: &mut [u8]) {
        match self {
            Pattern::Counter | Pattern::Inverted => {
                let flip = if self == Pattern::Inverted { 0xff } else { 0 };
                for (i, b) in buf.iter_mut().enumerate() {
                    // Little-endian words of the self-test's (y << 16) | x pattern.
                    let w = crate::selftest::pattern::word(i / 4);
                    *b = (w >> (8 * (i % 4))) as u8 ^ flip;
                }
            }
            Pattern::Random(seed) => {
                let mut x = seed | 1;
                for chunk in buf.chunks_mut(8) {
                    // xorshift64
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
                }
            }
        }
    }
}

/// One transfer's case: bytes, FPGA offset, host misalignment of source and destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Case {
    pub len: usize,
    pub fpga: u64,
    pub src_mis: usize,
    pub dst_mis: usize,
}

/// The cases for a card with `ram` bytes: the whole RAM aligned, and sizes around byte, word and page
/// boundaries at odd FPGA offsets and odd host addresses, the last one ending at the RAM's last byte.
pub fn cases(ram: usize) -> Vec<Case> {
    let c = |len: usize, fpga: usize, src_mis, dst_mis| Case {
        len,
        fpga: fpga as u64,
        src_mis,
        dst_mis,
    };
    let mut v = vec![c(ram, 0, 0, 0), c(1, 0, 1, 3), c(33, 1, 3, 0)];
    if ram > 8192 {
        v.push(c(4097, 4093, 1, 4095));
    }
    v.push(c(ram.min(4096) - 1, ram - (ram.min(4096) - 1), 0, 1));
    v
}

/// The first byte that came back wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    /// The transfer (case and pattern).
    pub what: String,
    pub offset: usize,
    pub expected: u8,
    pub got: u8,
}

/// Integrity over every case and pattern.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Integrity {
    pub transfers: u32,
    pub bytes: u64,
    /// Bytes that differ, and the first.
    pub wrong: u64,
    pub first: Option<Mismatch>,
}

impl Integrity {
    fn compare(&mut self, what: impl FnOnce() -> String, want: &[u8], got: &[u8]) {
        self.transfers += 1;
        self.bytes += want.len() as u64;
        let mut first = None;
        for (i, (w, g)) in want.iter().zip(got).enumerate() {
            if w != g {
                self.wrong += 1;
                first.get_or_insert((i, *w, *g));
            }
        }
        if let (None, Some((offset, expected, got))) = (&self.first, first) {
            self.first = Some(Mismatch {
                what: what(),
                offset,
                expected,
                got,
            });
        }
    }
}

/// A buffer whose slice `[mis..mis + len]` starts `mis` bytes past an 8-byte boundary.
struct Buf {
    v: Vec<u64>,
    mis: usize,
    len: usize,
}

impl Buf {
    fn new(len: usize, mis: usize) -> Self {
        Self {
            v: vec![0; (len + mis).div_ceil(8) + 1],
            mis,
            len,
        }
    }

    fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: u64 has no padding and every byte pattern is valid; the view covers the same memory
        // (`v` holds at least `mis + len` bytes) and borrows `self` mutably.
        let all = unsafe {
            std::slice::from_raw_parts_mut(self.v.as_mut_ptr().cast::<u8>(), self.v.len() * 8)
        };
        &mut all[self.mis..self.mis + self.len]
    }
}

/// Every case with every pattern: H2C then C2H into a buffer that starts as the data's complement (a
/// transfer that never happened cannot pass), then the whole round trip (`round_trip_len` bytes, more than
/// the RAM holds, through the driver's chunking).
pub fn integrity(dev: &impl Dma, ram: usize, round_trip_len: usize) -> Result<Integrity, Error> {
    let mut r = Integrity::default();
    let patterns = [
        Pattern::Counter,
        Pattern::Inverted,
        Pattern::Random(0x9e37_79b9_7f4a_7c15),
    ];
    for case in cases(ram) {
        for p in patterns {
            let mut src = Buf::new(case.len, case.src_mis);
            let mut dst = Buf::new(case.len, case.dst_mis);
            p.fill(src.bytes());
            for (d, s) in dst.bytes().iter_mut().zip(src.bytes().iter()) {
                *d = !s;
            }
            dev.h2c(src.bytes(), case.fpga)?;
            dev.c2h(dst.bytes(), case.fpga)?;
            let what = || format!("{} bytes at FPGA {:#x}, {}", case.len, case.fpga, p.name());
            r.compare(what, src.bytes(), dst.bytes());
        }
    }
    let p = Pattern::Random(0x2545_f491_4f6c_dd1d);
    let mut src = Buf::new(round_trip_len, 3);
    let mut dst = Buf::new(round_trip_len, 1);
    p.fill(src.bytes());
    for (d, s) in dst.bytes().iter_mut().zip(src.bytes().iter()) {
        *d = !s;
    }
    dev.h2c2h(src.bytes(), dst.bytes())?;
    r.compare(
        || format!("{round_trip_len}-byte round trip, {}", p.name()),
        src.bytes(),
        dst.bytes(),
    );
    Ok(r)
}

/// Bytes moved and the time it took: the driver's DMA time, and the wall time of the calls (what an
/// application waits).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Throughput {
    pub bytes: u64,
    pub dma_ns: u64,
    pub wall_ns: u64,
}

impl Throughput {
    fn add(&mut self, t: Transfer, wall_ns: u64) {
        self.bytes += t.bytes;
        self.dma_ns += t.dma_time_ns;
        self.wall_ns += wall_ns;
    }
}

/// Which way a bandwidth run moves data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    H2c,
    C2h,
    RoundTrip,
}

/// `iterations` transfers of `len` bytes one way (`len` up to the RAM) or through the round trip.
pub fn bandwidth(
    dev: &impl Dma,
    dir: Direction,
    len: usize,
    iterations: u32,
) -> Result<Throughput, Error> {
    let mut src = vec![0u8; len];
    Pattern::Random(0x1234_5678).fill(&mut src);
    let mut dst = vec![0u8; len];
    let mut t = Throughput::default();
    for _ in 0..iterations {
        let start = Instant::now();
        let x = match dir {
            Direction::H2c => dev.h2c(&src, 0)?,
            Direction::C2h => dev.c2h(&mut dst, 0)?,
            Direction::RoundTrip => dev.h2c2h(&src, &mut dst)?,
        };
        t.add(x, start.elapsed().as_nanos() as u64);
    }
    Ok(t)
}

/// Wall time of each of `samples` transfers of `len` bytes (at FPGA offset 0 one way), nanoseconds, and
/// the card's where it timed them ([`Latency`]), after two unmeasured warm-ups (the driver caches a buffer
/// on its second use, as a steady application has it).
pub fn latency(dev: &impl Dma, dir: Direction, len: usize, samples: u32) -> Result<Latency, Error> {
    let src = vec![0x5au8; len];
    let mut dst = vec![0u8; len];
    let mut once = || match dir {
        Direction::H2c => dev.h2c(&src, 0),
        Direction::C2h => dev.c2h(&mut dst, 0),
        Direction::RoundTrip => dev.h2c2h(&src, &mut dst),
    };
    once()?;
    once()?;
    let mut v = Latency::default();
    for _ in 0..samples {
        let start = Instant::now();
        let t = once()?;
        v.wall_ns.push(start.elapsed().as_nanos() as u64);
        if t.clock == Clock::Card {
            v.card_ns.push(t.dma_time_ns);
        }
    }
    Ok(v)
}

/// The times of [`latency`]'s transfers: the wall clock's, each; and the card's, for those it timed
/// ([`Device::time_by_card`]: one-way requests with a driver of ABI 1.8 or later), the part of the wall
/// time the DMA engine was busy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Latency {
    pub wall_ns: Vec<u64>,
    pub card_ns: Vec<u64>,
}

#[cfg(test)]
pub(crate) mod tests {
    use std::cell::{Cell, RefCell};

    use super::*;

    /// A card in host memory: `ram` bytes, a fault that flips one bit of every C2H at `corrupt`, DMA time
    /// `ns_per_byte`.
    pub(crate) struct FakeCard {
        pub ram: RefCell<Vec<u8>>,
        pub corrupt: Option<usize>,
        pub ns_per_byte: u64,
        pub calls: Cell<u32>,
        /// The clock its one-way transfers report.
        pub clock: Cell<Clock>,
    }

    impl FakeCard {
        pub(crate) fn new(ram: usize) -> Self {
            Self {
                ram: RefCell::new(vec![0; ram]),
                corrupt: None,
                ns_per_byte: 2,
                calls: Cell::new(0),
                clock: Cell::new(Clock::Kernel),
            }
        }

        fn t(&self, len: usize) -> Transfer {
            self.calls.set(self.calls.get() + 1);
            Transfer {
                bytes: len as u64,
                dma_time_ns: len as u64 * self.ns_per_byte,
                clock: self.clock.get(),
            }
        }

        fn range(&self, len: usize, fpga: u64) -> Result<std::ops::Range<usize>, Error> {
            let start = fpga as usize;
            if len == 0 || start + len > self.ram.borrow().len() {
                return Err(Error::Os {
                    op: "DMA",
                    errno: libc::EINVAL,
                });
            }
            Ok(start..start + len)
        }
    }

    impl Dma for FakeCard {
        fn h2c(&self, src: &[u8], fpga: u64) -> Result<Transfer, Error> {
            let r = self.range(src.len(), fpga)?;
            self.ram.borrow_mut()[r].copy_from_slice(src);
            Ok(self.t(src.len()))
        }

        fn c2h(&self, dst: &mut [u8], fpga: u64) -> Result<Transfer, Error> {
            let r = self.range(dst.len(), fpga)?;
            dst.copy_from_slice(&self.ram.borrow()[r.clone()]);
            if let Some(c) = self.corrupt.filter(|c| r.contains(c)) {
                dst[c - r.start] ^= 0x10;
            }
            Ok(self.t(dst.len()))
        }

        fn h2c2h(&self, src: &[u8], dst: &mut [u8]) -> Result<Transfer, Error> {
            let ram = self.ram.borrow().len();
            for (s, d) in src.chunks(ram).zip(dst.chunks_mut(ram)) {
                self.h2c(s, 0)?;
                self.c2h(d, 0)?;
            }
            Ok(self.t(src.len()))
        }
    }

    #[test]
    fn patterns_differ_and_repeat() {
        let mut a = [0u8; 16];
        let mut b = [0u8; 16];
        Pattern::Counter.fill(&mut a);
        assert_eq!(&a[4..8], &[1, 0, 0, 0], "word 1 of the self-test pattern");
        Pattern::Inverted.fill(&mut b);
        assert!(a.iter().zip(&b).all(|(x, y)| x ^ y == 0xff));
        Pattern::Random(7).fill(&mut a);
        Pattern::Random(7).fill(&mut b);
        assert_eq!(a, b, "a seed gives the same bytes");
        Pattern::Random(8).fill(&mut b);
        assert_ne!(a, b);
    }

    #[test]
    fn cases_stay_inside_the_ram_and_reach_its_end() {
        for ram in [4096usize, 65536] {
            let cs = cases(ram);
            assert!(
                cs.iter()
                    .all(|c| c.len > 0 && c.fpga as usize + c.len <= ram)
            );
            assert!(
                cs.iter()
                    .any(|c| c.fpga as usize + c.len == ram && c.fpga > 0)
            );
            assert!(cs.iter().any(|c| c.len == ram));
            assert!(cs.iter().any(|c| c.fpga % 2 == 1 && c.src_mis % 2 == 1));
        }
    }

    #[test]
    fn a_good_card_moves_every_byte() {
        let card = FakeCard::new(65536);
        let r = integrity(&card, 65536, (1 << 20) + 3).unwrap();
        assert_eq!(r.wrong, 0, "{r:?}");
        assert_eq!(r.transfers, cases(65536).len() as u32 * 3 + 1);
        assert!(r.bytes > (1 << 20) + 3 * 65536);
    }

    #[test]
    fn one_flipped_bit_is_found_and_placed() {
        let mut card = FakeCard::new(65536);
        card.corrupt = Some(65535);
        let r = integrity(&card, 65536, 100_000).unwrap();
        assert!(r.wrong > 0);
        let m = r.first.unwrap();
        assert_eq!(
            (m.offset, m.expected ^ m.got),
            (65535, 0x10),
            "the whole-RAM case finds it first, at its byte: {m:?}"
        );
        assert!(
            m.what.starts_with("65536 bytes at FPGA 0x0, counter"),
            "{m:?}"
        );
    }

    #[test]
    fn bandwidth_and_latency_count_every_transfer() {
        let card = FakeCard::new(65536);
        let t = bandwidth(&card, Direction::H2c, 65536, 4).unwrap();
        assert_eq!((t.bytes, t.dma_ns), (4 * 65536, 4 * 65536 * 2));
        assert_eq!(card.calls.get(), 4);
        let t = bandwidth(&card, Direction::RoundTrip, 65536, 2).unwrap();
        assert_eq!(t.bytes, 2 * 65536);
        let v = latency(&card, Direction::RoundTrip, 4096, 10).unwrap();
        assert_eq!((v.wall_ns.len(), v.card_ns.len()), (10, 0));
        // Two warm-ups (the second use caches the buffers), then the samples.
        let before = card.calls.get();
        assert_eq!(
            latency(&card, Direction::C2h, 64, 3).unwrap().wall_ns.len(),
            3
        );
        assert_eq!(card.calls.get() - before, 5);
        // The card's times are kept when the card timed them.
        card.clock.set(Clock::Card);
        let v = latency(&card, Direction::C2h, 64, 3).unwrap();
        assert_eq!(v.card_ns, [128; 3]);
        // A failing call is reported, not hidden.
        assert!(bandwidth(&card, Direction::C2h, 65537, 1).is_err());
    }
}
