//! Data integrity of H2C, C2H and H2C2H over sizes, FPGA offsets and host alignments.

use picoevb_regs::pci::FPGA_RAM_SIZE;

use super::{Ctx, Test, TestResult, ctx_err, ensure, h2c2h_check, test};
use crate::buf::{GuardedBuf, compare};
use crate::dev::Device;
use crate::rng::Rng;

const RAM: usize = FPGA_RAM_SIZE as usize;
/// Sizes around byte, word, page and RAM boundaries.
const H2C_C2H_SIZES: [usize; 17] = [
    1, 2, 3, 4, 7, 31, 32, 33, 511, 4095, 4096, 4097, 8191, 12345, 32768, 65535, 65536,
];
/// Host buffer offsets from a page boundary: aligned, odd, and one byte before a page end.
const HOST_MISALIGN: [usize; 4] = [0, 1, 3, 4095];
/// H2C2H sizes: under, at and over a page and the 64 KiB bounce chunk, and multi-MiB.
const H2C2H_SIZES: [usize; 8] = [1, 4095, 4096, 65536, 65537, (1 << 20) + 3, 4 << 20, 8 << 20];
/// From this size on, extended only: 1 MiB + 3 already runs several chains and 17 bounce chunks, and the
/// 4 and 8 MiB round trips cost 90 s of TCG time per arm64 boot.
const H2C2H_EXTENDED_FROM: usize = 4 << 20;

pub fn register(v: &mut Vec<Test>) {
    for len in H2C_C2H_SIZES {
        v.push(test(format!("dma::h2c_c2h_{len}"), move |ctx| {
            h2c_c2h_size(ctx, len)
        }));
    }
    v.push(test(
        "dma::h2c_writes_only_its_range",
        h2c_writes_only_its_range,
    ));
    v.push(test("dma::c2h_reads_any_subrange", c2h_reads_any_subrange));
    for len in H2C2H_SIZES {
        let t = test(format!("dma::h2c2h_{len}"), move |ctx| h2c2h_size(ctx, len));
        v.push(if len >= H2C2H_EXTENDED_FROM {
            t.into_extended()
        } else {
            t
        });
    }
}

/// FPGA offsets for a transfer of `len`: 0, odd ones, and the last that fits (all with offset + len <= RAM).
fn fpga_offsets(len: usize) -> Vec<u64> {
    let mut v: Vec<usize> = [0, 1, 4093, RAM - len, (RAM - len).saturating_sub(1) | 1]
        .into_iter()
        .filter(|&o| o + len <= RAM)
        .collect();
    v.sort_unstable();
    v.dedup();
    v.into_iter().map(|o| o as u64).collect()
}

/// H2C `len` random bytes to `fpga_off` from a buffer at `src_mis`, C2H them back into a different buffer at
/// `dst_mis`; compares every byte and the guards. Returns the two `dma_time_ns`.
pub fn round_trip(
    dev: &Device,
    rng: &mut Rng,
    len: usize,
    fpga_off: u64,
    src_mis: usize,
    dst_mis: usize,
) -> Result<(u64, u64), String> {
    let what = format!("{len} bytes at fpga {fpga_off:#x} (src +{src_mis}, dst +{dst_mis})");
    let mut src = GuardedBuf::new(len, src_mis);
    rng.fill(src.as_mut_slice());
    let mut dst = GuardedBuf::new(len, dst_mis);
    for (d, s) in dst.as_mut_slice().iter_mut().zip(src.as_slice()) {
        *d = !s;
    }
    let t_h2c = ctx_err(&format!("h2c {what}"), dev.h2c(src.as_slice(), fpga_off))?;
    let t_c2h = ctx_err(
        &format!("c2h {what}"),
        dev.c2h(dst.as_mut_slice(), fpga_off),
    )?;
    compare(
        &format!("round trip {what}"),
        src.as_slice(),
        dst.as_slice(),
    )?;
    dst.check_guards().map_err(|e| format!("c2h {what}: {e}"))?;
    src.check_guards()
        .map_err(|e| format!("h2c {what}: source {e}"))?;
    ensure!(
        t_h2c > 0 && t_c2h > 0,
        "{what}: dma_time_ns h2c {t_h2c} c2h {t_c2h}, expected > 0"
    );
    Ok((t_h2c, t_c2h))
}

