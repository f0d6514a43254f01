//! What the C glue relies on: every ioctl maps to its operation, checks and answers go through the shared
//! logic, chains are the logic's own, and the register map carries the shared definitions.

use super::surface::*;
use super::{abi, chain, pipeline, segments::Cursor, segments::Segment, xdma};
use core::mem::size_of;

fn bytes<T: Copy>(v: &T) -> Vec<u8> {
    // SAFETY: the ABI structs are plain integers with explicit padding; reading their bytes is defined.
    unsafe { core::slice::from_raw_parts((v as *const T).cast::<u8>(), size_of::<T>()) }.to_vec()
}

/// A card with 64 KiB of RAM, with or without the stream block.
fn facts(stream: bool) -> PevbFacts {
    PevbFacts {
        card_index: 0,
        msi: 1,
        id_block: 1,
        design_version: 0,
        build_hash: 0,
        provider: 0,
        reg_cache: 1,
        stream: stream.into(),
        ram_size: 65536,
    }
}

fn check(cmd: u32, arg: usize, buf: &[u8]) -> Result<PevbReq, i32> {
    check_on(&facts(false), cmd, arg, buf)
}

fn check_on(facts: &PevbFacts, cmd: u32, arg: usize, buf: &[u8]) -> Result<PevbReq, i32> {
    let op = pevb_ioctl_op(cmd);
    if op < 0 {
        return Err(op);
    }
    let mut out = PevbReq::default();
    // SAFETY: `buf` is valid for its length, `facts` for reading, `out` for writing.
    let r = unsafe { pevb_ioctl_check(op, arg, buf.as_ptr().cast(), buf.len(), facts, &mut out) };
    if r == 0 {
        Ok(out)
    } else {
        Err(r)
    }
}

#[test]
fn every_command_has_its_own_operation() {
    let cmds = [
        abi::IOC_LED,
        abi::IOC_CARD_INFO,
        abi::IOC_ABI_INFO,
        abi::IOC_H2C_DMA,
        abi::IOC_C2H_DMA,
        abi::IOC_H2C2H_DMA,
        abi::IOC_PIN_CUDA,
        abi::IOC_UNPIN_CUDA,
        abi::IOC_REG_CACHE,
        abi::IOC_RAM_OWNER,
        abi::IOC_PIN_HOST,
        abi::IOC_STREAM,
    ];
    let ops: Vec<i32> = cmds.iter().map(|&c| pevb_ioctl_op(c)).collect();
    assert!(ops.iter().all(|&o| o > 0), "{ops:?}");
    let mut sorted = ops.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), ops.len());
    // A known number with another size is not the command.
    assert_eq!(pevb_ioctl_op(abi::IOC_H2C_DMA ^ (1 << 16)), -25);
    assert_eq!(pevb_ioctl_op(0), -25);
}

#[test]
fn checks_are_the_logics() {
    let ok = abi::H2cDma {
        src: 0x1000,
        dst: 16,
        len: 64,
        flags: 0,
        dma_time_ns: 0,
    };
    let r = check(abi::IOC_H2C_DMA, 0, &bytes(&ok)).unwrap();
    assert_eq!((r.src.cuda, r.src.addr, r.fpga, r.len), (0, 0x1000, 16, 64));
    let beyond = abi::H2cDma {
        dst: 65536 - 32,
        ..ok
    };
    assert_eq!(check(abi::IOC_H2C_DMA, 0, &bytes(&beyond)).err(), Some(-22));
    let flag = abi::H2cDma { flags: 4, ..ok };
    assert_eq!(check(abi::IOC_H2C_DMA, 0, &bytes(&flag)).err(), Some(-22));
    // The glue copied a wrong number of bytes: refused, never read past the buffer.
    assert_eq!(
        check(abi::IOC_H2C_DMA, 0, &bytes(&ok)[..8]).err(),
        Some(-22)
    );
    let c2h = abi::C2hDma {
        src: 8,
        dst: 0x2000,
        len: 8,
        flags: abi::C2H_DST_CUDA,
        dma_time_ns: 0,
    };
    let r = check(abi::IOC_C2H_DMA, 0, &bytes(&c2h)).unwrap();
    assert_eq!((r.dst.cuda, r.dst.handle, r.fpga), (1, 0x2000, 8));
    assert_eq!(check(abi::IOC_LED, 5, &[]).unwrap().value, 5);
    assert_eq!(check(abi::IOC_LED, 1 << 40, &[]).err(), Some(-22));
}

