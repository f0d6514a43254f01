//! `gdr-selftest --gpu-stream [MiB]`: the GPU consumer of the stream block's records (issue 22 item 5), on a
//! real GPU without a card. A ring of records built on the host exactly as the FPGA's source produces them
//! (`picoevb_regs::stream::write_record`) is checked by `ptx/stream.ptx`: length, CRC-32C, end marker,
//! payload pattern and sequence continuity, one thread per slot.
//!
//! Proves: the checker agrees with the host's record format (a clean ring passes, for the smallest useful and
//! the largest record); it finds each planted fault exactly (a flipped payload byte, a broken end marker, a
//! wrong length, a gap of three sequence numbers) with the right first bad slot; and it consumes records
//! far above the PicoEVB link's rate, printed beside the device's copy rate from the same run.

use std::fmt::Write;

use cudarc::driver::{result, sys};
use picoevb_regs::stream;

use super::gpu::{Gpu, GpuError, cu, unavailable};

/// The kernel, as text (see the file's header).
pub const PTX: &str = include_str!("../../ptx/stream.ptx");

/// PCIe Gen2 x1 after 8b/10b, one direction: what a PicoEVB can stream at most.
const LINK_MBPS: f64 = 500.0;

const BLOCK: u32 = 256;

/// What the checker reports for one ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub bad: u32,
    pub bad_length: u32,
    pub gaps: u32,
    pub lost: u32,
    pub first_bad: Option<u32>,
}

impl Verdict {
    /// The checkers' five output words: bad, bad lengths, gaps, numbers lost, first bad (or u32::MAX).
    pub fn from_words(out: &[u32; 5]) -> Self {
        Verdict {
            bad: out[0],
            bad_length: out[1],
            gaps: out[2],
            lost: out[3],
            first_bad: (out[4] != u32::MAX).then_some(out[4]),
        }
    }

    pub const CLEAN: Verdict = Verdict {
        bad: 0,
        bad_length: 0,
        gaps: 0,
        lost: 0,
        first_bad: None,
    };
}

struct Checker {
    f: sys::CUfunction,
    out: sys::CUdeviceptr,
}

impl Checker {
    fn load(g: &Gpu) -> Result<Self, GpuError> {
        let f = g.load_function(PTX, "gdr_stream_check")?;
        // SAFETY: a plain 20-byte device allocation, freed with the process.
        let out = cu("cuMemAlloc", unsafe { result::malloc_sync(20) })?;
        Ok(Self { f, out })
    }

    /// Checks `n` slots of `len` bytes at `ring`, slot 0 expected to carry `first`.
    fn check(
        &self,
        ring: sys::CUdeviceptr,
        len: u32,
        n: u32,
        first: u32,
    ) -> Result<Verdict, GpuError> {
        let init = [0u32, 0, 0, 0, u32::MAX];
        // SAFETY: `self.out` holds 20 bytes.
        cu("cuMemcpyHtoD", unsafe {
            result::memcpy_htod_sync(self.out, &init)
        })?;
        let (mut r, mut l, mut n2, mut f, mut o) = (ring, len, n, first, self.out);
        let mut params: [*mut std::ffi::c_void; 5] = [
            (&mut r as *mut u64).cast(),
            (&mut l as *mut u32).cast(),
            (&mut n2 as *mut u32).cast(),
            (&mut f as *mut u32).cast(),
            (&mut o as *mut u64).cast(),
        ];
        // SAFETY: the parameters match gdr_stream_check's and are copied by the call; `ring` holds
        // `n * len` bytes.
        cu("cuLaunchKernel", unsafe {
            result::launch_kernel(
                self.f,
                (n.div_ceil(BLOCK).max(1), 1, 1),
                (BLOCK, 1, 1),
                0,
                std::ptr::null_mut(),
                &mut params,
            )
        })?;
        cu("cuCtxSynchronize", result::ctx::synchronize())?;
        let mut out = [0u32; 5];
        // SAFETY: as above.
        cu("cuMemcpyDtoH", unsafe {
            result::memcpy_dtoh_sync(&mut out, self.out)
        })?;
        Ok(Verdict::from_words(&out))
    }
}

/// `n` records of `len` bytes from sequence number `first` on, as the source writes them.
pub fn ring(len: u32, n: u32, first: u32) -> Vec<u8> {
    let mut v = vec![0u8; len as usize * n as usize];
    for (i, slot) in v.chunks_exact_mut(len as usize).enumerate() {
        stream::write_record(slot, first.wrapping_add(i as u32), i as u64);
    }
    v
}

/// Plants one fault of each kind in `ring`; returns what the checker must report.
pub fn plant(ring: &mut [u8], len: u32, first: u32) -> Verdict {
    let l = len as usize;
    let n = (ring.len() / l) as u32;
    let (marker, payload, gap, length) = (n / 4, n / 3, n / 2, n - 1);
    // A broken end marker (the trailer's high word).
    ring[marker as usize * l + l - 1] ^= 0x01;
    // One flipped payload byte.
    ring[payload as usize * l + 16] ^= 0x40;
    // Three sequence numbers lost at `gap`: the source's records from there on, renumbered.
    for i in gap..n {
        let slot = &mut ring[i as usize * l..][..l];
        stream::write_record(slot, first.wrapping_add(i + 3), u64::from(i));
    }
    // A wrong length in the last slot's header (its sequence number stays).
    let at = length as usize * l + 4;
    ring[at..at + 4].copy_from_slice(&(len + 8).to_le_bytes());
    Verdict {
        bad: 2,
        bad_length: 1,
        gaps: 1,
        lost: 3,
        first_bad: Some(marker),
    }
}

