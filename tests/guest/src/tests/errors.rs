//! Bad input and the errno the driver must return for it. Every test ends with a good round trip: a rejected
//! call must not wedge the device or leak a pinned page.

use std::io;

use picoevb_abi::{self as abi, C2hDma, H2c2hDma, H2cDma};

use super::{Ctx, Needs, Test, TestResult, ctx_err, ensure, expect_errno, sanity, test};
use crate::dev::{Device, Mapping};

/// Longest H2C2H the driver accepts.
const H2C2H_MAX: u64 = 256 << 20;
const RAM: u64 = picoevb_regs::pci::FPGA_RAM_SIZE;
const PAGE: usize = 4096;
/// Flag bit that no DMA ioctl defines.
const BAD_FLAG: u64 = 1 << 5;
/// A handle PIN_CUDA never returned.
const NEVER_PINNED: u64 = 12_345;
/// The start of the x86-64 direct map: a kernel address, never valid from user space.
const KERNEL_ADDR: u64 = 0xffff_8880_0000_0000;

pub fn register(v: &mut Vec<Test>) {
    v.push(test("errors::unknown_ioctl_enotty", unknown_ioctl));
    v.push(test("errors::unknown_flag_einval", unknown_flag));
    v.push(test("errors::zero_len_einval", zero_len));
    v.push(test("errors::beyond_fpga_ram_einval", beyond_ram));
    v.push(test("errors::offset_overflow_einval", offset_overflow));
    v.push(test("errors::len_max_einval", len_max));
    v.push(test("errors::h2c2h_too_long_einval", h2c2h_too_long));
    v.push(test("errors::low_pointer_efault", |ctx| {
        bad_pointer(ctx, BadPtr::Low)
    }));
    v.push(test("errors::unmapped_pointer_efault", |ctx| {
        bad_pointer(ctx, BadPtr::Unmapped)
    }));
    v.push(test("errors::pointer_into_hole_efault", |ctx| {
        bad_pointer(ctx, BadPtr::IntoHole)
    }));
    v.push(test("errors::kernel_pointer_efault", |ctx| {
        bad_pointer(ctx, BadPtr::Kernel)
    }));
    v.push(test("errors::c2h_into_readonly_efault", c2h_into_readonly));
    v.push(test(
        "errors::never_pinned_cuda_handle_einval",
        never_pinned_handle,
    ));
    // Only without a provider; with one, `cuda::*` test PIN_CUDA.
    v.push(test("errors::pin_cuda_unsupported", pin_cuda_unsupported).needs(Needs::NoProvider));
    v.push(test("errors::null_arg_efault", null_arg));
    v.push(test("errors::readonly_arg_efault", readonly_arg));
    v.push(test("errors::lseek_espipe", lseek_espipe));
    v.push(test("errors::device_still_works", sanity));
}

/// A valid host buffer large enough for every length these tests pass to a "wrongly accepted" C2H.
struct Host(Vec<u8>);

impl Host {
    fn new() -> Self {
        Host(vec![0u8; 2 * RAM as usize])
    }
    fn ptr(&mut self) -> u64 {
        self.0.as_mut_ptr() as u64
    }
}

fn h2c(dev: &Device, src: u64, off: u64, len: u64, flags: u64) -> io::Result<()> {
    let mut a = H2cDma {
        src,
        dst: off,
        len,
        flags,
        dma_time_ns: 0,
    };
    // SAFETY: H2C only reads user memory; the kernel validates `src` itself.
    unsafe { dev.h2c_raw(&mut a) }
}

/// # Safety
/// `dst` must be writable for `len` bytes, or unwritable by this process, or `len` must be one no driver can
/// accept (so a buggy driver cannot scribble over memory Rust owns).
unsafe fn c2h(dev: &Device, dst: u64, off: u64, len: u64, flags: u64) -> io::Result<()> {
    let mut a = C2hDma {
        dst,
        src: off,
        len,
        flags,
        dma_time_ns: 0,
    };
    // SAFETY: forwarded contract.
    unsafe { dev.c2h_raw(&mut a) }
}