#[test]
fn done_writes_the_dma_time_only() {
    let req = abi::H2c2hDma {
        src: 1,
        dst: 2,
        len: 3,
        flags: 0,
        dma_time_ns: 0,
    };
    let mut buf = bytes(&req);
    let op = pevb_ioctl_op(abi::IOC_H2C2H_DMA);
    // SAFETY: `buf` is valid for its length.
    let r = unsafe { pevb_ioctl_done(op, buf.as_mut_ptr().cast(), buf.len(), 77, 0) };
    assert_eq!(r, 0);
    // SAFETY: `buf` holds an `H2c2hDma`.
    let back: abi::H2c2hDma = unsafe { core::ptr::read_unaligned(buf.as_ptr().cast()) };
    assert_eq!(
        back,
        abi::H2c2hDma {
            dma_time_ns: 77,
            ..req
        }
    );
}

#[test]
fn abi_info_reports_the_facts() {
    let facts = PevbFacts {
        card_index: 3,
        msi: 1,
        id_block: 0,
        design_version: 9,
        build_hash: 9,
        provider: 0,
        reg_cache: 0,
        stream: 0,
        ram_size: 65536,
    };
    let mut buf = vec![0u8; size_of::<abi::AbiInfo>()];
    let op = pevb_ioctl_op(abi::IOC_ABI_INFO);
    // SAFETY: `buf` is valid for its length, `facts` for reading.
    let r = unsafe { pevb_ioctl_info(op, buf.as_mut_ptr().cast(), buf.len(), &facts) };
    assert_eq!(r, 0);
    // SAFETY: `buf` holds an `AbiInfo`.
    let info: abi::AbiInfo = unsafe { core::ptr::read_unaligned(buf.as_ptr().cast()) };
    assert_eq!(info.abi_version, abi::ABI_VERSION);
    assert_eq!(info.card_index, 3);
    // No ID block: its values are not reported; no provider, no cache: no such capability. The RAM's
    // ownership is always enforced, and host surfaces need no provider.
    assert_eq!(
        (info.caps, info.design_version, info.build_hash),
        (
            abi::CAP_MSI | abi::CAP_RAM_OWNER | abi::CAP_HOST_SURFACE,
            0,
            0
        )
    );
    let cached = PevbFacts {
        reg_cache: 1,
        ..facts
    };
    assert_eq!(
        // SAFETY: as above.
        unsafe { pevb_ioctl_info(op, buf.as_mut_ptr().cast(), buf.len(), &cached) },
        0
    );
    // SAFETY: as above.
    let info: abi::AbiInfo = unsafe { core::ptr::read_unaligned(buf.as_ptr().cast()) };
    assert_eq!(
        info.caps,
        abi::CAP_MSI | abi::CAP_REG_CACHE | abi::CAP_RAM_OWNER | abi::CAP_HOST_SURFACE
    );
}

#[test]
fn chains_are_the_logics() {
    let segs = [
        Segment {
            addr: 0x10_0000,
            len: 0x1800,
        },
        Segment {
            addr: 0x20_0000,
            len: 0x800,
        },
    ];
    let mut descs = [xdma::Descriptor::default(); 8];
    let mut c = PevbChain {
        first: 0,
        first_adj: 0,
        count: 0,
        bytes: 0,
    };
    // SAFETY: every pointer is valid for its length.
    let r = unsafe {
        pevb_chain_build(
            true,
            segs.as_ptr(),
            2,
            0x100,
            64,
            0x1f00,
            descs.as_mut_ptr(),
            8,
            0x9000,
            &mut c,
        )
    };
    assert_eq!(r, 0);
    let mut want = [xdma::Descriptor::default(); 8];
    let mut cur = Cursor::new(&segs);
    cur.skip(0x100).unwrap();
    let w = chain::build(
        xdma::Dir::C2h,
        &mut cur,
        0x1f00,
        64,
        xdma::DESC_LEN_MAX,
        &mut want,
        0x9000,
    )
    .unwrap();
    assert_eq!(
        (c.first, c.first_adj, c.count as usize, c.bytes),
        (w.first, w.first_adj, w.count, w.bytes)
    );
    assert_eq!(descs, want);
    // A host offset past the buffer is refused, not a panic.
    // SAFETY: as above.
    let r = unsafe {
        pevb_chain_build(
            false,
            segs.as_ptr(),
            2,
            0x3000,
            0,
            1,
            descs.as_mut_ptr(),
            8,
            0x9000,
            &mut c,
        )
    };
    assert_eq!(r, -22);
}