fn best(runs: usize, mut f: impl FnMut() -> Result<f64, GpuError>) -> Result<f64, GpuError> {
    let mut b = f64::MAX;
    for _ in 0..runs {
        b = b.min(f()?);
    }
    Ok(b)
}

/// Runs the check on rings of `mib` MiB; returns the report text.
pub fn run(mib: usize) -> Result<String, GpuError> {
    if let Some(why) = unavailable() {
        return Err(why.into());
    }
    let g = Gpu::new()?;
    let checker = Checker::load(&g)?;
    let bytes = mib << 20;
    let dev = g.alloc_device(bytes / 4)?;
    let copy = g.alloc_device(bytes / 4)?;
    let mut r = String::new();
    let _ = writeln!(
        r,
        "GPU stream consumer: {} (PTX from ptx/stream.ptx), rings of {mib} MiB",
        g.name
    );
    let t_copy = best(5, || g.time(|| g.copy(copy, dev, bytes)))?;
    let copy_mbps = bytes as f64 / t_copy / 1e6;
    for len in [256u32, stream::RECORD_BYTES_MAX] {
        let n = (bytes / len as usize) as u32;
        let first = 0xffff_fff0; // the sequence number wraps inside the ring
        let mut host = ring(len, n, first);
        // SAFETY: `dev` holds `bytes` >= host.len().
        cu("cuMemcpyHtoD", unsafe {
            result::memcpy_htod_sync(dev, &host)
        })?;
        let clean = checker.check(dev, len, n, first)?;
        if clean != Verdict::CLEAN {
            return Err(GpuError::Check(format!(
                "{len}-byte records: a clean ring was judged {clean:?}"
            )));
        }
        let t = best(5, || {
            g.time(|| checker.check(dev, len, n, first).map(|_| ()))
        })?;
        let want = plant(&mut host, len, first);
        // SAFETY: as above.
        cu("cuMemcpyHtoD", unsafe {
            result::memcpy_htod_sync(dev, &host)
        })?;
        let got = checker.check(dev, len, n, first)?;
        if got != want {
            return Err(GpuError::Check(format!(
                "{len}-byte records: planted faults judged {got:?}, want {want:?}"
            )));
        }
        let mbps = host.len() as f64 / t / 1e6;
        let _ = writeln!(
            r,
            "  {len:>4} B records: {n} slots checked in {:.3} ms = {mbps:.0} MB/s = {:.0}x the link \
             ({LINK_MBPS:.0} MB/s), {:.2} of the device copy rate ({copy_mbps:.0} MB/s); planted faults \
             found exactly: {got:?}",
            t * 1e3,
            mbps / LINK_MBPS,
            mbps / copy_mbps,
        );
    }
    Ok(r)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// The host side of the check, as the kernels do it (`ptx/stream.ptx`, `ptx/ring.ptx`), so planted
    /// faults are known to be what their plants say without a GPU.
    pub(in crate::selftest) fn judge(ring: &[u8], len: u32, first: u32) -> Verdict {
        let l = len as usize;
        let mut v = Verdict::CLEAN;
        let mut prev = first.wrapping_sub(1);
        for (i, slot) in ring.chunks_exact(l).enumerate() {
            let seq = u32::from_le_bytes(slot[..4].try_into().unwrap());
            if seq != prev.wrapping_add(1) {
                v.gaps += 1;
                v.lost = v.lost.wrapping_add(seq.wrapping_sub(prev.wrapping_add(1)));
            }
            prev = seq;
            let bad_len = u32::from_le_bytes(slot[4..8].try_into().unwrap()) != len;
            let bad = match stream::check_record(slot) {
                Ok(rec) => (2..l / 8 - 1).any(|k| {
                    let w = u64::from_le_bytes(slot[k * 8..][..8].try_into().unwrap());
                    w != (u64::from(rec.seq) << 32 | (k as u64 - 2))
                }),
                Err(_) => true,
            };
            if bad_len {
                v.bad_length += 1;
            } else if bad {
                v.bad += 1;
            }
            if (bad || bad_len) && v.first_bad.is_none() {
                v.first_bad = Some(i as u32);
            }
        }
        v
    }

    #[test]
    fn a_clean_ring_is_clean_and_each_planted_fault_counts_once() {
        for len in [24, 256, 4096] {
            let first = 0xffff_fffe;
            let mut r = ring(len, 64, first);
            assert_eq!(judge(&r, len, first), Verdict::CLEAN);
            let want = plant(&mut r, len, first);
            assert_eq!(judge(&r, len, first), want, "{len}");
        }
    }
}