/// # Safety
/// As [`c2h`] for `dst`.
unsafe fn h2c2h(dev: &Device, src: u64, dst: u64, len: u64, flags: u64) -> io::Result<()> {
    let mut a = H2c2hDma {
        src,
        dst,
        len,
        flags,
        dma_time_ns: 0,
    };
    // SAFETY: forwarded contract.
    unsafe { dev.h2c2h_raw(&mut a) }
}

fn unknown_ioctl(ctx: &mut Ctx) -> TestResult {
    let mut scratch = [0u64; 8];
    for (dir, size) in [(0, 0), (3, 8), (2, 40)] {
        let cmd = abi::ioc(dir, 0x7f, size);
        // SAFETY: an ioctl the driver does not know; even if it wrote `size` bytes they fit `scratch`.
        let r = unsafe {
            ctx.dev
                .ioctl_raw(cmd, scratch.as_mut_ptr() as libc::c_ulong)
        };
        expect_errno(&format!("ioctl {cmd:#x} ('P' nr 0x7f)"), r, libc::ENOTTY)?;
    }
    sanity(ctx)
}

/// The node has no file position (the ioctls carry their addresses): every lseek fails with ESPIPE, on
/// both builds alike (5.10's module once answered 0, 6.18's ESPIPE).
fn lseek_espipe(ctx: &mut Ctx) -> TestResult {
    for (off, whence, name) in [
        (0, libc::SEEK_SET, "SEEK_SET 0"),
        (4096, libc::SEEK_SET, "SEEK_SET 4096"),
        (1, libc::SEEK_CUR, "SEEK_CUR 1"),
        (0, libc::SEEK_END, "SEEK_END 0"),
    ] {
        expect_errno(
            &format!("lseek {name}"),
            ctx.dev.lseek(off, whence),
            libc::ESPIPE,
        )?;
    }
    sanity(ctx)
}

fn unknown_flag(ctx: &mut Ctx) -> TestResult {
    let mut h = Host::new();
    let (p, q) = (h.ptr(), h.ptr() + RAM);
    for flag in [BAD_FLAG, 1 << 3, 1 << 63] {
        expect_errno(
            &format!("h2c flags {flag:#x}"),
            h2c(ctx.dev, p, 0, 64, flag),
            libc::EINVAL,
        )?;
        // SAFETY: 64 bytes at `p` and `q` are inside `h`, which nothing else borrows.
        let r = unsafe { c2h(ctx.dev, p, 0, 64, flag) };
        expect_errno(&format!("c2h flags {flag:#x}"), r, libc::EINVAL)?;
        // SAFETY: as above.
        let r = unsafe { h2c2h(ctx.dev, p, q, 64, flag) };
        expect_errno(&format!("h2c2h flags {flag:#x}"), r, libc::EINVAL)?;
    }
    sanity(ctx)
}

fn zero_len(ctx: &mut Ctx) -> TestResult {
    let mut h = Host::new();
    let (p, q) = (h.ptr(), h.ptr() + RAM);
    expect_errno("h2c len 0", h2c(ctx.dev, p, 0, 0, 0), libc::EINVAL)?;
    // SAFETY: len 0 writes nothing; `h` is ours anyway.
    let r = unsafe { c2h(ctx.dev, p, 0, 0, 0) };
    expect_errno("c2h len 0", r, libc::EINVAL)?;
    // SAFETY: as above.
    let r = unsafe { h2c2h(ctx.dev, p, q, 0, 0) };
    expect_errno("h2c2h len 0", r, libc::EINVAL)?;
    sanity(ctx)
}