fn h2c_c2h_size(ctx: &mut Ctx, len: usize) -> TestResult {
    for (i, off) in fpga_offsets(len).into_iter().enumerate() {
        for (j, &src_mis) in HOST_MISALIGN.iter().enumerate() {
            // Pair each source alignment with a different destination alignment, rotating per offset.
            let dst_mis = HOST_MISALIGN[(i + j + 1) % HOST_MISALIGN.len()];
            round_trip(ctx.dev, &mut ctx.rng, len, off, src_mis, dst_mis)?;
        }
    }
    Ok(())
}

/// An H2C into the middle of RAM changes exactly that range: the rest keeps the background written before.
fn h2c_writes_only_its_range(ctx: &mut Ctx) -> TestResult {
    let mut expect = vec![0u8; RAM];
    ctx.rng.fill(&mut expect);
    ctx_err("h2c background", ctx.dev.h2c(&expect, 0))?;
    for (off, len) in [(4097usize, 33usize), (0, 1), (RAM - 1, 1), (8190, 4099)] {
        let mut patch = vec![0u8; len];
        ctx.rng.fill(&mut patch);
        ctx_err(
            &format!("h2c {len} at {off}"),
            ctx.dev.h2c(&patch, off as u64),
        )?;
        expect[off..off + len].copy_from_slice(&patch);
        let mut all = GuardedBuf::new(RAM, 1);
        ctx_err("c2h all RAM", ctx.dev.c2h(all.as_mut_slice(), 0))?;
        compare(
            &format!("RAM after h2c of {len} at {off}"),
            &expect,
            all.as_slice(),
        )?;
        all.check_guards()?;
    }
    Ok(())
}

/// After one full-RAM H2C, C2H of arbitrary subranges returns exactly those bytes.
fn c2h_reads_any_subrange(ctx: &mut Ctx) -> TestResult {
    let mut ram = vec![0u8; RAM];
    ctx.rng.fill(&mut ram);
    ctx_err("h2c all RAM", ctx.dev.h2c(&ram, 0))?;
    for (off, len, mis) in [
        (1usize, 1usize, 0usize),
        (65535, 1, 4095),
        (3, 4096, 1),
        (12345, 20000, 3),
    ] {
        let mut dst = GuardedBuf::new(len, mis);
        ctx_err(
            &format!("c2h {len} at {off}"),
            ctx.dev.c2h(dst.as_mut_slice(), off as u64),
        )?;
        compare(
            &format!("c2h {len} at {off}"),
            &ram[off..off + len],
            dst.as_slice(),
        )?;
        dst.check_guards()?;
    }
    Ok(())
}

fn h2c2h_size(ctx: &mut Ctx, len: usize) -> TestResult {
    let pairs: &[(usize, usize)] = if len >= 1 << 20 {
        &[(0, 0), (1, 4095)]
    } else {
        &[(0, 0), (1, 4095), (3, 1), (4095, 3)]
    };
    for &(s, d) in pairs {
        h2c2h_check(ctx.dev, &mut ctx.rng, len, s, d)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_fit_and_include_odd_ones() {
        for len in H2C_C2H_SIZES {
            let offs = fpga_offsets(len);
            assert_eq!(offs[0], 0);
            assert!(
                offs.iter().all(|&o| o as usize + len <= RAM),
                "{len}: {offs:?}"
            );
            if len < RAM {
                assert!(offs.iter().any(|&o| o % 2 == 1), "{len}: {offs:?}");
            }
        }
        assert_eq!(fpga_offsets(RAM), vec![0]);
    }
}