#[test]
fn register_map_is_the_shared_one() {
    for (i, d) in xdma::Dir::ALL.into_iter().enumerate() {
        let e = &PEVB_REGS.engine[i];
        assert_eq!(e.channel as usize, d.channel_base());
        assert_eq!(e.sgdma as usize, d.sgdma_base());
        assert_eq!((e.irq_bit, e.halt_bit), (d.irq_bit(), d.sgdma_common_bit()));
    }
    for (b, t) in PEVB_REGS.blocks.iter().zip(PEVB_REGS.targets) {
        assert_eq!(*b as usize, xdma::block(t as usize, 0));
    }
    assert_eq!(PEVB_LAYOUT.segment, 16);
    assert_eq!(PEVB_LAYOUT.descriptor as usize, xdma::DESC_SIZE);
}

/// The pipeline adapter walks the shared schedule: 64 KiB through 64 KiB of RAM is two 32 KiB chunks in
/// three steps, alternating halves; past the last step it answers 1, a zero length EINVAL.
#[test]
fn pipeline_steps() {
    let mut st = PevbStep::default();
    let ram = 64 << 10;
    // SAFETY: `st` is writable.
    let step = |s, st: &mut PevbStep| unsafe { pevb_pipeline_step(64 << 10, ram, 4096, s, st) };
    assert_eq!(step(0, &mut st), 0);
    assert_eq!(
        (st.h2c.offset, st.h2c.len, st.h2c.ram, st.c2h.len),
        (0, 32 << 10, 0, 0)
    );
    assert_eq!(step(1, &mut st), 0);
    assert_eq!((st.h2c.offset, st.h2c.ram), (32 << 10, 32 << 10));
    assert_eq!((st.c2h.offset, st.c2h.len, st.c2h.ram), (0, 32 << 10, 0));
    assert_eq!(step(2, &mut st), 0);
    assert_eq!(
        (st.h2c.len, st.c2h.offset, st.c2h.ram),
        (0, 32 << 10, 32 << 10)
    );
    assert_eq!(step(3, &mut st), 1);
    // SAFETY: as above.
    assert_eq!(unsafe { pevb_pipeline_step(0, ram, 4096, 0, &mut st) }, -22);
    let big = pipeline::POLL_BYTES + 4096;
    assert_eq!(pevb_pipeline_polled(big, big), 1);
    assert_eq!(pevb_pipeline_polled(big, 0) & 1, 0);
    assert_eq!(pevb_pipeline_polled(4096, 0), 3);
    assert!(
        pevb_status_ended(0) && !pevb_status_ended(1) && pevb_status_ended(xdma::STAT_ERRORS | 1)
    );
}

/// A policy in C-owned storage, as regcache.c keeps it (`PEVB_LAYOUT.policy` bytes, u64-aligned): what C
/// calls on it directly. Its sequences run in `cache_glue.rs` (kernel build), over `cache_table`.
#[test]
fn the_cache_glue_keeps_the_policy_in_c_storage() {
    assert!(PEVB_LAYOUT.policy_align as usize <= size_of::<u64>());
    let mut v = vec![0u64; (PEVB_LAYOUT.policy as usize).div_ceil(8)];
    let p = v.as_mut_ptr().cast::<picoevb_logic::cache_policy::Policy>();
    // SAFETY: `v` holds `PEVB_LAYOUT.policy` bytes, u64-aligned.
    unsafe { pevb_policy_init(p, 4096) };
    // SAFETY: initialised above.
    assert_eq!(unsafe { pevb_policy_entries(p) }, 0);
    // SAFETY: as above; the policy is what `Policy::new` made.
    let q = unsafe { &*p }.report();
    assert_eq!((q.entries, q.capacity, q.max_entries), (0, 64, 64));
    // The ABI's EINVAL rules for REG_CACHE are the logic's, in the ioctl check.
    let mut set = abi::RegCache {
        op: abi::REG_CACHE_SET_LIMITS,
        max_entries: 65,
        max_bytes: 1 << 20,
        ..Default::default()
    };
    assert_eq!(check(abi::IOC_REG_CACHE, 0, &bytes(&set)).err(), Some(-22));
    set.max_entries = 8;
    assert!(check(abi::IOC_REG_CACHE, 0, &bytes(&set)).is_ok());
    let flush = abi::RegCache {
        op: abi::REG_CACHE_FLUSH,
        ..Default::default()
    };
    assert!(check(abi::IOC_REG_CACHE, 0, &bytes(&flush)).is_ok());
    assert_eq!(
        check(abi::IOC_REG_CACHE, 0, &bytes(&flush)[1..]).err(),
        Some(-22)
    );
}