fn beyond_ram(ctx: &mut Ctx) -> TestResult {
    let mut h = Host::new();
    for (off, len) in [
        (RAM - 1, 2),
        (0, RAM + 1),
        (RAM, 1),
        (RAM + 4096, 4096),
        (1, RAM),
    ] {
        both_einval(ctx, &mut h, off, len)?;
    }
    sanity(ctx)
}

/// H2C and C2H of `len` bytes at FPGA offset `off`, host side in `h`: both must be EINVAL.
fn both_einval(ctx: &mut Ctx, h: &mut Host, off: u64, len: u64) -> TestResult {
    let p = h.ptr();
    let what = format!("offset {off:#x} len {len}");
    expect_errno(
        &format!("h2c {what}"),
        h2c(ctx.dev, p, off, len, 0),
        libc::EINVAL,
    )?;
    // SAFETY: every caller passes `len` <= RAM + 1 bytes, and `h` holds 2 * RAM.
    let r = unsafe { c2h(ctx.dev, p, off, len, 0) };
    expect_errno(&format!("c2h {what}"), r, libc::EINVAL)
}

/// offset + len wraps around u64: a driver that adds without checking would see a small end.
fn offset_overflow(ctx: &mut Ctx) -> TestResult {
    let mut h = Host::new();
    for (off, len) in [
        (u64::MAX - 1, 4),
        (u64::MAX, 1),
        (u64::MAX - 4095, 8192),
        (1 << 63, 16),
    ] {
        both_einval(ctx, &mut h, off, len)?;
    }
    sanity(ctx)
}

fn len_max(ctx: &mut Ctx) -> TestResult {
    let mut h = Host::new();
    let (p, q) = (h.ptr(), h.ptr() + RAM);
    for off in [0, 1] {
        let what = format!("offset {off} len u64::MAX");
        expect_errno(
            &format!("h2c {what}"),
            h2c(ctx.dev, p, off, u64::MAX, 0),
            libc::EINVAL,
        )?;
        // SAFETY: no driver can pin 2^64 bytes, so nothing is written.
        let r = unsafe { c2h(ctx.dev, p, off, u64::MAX, 0) };
        expect_errno(&format!("c2h {what}"), r, libc::EINVAL)?;
    }
    // SAFETY: as above.
    let r = unsafe { h2c2h(ctx.dev, p, q, u64::MAX, 0) };
    expect_errno("h2c2h len u64::MAX", r, libc::EINVAL)?;
    sanity(ctx)
}

fn h2c2h_too_long(ctx: &mut Ctx) -> TestResult {
    // Really allocated (lazily zeroed, so it costs nothing unless touched): a driver that wrongly accepted
    // the length would copy inside our own memory instead of scribbling elsewhere.
    let len = H2C2H_MAX + 1;
    let mut big = vec![0u8; len as usize];
    let p = big.as_mut_ptr() as u64;
    // SAFETY: src and dst are the same `len` bytes we own and do not otherwise borrow during the call.
    let r = unsafe { h2c2h(ctx.dev, p, p, len, 0) };
    expect_errno("h2c2h len 256 MiB + 1", r, libc::EINVAL)?;
    drop(big);
    sanity(ctx)
}

#[derive(Clone, Copy, Debug)]
enum BadPtr {
    /// Address 0x10, in the never-mapped first page.
    Low,
    /// A page that was mapped and then unmapped.
    Unmapped,
    /// Starts in a good page and runs into an unmapped one: pinning fails half way.
    IntoHole,
    /// A kernel address.
    Kernel,
}

