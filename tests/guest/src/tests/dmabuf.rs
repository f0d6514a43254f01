//! dma-buf import (IMPORT_DMABUF, ABI 1.4): another driver's buffer as a surface. Against the kernel's own
//! exporter (udmabuf: a memfd's pages) for DMA both ways and the argument rules, and against the bench's
//! exporter (kmod/bench-exporter), which can move its buffer mid-DMA, for the revocation: the exporter's
//! move_notify must wait for the DMA and drop the card's mapping before the memory moves. The buffer's bytes
//! are checked where they live (the memfd, the exporter's pages), never through a mapping of ours.

use std::fs;
use std::os::fd::{AsFd, AsRawFd};
use std::thread;
use std::time::{Duration, Instant};

use picoevb_abi as abi;
use picoevb_regs::pci::FPGA_RAM_SIZE;

use super::cuda::open;
use super::hardening::{SLOW, started};
use super::isolation::own_ram;
use super::removal::{
    card_sysfs, remove_all, removed_without_dma_errors, rescan_and_use, wait_for,
};
use super::{Ctx, Needs, Test, TestResult, ctx_err, ensure, expect_errno, kernel_version, test};
use crate::exporter::{self, Exporter};
use crate::kstat;

/// The card RAM: one DMA's window.
const RAM: usize = FPGA_RAM_SIZE as usize;
/// The buffers: four windows.
const SIZE: usize = 4 * RAM;

pub fn register(v: &mut Vec<Test>) {
    // Always runs: a 6.18 module that lost the capability would otherwise turn every test here into a skip.
    v.push(test("dmabuf::announced", announced));
    v.push(test("dmabuf::udmabuf_both_ways", udmabuf_both_ways).needs(Needs::DmaBuf));
    v.push(test("dmabuf::arguments_and_alignment", arguments).needs(Needs::DmaBuf));
    v.push(
        test("dmabuf::move_waits_for_dma_then_revokes", move_mid_dma).needs(Needs::DmaBufExporter),
    );
    v.push(test("dmabuf::close_detaches", close_detaches).needs(Needs::DmaBufExporter));
}

/// The removal tests: with the other removal tests, last (they take the card off the bus and back).
pub fn register_removal(v: &mut Vec<Test>) {
    v.push(
        test(
            "dmabuf::removal_while_the_exporter_holds_the_buffer",
            removal_during_move,
        )
        .needs(Needs::DmaBufExporter),
    );
    v.push(test("dmabuf::removal_unmaps_an_import", removal_unmaps).needs(Needs::DmaBufExporter));
}

/// ABI_INFO says 1.4 and `CAP_DMABUF` where the kernel has dma-buf's importer locking (6.2+; the bench's
/// 6.18 kernels have dma-buf), and IMPORT_DMABUF is ENOTTY without it, as every command a build lacks
/// (`kmod/logic/src/ioctl.rs` decides it for both kernels). Fails on a 6.18 module without the import, and
/// on one that announces it where it cannot import.
fn announced(ctx: &mut Ctx) -> TestResult {
    let info = ctx_err("ABI_INFO", ctx.dev.abi_info())?;
    let has = info.caps & abi::CAP_DMABUF != 0;
    if kernel_version()? >= (6, 2) {
        ensure!(
            info.abi_version >= (1 << 16 | 4) && has,
            "ABI_INFO {:#x} caps {:#x}: want 1.4+ with CAP_DMABUF on this kernel",
            info.abi_version,
            info.caps
        );
        return Ok(());
    }
    ensure!(!has, "CAP_DMABUF announced on a kernel older than 6.2");
    let r = ctx.dev.import_dmabuf(0, 0, 4096);
    ensure!(
        matches!(&r, Err(e) if e.raw_os_error() == Some(libc::ENOTTY)),
        "IMPORT_DMABUF without CAP_DMABUF: {r:?}, want ENOTTY"
    );
    Ok(())
}