#[test]
fn a_window_of_a_cached_buffer() {
    let segs = [
        Segment {
            addr: 0x1000,
            len: 0x800,
        },
        Segment {
            addr: 0x9000,
            len: 0x1000,
        },
    ];
    let mut out = [Segment { addr: 0, len: 0 }; 2];
    // SAFETY: both arrays valid for their lengths.
    let n = unsafe { pevb_segments_window(segs.as_ptr(), 2, 0x700, 0x200, out.as_mut_ptr(), 2) };
    assert_eq!(n, 2);
    assert_eq!(
        (out[0].addr, out[0].len, out[1].addr, out[1].len),
        (0x1700, 0x100, 0x9000, 0x100)
    );
    // Past the end, or more pieces than `out` holds: EINVAL.
    assert_eq!(
        // SAFETY: as above.
        unsafe { pevb_segments_window(segs.as_ptr(), 2, 0x700, 0x1200, out.as_mut_ptr(), 2) },
        -22
    );
    assert_eq!(
        // SAFETY: as above.
        unsafe { pevb_segments_window(segs.as_ptr(), 2, 0x700, 0x200, out.as_mut_ptr(), 1) },
        -22
    );
}

#[test]
fn ram_owner_goes_through_the_logic() {
    let claim = abi::RamOwner {
        op: abi::RAM_CLAIM,
        ..Default::default()
    };
    let r = check(abi::IOC_RAM_OWNER, 0, &bytes(&claim)).unwrap();
    assert_eq!(r.value, abi::RAM_CLAIM);
    let bad = abi::RamOwner { op: 7, ..claim };
    assert_eq!(check(abi::IOC_RAM_OWNER, 0, &bytes(&bad)).err(), Some(-22));
    // The C glue's storage, `struct pevb_ram_owner` (PevbRamOwner): PEVB_LAYOUT.owner bytes.
    assert!(PEVB_LAYOUT.owner as usize <= 4 * 8 && PEVB_LAYOUT.owner_align <= 8);
    let mut o = core::mem::MaybeUninit::<PevbRamOwner>::uninit();
    let (mut a, mut b) = (0u64, 0u64);
    // SAFETY: `o` is initialised by pevb_ram_init before any other call; `a`/`b` are memberships.
    unsafe {
        pevb_ram_init(o.as_mut_ptr());
        let o = o.as_mut_ptr();
        assert_eq!(pevb_ram_begin(o, &mut a, 1), PEVB_RAM_SCRUB_FIRST);
        pevb_ram_scrubbed(o, true);
        pevb_ram_end(o);
        assert_eq!(pevb_ram_begin(o, &mut b, 2), -16);
        assert_eq!(pevb_ram_claim(o, &mut b, 2), -16);
        assert_eq!(pevb_ram_state(o, &mut b, 2), abi::RAM_OTHER);
        assert_eq!(pevb_ram_release(o, &mut b, 2), -16);
        pevb_ram_close(o, &mut a);
        assert_eq!(pevb_ram_state(o, &mut b, 2), abi::RAM_FREE);
        assert_eq!(pevb_ram_claim(o, &mut b, 2), PEVB_RAM_SCRUB_FIRST);
    }
}

#[test]
fn stream_transfers_and_control_need_the_block() {
    let c2h = abi::C2hDma {
        dst: 0x5000,
        src: 0,
        len: 4096,
        flags: abi::C2H_SRC_STREAM,
        dma_time_ns: 0,
    };
    assert_eq!(check(abi::IOC_C2H_DMA, 0, &bytes(&c2h)).err(), Some(-95));
    let r = check_on(&facts(true), abi::IOC_C2H_DMA, 0, &bytes(&c2h)).unwrap();
    assert_eq!((r.fpga, r.len, r.dst.addr), (1 << 32, 4096, 0x5000));
    let set = abi::Stream {
        op: abi::STREAM_SET,
        enable: 1,
        record_bytes: 256,
        ..abi::Stream::default()
    };
    assert_eq!(check(abi::IOC_STREAM, 0, &bytes(&set)).err(), Some(-95));
    assert!(check_on(&facts(true), abi::IOC_STREAM, 0, &bytes(&set)).is_ok());
    let bad = abi::Stream {
        record_bytes: 100,
        ..set
    };
    assert_eq!(
        check_on(&facts(true), abi::IOC_STREAM, 0, &bytes(&bad)).err(),
        Some(-22)
    );
    // ABI_INFO says so.
    let mut buf = vec![0u8; size_of::<abi::AbiInfo>()];
    let op = pevb_ioctl_op(abi::IOC_ABI_INFO);
    // SAFETY: `buf` is valid for its length, the facts for reading.
    let r = unsafe { pevb_ioctl_info(op, buf.as_mut_ptr().cast(), buf.len(), &facts(true)) };
    assert_eq!(r, 0);
    // SAFETY: `buf` holds an `AbiInfo`.
    let info: abi::AbiInfo = unsafe { core::ptr::read_unaligned(buf.as_ptr().cast()) };
    assert_ne!(info.caps & abi::CAP_STREAM, 0);
}