/// Each user pointer field (H2C src, C2H dst, H2C2H src and dst) with a bad pointer gets EFAULT.
fn bad_pointer(ctx: &mut Ctx, kind: BadPtr) -> TestResult {
    let mut h = Host::new();
    let good = h.ptr();
    // Keep the mapping alive until the end so the hole stays a hole.
    let mut map = ctx_err(
        "mmap",
        Mapping::new(3 * PAGE, libc::PROT_READ | libc::PROT_WRITE),
    )?;
    let (bad, len) = match kind {
        BadPtr::Low => (0x10, 4096),
        BadPtr::Unmapped => {
            ctx_err("munmap", map.punch(0, 3 * PAGE))?;
            (map.addr() + PAGE as u64, 4096)
        }
        BadPtr::IntoHole => {
            ctx_err("munmap", map.punch(PAGE, PAGE))?;
            (map.addr() + 100, 8000)
        }
        BadPtr::Kernel => (KERNEL_ADDR, 4096),
    };
    let what = format!("{kind:?} pointer {bad:#x} len {len}");
    expect_errno(
        &format!("h2c src {what}"),
        h2c(ctx.dev, bad, 0, len, 0),
        libc::EFAULT,
    )?;
    // SAFETY: `bad` is not writable by this process, except the first page of IntoHole, which is our
    // mapping and not borrowed by Rust.
    let r = unsafe { c2h(ctx.dev, bad, 0, len, 0) };
    expect_errno(&format!("c2h dst {what}"), r, libc::EFAULT)?;
    // SAFETY: `good` has `len` (<= 8000) bytes inside `h`; for dst, see above.
    let r = unsafe { h2c2h(ctx.dev, bad, good, len, 0) };
    expect_errno(&format!("h2c2h src {what}"), r, libc::EFAULT)?;
    // SAFETY: as above.
    let r = unsafe { h2c2h(ctx.dev, good, bad, len, 0) };
    expect_errno(&format!("h2c2h dst {what}"), r, libc::EFAULT)?;
    drop(map);
    sanity(ctx)
}

/// DMA into memory the process may only read must fail, and the memory must stay unchanged (anonymous
/// read-only pages are the shared zero page: writing them would corrupt every process).
fn c2h_into_readonly(ctx: &mut Ctx) -> TestResult {
    let mut h = Host::new();
    let good = h.ptr();
    let ro = ctx_err("mmap", Mapping::new(2 * PAGE, libc::PROT_READ))?;
    for (off, len) in [(0u64, 4096u64), (1, 100)] {
        let dst = ro.addr() + off;
        // SAFETY: `ro` is read-only to us; the kernel must refuse to write it.
        let r = unsafe { c2h(ctx.dev, dst, 0, len, 0) };
        expect_errno(
            &format!("c2h into read-only +{off} len {len}"),
            r,
            libc::EFAULT,
        )?;
        // SAFETY: as above; `good` is inside `h`.
        let r = unsafe { h2c2h(ctx.dev, good, dst, len, 0) };
        expect_errno(
            &format!("h2c2h into read-only +{off} len {len}"),
            r,
            libc::EFAULT,
        )?;
    }
    // SAFETY: the mapping is readable for 2 pages.
    let bytes = unsafe { std::slice::from_raw_parts(ro.addr() as *const u8, 2 * PAGE) };
    ensure!(
        bytes.iter().all(|&b| b == 0),
        "read-only mapping changed by a refused DMA (first nonzero at {:?})",
        bytes.iter().position(|&b| b != 0)
    );
    drop(ro);
    sanity(ctx)
}