/// A memfd's bytes through udmabuf, imported one window after the other: H2C from the first window reads
/// what was written to the memfd before the import; C2H into the second window lands in the memfd, seen
/// there after UNPIN (under swiotlb the bytes travel at the exporter's map and unmap). The placement is
/// system memory. While one window is imported, a second import of the buffer is EBUSY: the exporter maps
/// the whole buffer for each import, and two mappings of a page are one too many (dma-debug's "overlapping
/// mappings"). Fails on a driver that maps the wrong pages or window (byte mismatch), drops a C2H's bytes, or
/// maps one buffer twice (no EBUSY; the harness counts dma-debug's complaint as a splat).
fn udmabuf_both_ways(ctx: &mut Ctx) -> TestResult {
    let dev = open(ctx)?;
    let (memfd, buf) = ctx_err(
        "udmabuf of a memfd",
        exporter::udmabuf_from_memfd(SIZE as u64),
    )?;
    let mut want = vec![0u8; SIZE];
    ctx.rng.fill(&mut want);
    pwrite_all(&memfd, &want, 0)?;

    // Window 1 (bytes RAM..2*RAM) -> card RAM -> a host buffer.
    let a = ctx_err(
        "IMPORT_DMABUF window 1",
        dev.import_dmabuf(buf.as_raw_fd(), RAM as u64, RAM as u64),
    )?;
    ensure!(
        a.placement == abi::DMABUF_SYSTEM,
        "placement {:#x} for a memfd's pages, want DMABUF_SYSTEM",
        a.placement
    );
    ctx_err(
        "H2C from the import",
        dev.h2c_cuda(a.handle.into(), 0, RAM as u64),
    )?;
    let mut got = vec![0u8; RAM];
    ctx_err("C2H into a host buffer", dev.c2h(&mut got, 0))?;
    ensure!(
        got == want[RAM..2 * RAM],
        "H2C from the import: the card RAM holds other bytes"
    );
    expect_errno(
        "a second IMPORT_DMABUF of the buffer",
        dev.import_dmabuf(buf.as_raw_fd(), 3 * RAM as u64, RAM as u64),
        libc::EBUSY,
    )?;
    ctx_err("UNPIN window 1", dev.unpin_cuda(a.handle))?;

    // A host buffer -> card RAM -> window 3 (bytes 3*RAM..4*RAM).
    let mut new = vec![0u8; RAM];
    ctx.rng.fill(&mut new);
    ctx_err("H2C from a host buffer", dev.h2c(&new, 0))?;
    let b = ctx_err(
        "IMPORT_DMABUF window 3",
        dev.import_dmabuf(buf.as_raw_fd(), 3 * RAM as u64, RAM as u64),
    )?;
    // SAFETY: no Rust reference points into the memfd's pages (they are not mapped here).
    ctx_err("C2H into the import", unsafe {
        dev.c2h_cuda(b.handle.into(), 0, RAM as u64)
    })?;
    ctx_err("UNPIN window 3", dev.unpin_cuda(b.handle))?;
    let mut now = vec![0u8; SIZE];
    pread_all(&memfd, &mut now, 0)?;
    ensure!(
        now[3 * RAM..] == new[..],
        "C2H into the import: the memfd holds other bytes"
    );
    ensure!(
        now[..3 * RAM] == want[..3 * RAM],
        "bytes outside the C2H's window changed"
    );
    Ok(())
}