/// Any CUDA flag with a handle PIN_CUDA never returned.
fn never_pinned_handle(ctx: &mut Ctx) -> TestResult {
    let mut h = Host::new();
    let p = h.ptr();
    for handle in [0, 1, NEVER_PINNED] {
        let r = h2c(ctx.dev, handle, 0, 4096, abi::H2C_SRC_CUDA);
        expect_errno(&format!("h2c src handle {handle}"), r, libc::EINVAL)?;
        // SAFETY: with the CUDA flag, `dst` is a handle, not a pointer; nothing of ours is written.
        let r = unsafe { c2h(ctx.dev, handle, 0, 4096, abi::C2H_DST_CUDA) };
        expect_errno(&format!("c2h dst handle {handle}"), r, libc::EINVAL)?;
        // SAFETY: `p` has 4096 bytes inside `h`; the other side is a handle.
        let r = unsafe { h2c2h(ctx.dev, handle, p, 4096, abi::H2C2H_SRC_CUDA) };
        expect_errno(&format!("h2c2h src handle {handle}"), r, libc::EINVAL)?;
        // SAFETY: as above.
        let r = unsafe { h2c2h(ctx.dev, p, handle, 4096, abi::H2C2H_DST_CUDA) };
        expect_errno(&format!("h2c2h dst handle {handle}"), r, libc::EINVAL)?;
        // SAFETY: both are handles.
        let r = unsafe { h2c2h(ctx.dev, handle, handle, 4096, abi::H2C2H_FLAGS) };
        expect_errno(&format!("h2c2h both handle {handle}"), r, libc::EINVAL)?;
    }
    sanity(ctx)
}

/// Without a GPU-memory provider PIN_CUDA is EOPNOTSUPP, whatever the memory.
fn pin_cuda_unsupported(ctx: &mut Ctx) -> TestResult {
    let mut h = Host::new();
    let r = ctx.dev.pin_cuda(h.ptr(), 65536);
    expect_errno("PIN_CUDA of host memory", r, libc::EOPNOTSUPP)?;
    sanity(ctx)
}

/// A NULL argument pointer: the driver's copy_from_user/copy_to_user fails.
fn null_arg(ctx: &mut Ctx) -> TestResult {
    for (name, cmd) in [
        ("CARD_INFO", abi::IOC_CARD_INFO),
        ("H2C", abi::IOC_H2C_DMA),
        ("C2H", abi::IOC_C2H_DMA),
        ("H2C2H", abi::IOC_H2C2H_DMA),
    ] {
        // SAFETY: a NULL argument; nothing of ours can be written.
        let r = unsafe { ctx.dev.ioctl_raw(cmd, 0) };
        expect_errno(&format!("{name} with NULL arg"), r, libc::EFAULT)?;
    }
    sanity(ctx)
}

/// An argument struct the driver can read but not write back: the result copy fails, and the driver must
/// say EFAULT (the reference returned the residual byte count instead).
fn readonly_arg(ctx: &mut Ctx) -> TestResult {
    let ro = ctx_err("mmap", Mapping::new(PAGE, libc::PROT_READ))?;
    // SAFETY: the struct lives in a read-only page; the kernel can read (zeros) but not write it.
    let r = unsafe {
        ctx.dev
            .ioctl_raw(abi::IOC_CARD_INFO, ro.addr() as libc::c_ulong)
    };
    expect_errno("CARD_INFO into read-only arg", r, libc::EFAULT)?;

    // A valid H2C request in a read-only page: the DMA may run, writing back dma_time_ns must fail.
    let mut h = Host::new();
    let src = h.ptr();
    let rw = ctx_err(
        "mmap",
        Mapping::new(PAGE, libc::PROT_READ | libc::PROT_WRITE),
    )?;
    let a = H2cDma {
        src,
        dst: 0,
        len: 64,
        flags: 0,
        dma_time_ns: 0,
    };
    // SAFETY: the page is ours, page-aligned (so aligned for H2cDma) and large enough.
    unsafe { std::ptr::write(rw.addr() as *mut H2cDma, a) };
    // SAFETY: our own mapping, no references into it.
    let rc = unsafe { libc::mprotect(rw.addr() as *mut libc::c_void, PAGE, libc::PROT_READ) };
    ensure!(rc == 0, "mprotect: {}", io::Error::last_os_error());
    // SAFETY: the struct is read-only to us; the driver only reads `src` (inside `h`).
    let r = unsafe {
        ctx.dev
            .ioctl_raw(abi::IOC_H2C_DMA, rw.addr() as libc::c_ulong)
    };
    expect_errno("H2C with read-only arg", r, libc::EFAULT)?;
    drop((ro, rw));
    sanity(ctx)
}