/// The alignment contract and the argument rules: whole host pages inside the buffer, flags and reserved
/// zero, a dma-buf fd; the fd may be closed once imported (the import holds the buffer); a DMA longer than
/// the window is EINVAL. Fails on a driver that takes a partial page or a window past the buffer's end (it
/// would map another buffer's memory), or that needs the fd kept open.
fn arguments(ctx: &mut Ctx) -> TestResult {
    let dev = open(ctx)?;
    let page = exporter::page_size();
    let (memfd, buf) = ctx_err(
        "udmabuf of a memfd",
        exporter::udmabuf_from_memfd(SIZE as u64),
    )?;
    let fd = buf.as_raw_fd();
    let size = SIZE as u64;
    for (what, off, len, errno) in [
        ("offset not a whole page", 1, page, libc::EINVAL),
        ("length not a whole page", 0, page + 1, libc::EINVAL),
        ("zero length", 0, 0, libc::EINVAL),
        ("window past the end", size - page, 2 * page, libc::EINVAL),
        ("offset past the end", size + page, page, libc::EINVAL),
        (
            "wrapping window",
            u64::MAX - page + 1,
            2 * page,
            libc::EINVAL,
        ),
    ] {
        expect_errno(
            &format!("IMPORT_DMABUF with {what}"),
            dev.import_dmabuf(fd, off, len),
            errno,
        )?;
    }
    expect_errno(
        "IMPORT_DMABUF of fd -1",
        dev.import_dmabuf(-1, 0, page),
        libc::EBADF,
    )?;
    expect_errno(
        "IMPORT_DMABUF of a closed fd",
        dev.import_dmabuf(1 << 20, 0, page),
        libc::EBADF,
    )?;
    expect_errno(
        "IMPORT_DMABUF of a memfd (no dma-buf)",
        dev.import_dmabuf(memfd.as_raw_fd(), 0, page),
        libc::EINVAL,
    )?;
    let ok = abi::ImportDmabuf {
        fd,
        size: page,
        ..Default::default()
    };
    for (what, mut a) in [
        ("flags", abi::ImportDmabuf { flags: 1, ..ok }),
        (
            "reserved",
            abi::ImportDmabuf {
                reserved: [0, 1],
                ..ok
            },
        ),
    ] {
        expect_errno(
            &format!("IMPORT_DMABUF with {what}"),
            dev.import_dmabuf_raw(&mut a),
            libc::EINVAL,
        )?;
    }

    // One page, then the fd closed: the import keeps working until UNPIN.
    let a = ctx_err(
        "IMPORT_DMABUF of a page",
        dev.import_dmabuf(fd, size - page, page),
    )?;
    drop(buf);
    ctx_err(
        "H2C after the fd was closed",
        dev.h2c_cuda(a.handle.into(), 0, page),
    )?;
    expect_errno(
        "H2C longer than the window",
        dev.h2c_cuda(a.handle.into(), 0, 2 * page),
        libc::EINVAL,
    )?;
    ctx_err("UNPIN", dev.unpin_cuda(a.handle))?;
    expect_errno("UNPIN twice", dev.unpin_cuda(a.handle), libc::EINVAL)?;
    Ok(())
}

/// The exporter moves its buffer while a slowed H2C runs from the import: its move_notify waits for the
/// DMA (the move takes at least half the slow-down), which succeeds; the card's mapping is gone when the
/// move returns (the exporter frees the old pages only then, and says EBUSY if a mapping is left); the
/// handle is then dead (DMA and UNPIN EINVAL), and a new import maps the moved bytes. Fails on a driver that
/// returns from move_notify at once (a fast move, or DMA from freed pages under KASAN and dma-debug) or
/// keeps its mapping (EBUSY from the move).
fn move_mid_dma(ctx: &mut Ctx) -> TestResult {
    let exp = ctx_err("open the bench exporter", Exporter::open())?;
    let dev = std::sync::Arc::new(open(ctx)?);
    let buf = ctx_err("GDR_EXP_CREATE", exp.create(RAM as u64))?;
    let mut want = vec![0u8; RAM];
    ctx.rng.fill(&mut want);
    ctx_err("GDR_EXP_WRITE", exp.write(buf.as_fd(), 0, &want))?;
    let a = ctx_err(
        "IMPORT_DMABUF",
        dev.import_dmabuf(buf.as_raw_fd(), 0, RAM as u64),
    )?;
    ensure!(
        a.placement == abi::DMABUF_SYSTEM,
        "placement {:#x}, want DMABUF_SYSTEM",
        a.placement
    );
    own_ram(&dev)?;

    let rpc = ctx.rpc.get()?;
    let runs = rpc.state()?.h2c.runs;
    rpc.inject_slow(1, SLOW)?;
    let d = dev.clone();
    let h = a.handle;
    let dma = thread::spawn(move || d.h2c_cuda(h.into(), 0, RAM as u64));
    started(rpc, "H2C", |m| m.h2c.runs != runs)?;
    let t0 = Instant::now();
    let moved = exp.move_buffer(buf.as_fd());
    let took = t0.elapsed();
    let r = dma.join().map_err(|_| "DMA thread panicked".to_string())?;
    ctx.rpc.get()?.clear()?;
    ctx_err(
        "the move (EBUSY: the card's mapping outlived move_notify)",
        moved,
    )?;
    ctx_err("H2C from the import during the move", r)?;
    ensure!(
        took >= Duration::from_millis(SLOW / 2),
        "the move returned after {took:?} while an H2C slowed by {SLOW} ms still read the buffer: \
         move_notify did not wait for the DMA"
    );
    let st = ctx_err("GDR_EXP_STATE", exp.state(buf.as_fd()))?;
    ensure!(
        st.mapped == 0 && st.moves == 1,
        "after the move: {st:?}, want nothing mapped, one move"
    );
    let mut got = vec![0u8; RAM];
    ctx_err("C2H of what the H2C read", dev.c2h(&mut got, 0))?;
    ensure!(got == want, "the H2C during the move read other bytes");
    let mut kept = vec![0u8; RAM];
    ctx_err("GDR_EXP_READ", exp.read(buf.as_fd(), 0, &mut kept))?;
    ensure!(kept == want, "the exporter's moved pages hold other bytes");

    expect_errno(
        "H2C through the revoked handle",
        dev.h2c_cuda(h.into(), 0, 4096),
        libc::EINVAL,
    )?;
    expect_errno(
        "UNPIN of the revoked handle",
        dev.unpin_cuda(h),
        libc::EINVAL,
    )?;
    let b = ctx_err(
        "IMPORT_DMABUF after the move",
        dev.import_dmabuf(buf.as_raw_fd(), 0, RAM as u64),
    )?;
    let mut zero = vec![0u8; RAM];
    ctx_err("C2H of zeros", dev.h2c(&zero, 0))?;
    ctx_err(
        "H2C from the new import",
        dev.h2c_cuda(b.handle.into(), 0, RAM as u64),
    )?;
    ctx_err("C2H of what it read", dev.c2h(&mut zero, 0))?;
    ensure!(
        zero == want,
        "the new import reads other bytes than the moved buffer holds"
    );
    ctx_err("UNPIN", dev.unpin_cuda(b.handle))?;
    let st = ctx_err("GDR_EXP_STATE", exp.state(buf.as_fd()))?;
    ensure!(
        st.mapped == 0 && st.attachments == 0,
        "after UNPIN: {st:?}, want no mapping or attachment"
    );
    Ok(())
}

/// Close of the file lets go of its imports: the exporter sees no mapping and no attachment left. Fails on
/// a close that forgets an import (its attachment stays, and the module could not be unloaded).
fn close_detaches(ctx: &mut Ctx) -> TestResult {
    let exp = ctx_err("open the bench exporter", Exporter::open())?;
    let dev = open(ctx)?;
    let mut bufs = Vec::new();
    for _ in 0..4 {
        let buf = ctx_err("GDR_EXP_CREATE", exp.create(RAM as u64))?;
        ctx_err(
            "IMPORT_DMABUF",
            dev.import_dmabuf(buf.as_raw_fd(), 0, RAM as u64),
        )?;
        let st = ctx_err("GDR_EXP_STATE", exp.state(buf.as_fd()))?;
        ensure!(st.mapped == 1 && st.attachments == 1, "an import: {st:?}");
        bufs.push(buf);
    }
    drop(dev);
    for buf in &bufs {
        let st = ctx_err("GDR_EXP_STATE", exp.state(buf.as_fd()))?;
        ensure!(
            st.mapped == 0 && st.attachments == 0,
            "after close: {st:?}, want nothing left"
        );
    }
    Ok(())
}

/// Removal drops an idle import's mapping (a device keeps none past unbind) and keeps the import until
/// close; its DMA then fails with ENODEV. Wants no DMA-API debug error. Fails on a removal that skips
/// imports (the exporter still counts a mapping after removal, and dma-debug reports the device's pending
/// mapping at unbind).
fn removal_unmaps(ctx: &mut Ctx) -> TestResult {
    let exp = ctx_err("open the bench exporter", Exporter::open())?;
    let sysfs = card_sysfs()?;
    let dev_path = ctx.dev_path.to_string();
    let buf = ctx_err("GDR_EXP_CREATE", exp.create(RAM as u64))?;
    let before = kstat::read()?;
    let dev = open(ctx)?;
    let a = ctx_err(
        "IMPORT_DMABUF",
        dev.import_dmabuf(buf.as_raw_fd(), 0, RAM as u64),
    )?;
    ctx_err(
        "H2C from the import",
        dev.h2c_cuda(a.handle.into(), 0, RAM as u64),
    )?;

    removed_without_dma_errors(&sysfs, &dev_path, &before, "the import")?;
    let st = ctx_err("GDR_EXP_STATE", exp.state(buf.as_fd()))?;
    ensure!(
        st.mapped == 0 && st.attachments == 1,
        "after removal: {st:?}, want unmapped, still attached"
    );
    expect_errno(
        "H2C from the import after removal",
        dev.h2c_cuda(a.handle.into(), 0, 4096),
        libc::ENODEV,
    )?;
    drop(dev);
    let st = ctx_err("GDR_EXP_STATE", exp.state(buf.as_fd()))?;
    ensure!(
        st.attachments == 0,
        "after close: {st:?}, want no attachment"
    );
    rescan_and_use(ctx, &dev_path)
}

/// The card goes while the exporter holds the buffer's reservation lock on its way to move_notify (the
/// exporter's hold switch): removal must not sleep on that lock while it holds the import (its unmap holds
/// a use, which move_notify's callback waits for), so it waits for the callback's free instead, and both
/// end. Fails by hanging (the harness's timeout) on a removal that takes the lock: removal holds the use
/// and waits for the lock, move_notify holds the lock and waits for the use.
fn removal_during_move(ctx: &mut Ctx) -> TestResult {
    let exp = std::sync::Arc::new(ctx_err("open the bench exporter", Exporter::open())?);
    let sysfs = card_sysfs()?;
    let dev_path = ctx.dev_path.to_string();
    let buf = std::sync::Arc::new(ctx_err("GDR_EXP_CREATE", exp.create(RAM as u64))?);
    let dev = open(ctx)?;
    let a = ctx_err(
        "IMPORT_DMABUF",
        dev.import_dmabuf(buf.as_raw_fd(), 0, RAM as u64),
    )?;
    let (e, b) = (exp.clone(), buf.clone());
    let t0 = Instant::now();
    let mover = thread::spawn(move || e.move_holding(b.as_fd()));
    // The move holds the lock for HOLD_MS: remove well inside that.
    thread::sleep(Duration::from_millis(exporter::HOLD_MS / 5));
    remove_all(&sysfs)?;
    wait_for("/dev node removed", Duration::from_secs(10), || {
        fs::metadata(&dev_path).is_err()
    })?;
    let moved = mover.join().map_err(|_| "mover panicked".to_string())?;
    ctx_err("the move during removal", moved)?;
    ensure!(
        t0.elapsed() >= Duration::from_millis(exporter::HOLD_MS / 2),
        "the move ended after {:?}: the exporter's hold did not happen, so removal never met it",
        t0.elapsed()
    );
    let st = ctx_err("GDR_EXP_STATE", exp.state(buf.as_fd()))?;
    ensure!(
        st.mapped == 0 && st.moves == 1,
        "after removal and the move: {st:?}"
    );
    expect_errno(
        "H2C after removal",
        dev.h2c_cuda(a.handle.into(), 0, 4096),
        libc::ENODEV,
    )?;
    drop(dev);
    rescan_and_use(ctx, &dev_path)
}

fn pwrite_all(fd: &impl AsRawFd, b: &[u8], at: i64) -> TestResult {
    // SAFETY: `b` is valid for its length.
    let n = unsafe { libc::pwrite(fd.as_raw_fd(), b.as_ptr().cast(), b.len(), at) };
    ensure!(
        n == b.len() as isize,
        "pwrite to the memfd: {}",
        std::io::Error::last_os_error()
    );
    Ok(())
}

fn pread_all(fd: &impl AsRawFd, b: &mut [u8], at: i64) -> TestResult {
    // SAFETY: `b` is valid and writable for its length.
    let n = unsafe { libc::pread(fd.as_raw_fd(), b.as_mut_ptr().cast(), b.len(), at) };
    ensure!(
        n == b.len() as isize,
        "pread from the memfd: {}",
        std::io::Error::last_os_error()
    );
    Ok(())
}

/// Why the bench exporter's tests cannot run, if they cannot.
pub(super) fn exporter_unmet() -> Option<String> {
    (!Exporter::available())
        .then(|| "no bench dma-buf exporter (/dev/gdr_exporter: the harness's exp module)".into())
}
