//! GPU memory: PIN_CUDA / UNPIN_CUDA and the CUDA flags of the DMA ioctls, through whichever nvidia_p2p
//! provider is loaded. The flavour comes from ABI_INFO's caps, so the same tests run for both: Jetson
//! (4 KiB pages, any alignment: the driver keeps the offset) and dGPU (64 KiB GPU pages; unaligned is
//! EINVAL). Skipped without a provider, except `caps_match_provider` (always runs: a driver that failed to
//! see its provider would otherwise turn every test here into a skip) and `no_provider_eopnotsupp` (only
//! without one). Every test works on its own open files, so nothing stays pinned on the shared one.

use std::fs;
use std::path::Path;

use picoevb_abi as abi;
use picoevb_logic::gate;
use picoevb_regs::pci::FPGA_RAM_SIZE;

use super::{Ctx, Needs, Test, TestResult, ctx_err, ensure, expect_errno, sanity, test};
use crate::buf::{GuardedBuf, compare};
use crate::dev::{Device, Mapping};
use crate::rng::Rng;
use crate::surface::{Flavour, PinKind, Surface, pin_kind, with_pin_kind};

const RAM: usize = FPGA_RAM_SIZE as usize;
/// The reference application's surfaces: 1024 x 1024 u32.
pub const SURFACE: usize = 4 << 20;
/// Surface -> FPGA -> host (and host -> FPGA -> surface): up to the FPGA RAM.
const ONE_WAY_SIZES: [usize; 2] = [4096, 65536];
/// H2C2H sizes: a page, an odd size, the FPGA RAM, several RAM windows, a whole surface.
const H2C2H_SIZES: [usize; 5] = [4096, 12_345, 65536, (1 << 20) + 4096, SURFACE];
/// gdr's provider module, as /sys/module and the initramfs name it.
const PROVIDER: &str = "gdr_nv_p2p";
/// The start of the x86-64 direct map: a kernel address, never valid from user space.
const KERNEL_ADDR: u64 = 0xffff_8880_0000_0000;

pub fn register(v: &mut Vec<Test>) {
    v.push(test("cuda::caps_match_provider", caps_match_provider));
    v.push(test("cuda::no_provider_eopnotsupp", no_provider_eopnotsupp).needs(Needs::NoProvider));
    v.extend(both("cuda::reference_app_sequence", reference_app_sequence));
    v.extend(both(
        "cuda::pin_with_readonly_argument_leaves_nothing_pinned",
        readonly_pin_argument,
    ));
    for len in ONE_WAY_SIZES {
        v.extend(both(
            &format!("cuda::surface_fpga_host_{len}"),
            move |ctx| surface_fpga_host(ctx, len),
        ));
    }
    for len in H2C2H_SIZES {
        let t = both(&format!("cuda::h2c2h_{len}"), move |ctx| {
            h2c2h_size(ctx, len)
        });
        // The whole surface, extended only: 1 MiB + 4 KiB already crosses chains and bounce chunks, and
        // 4 MiB cost two minutes of TCG time per arm64 boot.
        v.extend(t.map(|t| if len == SURFACE { t.into_extended() } else { t }));
    }
    // Moves 8 MiB: 2 s of TCG time on x86_64, 18 s on arm64, so there only in the extended run.
    let t = both("cuda::h2c2h_across_pin_windows", h2c2h_across_windows);
    v.extend(t.map(|t| {
        if cfg!(target_arch = "aarch64") {
            t.into_extended()
        } else {
            t
        }
    }));
    v.extend(both("cuda::unaligned_pin", unaligned_pin));
    v.extend(both("cuda::pin_bad_args", pin_bad_args));
    v.extend(both("cuda::pin_kernel_address_efault", pin_kernel_address));
    v.extend(both("cuda::pin_readonly_efault", pin_readonly));
    v.extend(both("cuda::len_beyond_pin_einval", len_beyond_pin));
    v.extend(both("cuda::wrong_handle_einval", wrong_handle));
    v.extend(both("cuda::unpin_twice_einval", unpin_twice));
    v.extend(both("cuda::handle_of_other_fd_einval", handle_of_other_fd));
    v.extend(both("cuda::overlapping_pin_ebusy", overlapping_pin));
    v.extend(both("cuda::adjacent_pins", adjacent_pins));
    v.push(cuda("cuda::device_still_works", sanity));
}

/// A test that needs a GPU-memory provider.
pub(super) fn cuda(
    name: impl Into<String>,
    run: impl Fn(&mut Ctx) -> TestResult + 'static,
) -> Test {
    test(name, run).needs(Needs::Provider)
}

/// A GPU-memory test twice: as `name` (`cuda::x`, PIN_CUDA, needs a provider) and as `host_surface::x`
/// (PIN_HOST: the same test on host memory pinned as a surface, no provider needed).
pub(super) fn both(name: &str, run: impl Fn(&mut Ctx) -> TestResult + 'static) -> [Test; 2] {
    host_twin(cuda(name, |_| Ok(())), run)
}

/// `t` (a GPU-memory test, its `run` replaced by `run`) and its twin `host_surface::…`, which runs `run`
/// with PIN_HOST and needs only `CAP_HOST_SURFACE`.
pub(super) fn host_twin(t: Test, run: impl Fn(&mut Ctx) -> TestResult + 'static) -> [Test; 2] {
    let run = std::rc::Rc::new(run);
    let twin_run = run.clone();
    let short = t.name.rsplit("::").next().unwrap_or(&t.name).to_string();
    let twin = test(format!("host_surface::{short}"), move |ctx| {
        with_pin_kind(PinKind::Host, || twin_run(ctx))
    })
    .needs(Needs::HostSurface);
    [
        Test {
            run: Box::new(move |ctx| run(ctx)),
            ..t
        },
        twin,
    ]
}

// ---- helpers, shared with `lifecycle` ----

/// The loaded provider's flavour, from ABI_INFO.
pub fn flavour(dev: &Device) -> Result<Flavour, String> {
    if pin_kind() == PinKind::Host {
        // Host memory in host pages, whatever the provider: the Jetson layout.
        return Ok(Flavour::Jetson);
    }
    let caps = ctx_err("ABI_INFO", dev.abi_info())?.caps;
    Flavour::from_caps(caps).ok_or_else(|| format!("ABI_INFO caps {caps:#x}: no CUDA capability"))
}

pub fn open(ctx: &Ctx) -> Result<Device, String> {
    ctx_err(
        &format!("open {}", ctx.dev_path),
        Device::open(ctx.dev_path),
    )
}

pub fn surface(f: Flavour, len: usize) -> Result<Surface, String> {
    ctx_err(
        &format!("allocate a {len}-byte {} surface", f.name()),
        Surface::new(f, len),
    )
}

/// PIN_CUDA of a whole surface.
pub fn pin(dev: &Device, s: &Surface) -> Result<u32, String> {
    pin_range(dev, s.va(), s.len())
}

pub fn pin_range(dev: &Device, va: u64, len: usize) -> Result<u32, String> {
    ctx_err(
        &format!("{} {va:#x}+{len:#x}", pin_kind().ioctl()),
        dev.pin_surface(va, len as u64),
    )
}

pub fn unpin(dev: &Device, h: u32) -> TestResult {
    ctx_err(&format!("UNPIN_CUDA {h}"), dev.unpin_cuda(h))
}

/// Checks that every DMA ioctl refuses `handle` (a dead or foreign one) with EINVAL, touching nothing.
pub fn dma_refuses(dev: &Device, handle: u64, what: &str) -> TestResult {
    let mut host = GuardedBuf::new(4096, 0);
    let p = host.as_mut_slice().as_mut_ptr() as u64;
    expect_errno(
        &format!("H2C from {what}"),
        dev.h2c_cuda(handle, 0, 4096),
        libc::EINVAL,
    )?;
    // SAFETY: the handle names no memory of ours that Rust references (if the driver wrongly accepted it,
    // it could only write pinned surface memory, which is reached through raw pointers).
    let r = unsafe { dev.c2h_cuda(handle, 0, 4096) };
    expect_errno(&format!("C2H into {what}"), r, libc::EINVAL)?;
    // SAFETY: `p` is 4096 writable bytes of `host`, not otherwise borrowed during the call.
    let r = unsafe { dev.h2c2h_any(handle, p, 4096, abi::H2C2H_SRC_CUDA) };
    expect_errno(&format!("H2C2H from {what}"), r, libc::EINVAL)?;
    // SAFETY: as above; the destination is the handle.
    let r = unsafe { dev.h2c2h_any(p, handle, 4096, abi::H2C2H_DST_CUDA) };
    expect_errno(&format!("H2C2H into {what}"), r, libc::EINVAL)?;
    // SAFETY: both sides are the handle.
    let r = unsafe { dev.h2c2h_any(handle, handle, 4096, abi::H2C2H_FLAGS) };
    expect_errno(&format!("H2C2H {what} to itself"), r, libc::EINVAL)?;
    host.check_guards()?;
    ensure!(
        host.as_slice().iter().all(|&b| b == 0),
        "a refused request with {what} wrote the host buffer"
    );
    Ok(())
}

/// Surface (pinned as `h`, from its start) -> FPGA RAM at `off` -> host memory, `len` random bytes written
/// into the surface first; every byte and the guards are checked.
pub fn surface_to_host(
    dev: &Device,
    rng: &mut Rng,
    s: &mut Surface,
    h: u32,
    len: usize,
    off: u64,
) -> TestResult {
    let what = format!("{len} bytes, surface handle {h} <-> fpga {off:#x}");
    s.fill_random(rng);
    let t = ctx_err(
        &format!("H2C from surface, {what}"),
        dev.h2c_cuda(h.into(), off, len as u64),
    )?;
    let mut host = GuardedBuf::new(len, 0);
    for (d, b) in host.as_mut_slice().iter_mut().zip(s.as_slice()) {
        *d = !b;
    }
    ctx_err(
        &format!("C2H to host, {what}"),
        dev.c2h(host.as_mut_slice(), off),
    )?;
    compare(
        &format!("surface -> fpga -> host, {what}"),
        &s.as_slice()[..len],
        host.as_slice(),
    )?;
    host.check_guards()?;
    s.check_guards()?;
    ensure!(t > 0, "H2C from surface, {what}: dma_time_ns is 0");
    Ok(())
}

/// Host memory -> FPGA RAM at `off` -> the first `len` bytes of the surface pinned as `h`; those must hold
/// the data, every other surface byte and the guards must be unchanged.
pub fn host_to_surface(
    dev: &Device,
    rng: &mut Rng,
    s: &mut Surface,
    h: u32,
    len: usize,
    off: u64,
) -> TestResult {
    let what = format!("{len} bytes, host <-> fpga {off:#x} <-> surface handle {h}");
    let mut src = GuardedBuf::new(len, 3);
    rng.fill(src.as_mut_slice());
    s.fill_random(rng);
    s.fill_complement(src.as_slice());
    let before = s.as_slice().to_vec();
    ctx_err(
        &format!("H2C from host, {what}"),
        dev.h2c(src.as_slice(), off),
    )?;
    // SAFETY: no reference into the surface is live during the call (the slices above are gone).
    let t = ctx_err(&format!("C2H into surface, {what}"), unsafe {
        dev.c2h_cuda(h.into(), off, len as u64)
    })?;
    compare(
        &format!("host -> fpga -> surface, {what}"),
        src.as_slice(),
        &s.as_slice()[..len],
    )?;
    compare(
        &format!("surface beyond the transfer, {what}"),
        &before[len..],
        &s.as_slice()[len..],
    )?;
    s.check_guards()?;
    ensure!(t > 0, "C2H into surface, {what}: dma_time_ns is 0");
    Ok(())
}

/// One side of an H2C2H: a pinned surface or host memory.
pub enum Side<'a> {
    Gpu(&'a mut Surface, u32),
    Host(&'a mut GuardedBuf),
}

impl Side<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            Side::Gpu(s, _) => s.as_slice(),
            Side::Host(b) => b.as_slice(),
        }
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        match self {
            Side::Gpu(s, _) => s.as_mut_slice(),
            Side::Host(b) => b.as_mut_slice(),
        }
    }
    /// What goes in the ioctl's `src`/`dst`: the handle, or the pointer.
    fn field(&mut self) -> u64 {
        match self {
            Side::Gpu(_, h) => (*h).into(),
            Side::Host(b) => b.as_mut_slice().as_mut_ptr() as u64,
        }
    }
    fn is_gpu(&self) -> bool {
        matches!(self, Side::Gpu(..))
    }
    fn check_guards(&self) -> TestResult {
        match self {
            Side::Gpu(s, _) => s.check_guards(),
            Side::Host(b) => b.check_guards(),
        }
    }
    fn name(&self) -> String {
        match self {
            Side::Gpu(_, h) => format!("surface {h}"),
            Side::Host(_) => "host".into(),
        }
    }
}

/// H2C2H of `len` random bytes from `src` to `dst` with the CUDA flags their kinds call for. The first
/// `len` bytes of `dst` must equal the source, its remaining bytes and every guard must be unchanged.
pub fn h2c2h_sides(
    dev: &Device,
    rng: &mut Rng,
    mut src: Side,
    mut dst: Side,
    len: usize,
) -> Result<u64, String> {
    let what = format!("h2c2h {len} bytes {} -> {}", src.name(), dst.name());
    rng.fill(src.bytes_mut());
    rng.fill(dst.bytes_mut());
    for (d, s) in dst.bytes_mut()[..len].iter_mut().zip(src.bytes()) {
        *d = !s;
    }
    let tail = dst.bytes()[len..].to_vec();
    let flags = if src.is_gpu() { abi::H2C2H_SRC_CUDA } else { 0 }
        | if dst.is_gpu() { abi::H2C2H_DST_CUDA } else { 0 };
    let (s, d) = (src.field(), dst.field());
    // SAFETY: `dst` is a pinned surface or a host buffer of at least `len` bytes; no reference into either is
    // live during the call.
    let t = ctx_err(&what, unsafe { dev.h2c2h_any(s, d, len as u64, flags) })?;
    compare(&what, &src.bytes()[..len], &dst.bytes()[..len])?;
    compare(
        &format!("{what}: destination beyond the transfer"),
        &tail,
        &dst.bytes()[len..],
    )?;
    src.check_guards()
        .map_err(|e| format!("{what}: source {e}"))?;
    dst.check_guards()
        .map_err(|e| format!("{what}: destination {e}"))?;
    ensure!(t > 0, "{what}: dma_time_ns is 0");
    Ok(t)
}

// ---- tests ----

/// The name=value of the `gdr_flavour` modinfo tag in the provider's .ko (the initramfs has the file):
/// what the caps must say, learnt without asking the driver.
fn provider_flavour_from_ko() -> Result<String, String> {
    let path = format!("/lib/modules/{PROVIDER}.ko");
    let ko = fs::read(&path).map_err(|e| format!("read {path}: {e}"))?;
    let tag = b"gdr_flavour=";
    let at = ko
        .windows(tag.len())
        .position(|w| w == tag)
        .ok_or_else(|| format!("{path}: no gdr_flavour modinfo tag"))?;
    let rest = &ko[at + tag.len()..];
    let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
    Ok(String::from_utf8_lossy(&rest[..end]).into_owned())
}

/// ABI_INFO's CUDA bits agree with the provider module actually loaded: none without it, exactly the bit of
/// its flavour with it. Runs with and without a provider: the CUDA tests' skip decision rests on these bits.
fn caps_match_provider(ctx: &mut Ctx) -> TestResult {
    let caps = ctx_err("ABI_INFO", ctx.dev.abi_info())?.caps;
    let cuda = caps & (abi::CAP_CUDA_JETSON | abi::CAP_CUDA_DGPU);
    let loaded = Path::new(&format!("/sys/module/{PROVIDER}")).exists();
    if !loaded {
        ensure!(
            cuda == 0,
            "no {PROVIDER} module loaded, yet ABI_INFO caps {caps:#x} announce CUDA"
        );
        return Ok(());
    }
    let fl = provider_flavour_from_ko()?;
    let want = match fl.as_str() {
        "jetson" => abi::CAP_CUDA_JETSON,
        "dgpu" => abi::CAP_CUDA_DGPU,
        other => return Err(format!("{PROVIDER}.ko: unknown gdr_flavour {other:?}")),
    };
    ensure!(
        cuda == want,
        "{PROVIDER} ({fl} flavour) is loaded, but ABI_INFO caps {caps:#x} have CUDA bits {cuda:#x}, \
         expected {want:#x}"
    );
    Ok(())
}

/// Without a provider: no CUDA bit, and PIN_CUDA of perfectly good, page-aligned memory is EOPNOTSUPP.
fn no_provider_eopnotsupp(ctx: &mut Ctx) -> TestResult {
    let caps = ctx_err("ABI_INFO", ctx.dev.abi_info())?.caps;
    ensure!(
        caps & (abi::CAP_CUDA_JETSON | abi::CAP_CUDA_DGPU) == 0,
        "caps {caps:#x}"
    );
    let dev = open(ctx)?;
    let s = surface(Flavour::Jetson, 65536)?;
    expect_errno(
        "PIN_CUDA without a provider",
        dev.pin_cuda(s.va(), s.len() as u64),
        libc::EOPNOTSUPP,
    )?;
    expect_errno(
        "UNPIN_CUDA without a provider",
        dev.unpin_cuda(0),
        libc::EINVAL,
    )?;
    dma_refuses(&dev, 0, "handle 0 without a provider")?;
    sanity(ctx)
}

/// NVIDIA's jetson-rdma-picoevb `rdma-cuda` application, ioctl for ioctl: PIN src, PIN dst, H2C2H of the
/// whole 1024x1024 u32 surface with both CUDA flags, verify `(y << 16) | x` arrived over `!pattern`, UNPIN
/// both.
fn reference_app_sequence(ctx: &mut Ctx) -> TestResult {
    const W: usize = 1024;
    const H: usize = 1024;
    const BYTES: usize = W * H * 4;
    let f = flavour(ctx.dev)?;
    let dev = open(ctx)?;
    let mut src = surface(f, BYTES)?;
    let mut dst = surface(f, BYTES)?;
    let hs = pin_range(&dev, src.va(), BYTES)?;
    let hd = pin_range(&dev, dst.va(), BYTES)?;
    ensure!(hs != hd, "PIN_CUDA gave handle {hs} twice");
    let pattern = |i: usize| ((i / W) << 16 | (i % W)) as u32;
    for (i, c) in src.as_mut_slice().chunks_exact_mut(4).enumerate() {
        c.copy_from_slice(&pattern(i).to_ne_bytes());
    }
    for (i, c) in dst.as_mut_slice().chunks_exact_mut(4).enumerate() {
        c.copy_from_slice(&(!pattern(i)).to_ne_bytes());
    }
    // SAFETY: both sides are pinned surfaces; no reference into them is live during the call.
    let t = ctx_err("H2C2H src -> dst (both CUDA)", unsafe {
        dev.h2c2h_any(hs.into(), hd.into(), BYTES as u64, abi::H2C2H_FLAGS)
    })?;
    let bad: Vec<usize> = dst
        .as_slice()
        .chunks_exact(4)
        .enumerate()
        .filter(|(i, c)| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]) != pattern(*i))
        .map(|(i, _)| i)
        .collect();
    if let Some(&i) = bad.first() {
        let c = &dst.as_slice()[i * 4..i * 4 + 4];
        return Err(format!(
            "{} of {} words wrong, first at x {} y {}: {:#010x}, expected {:#010x}",
            bad.len(),
            W * H,
            i % W,
            i / W,
            u32::from_ne_bytes([c[0], c[1], c[2], c[3]]),
            pattern(i)
        ));
    }
    src.check_guards()?;
    dst.check_guards()?;
    ensure!(t > 0, "dma_time_ns is 0");
    unpin(&dev, hs)?;
    unpin(&dev, hd)?;
    Ok(())
}

/// A 4 MiB surface, pinned whole: its first `len` bytes to FPGA RAM and back into host memory, and host
/// memory through FPGA RAM into it, at FPGA offset 0 and the last one that fits (an odd one for 4096).
fn surface_fpga_host(ctx: &mut Ctx, len: usize) -> TestResult {
    let f = flavour(ctx.dev)?;
    let dev = open(ctx)?;
    let mut s = surface(f, SURFACE)?;
    let h = pin(&dev, &s)?;
    let mut offsets = vec![0u64, (RAM - len) as u64];
    if len < RAM {
        offsets.push((RAM - len - 3) as u64);
    }
    offsets.dedup();
    for off in offsets {
        surface_to_host(&dev, &mut ctx.rng, &mut s, h, len, off)?;
        host_to_surface(&dev, &mut ctx.rng, &mut s, h, len, off)?;
    }
    unpin(&dev, h)
}

/// Two 4 MiB surfaces pinned whole: surface -> surface (both flags), surface -> host, host -> surface.
fn h2c2h_size(ctx: &mut Ctx, len: usize) -> TestResult {
    let f = flavour(ctx.dev)?;
    let dev = open(ctx)?;
    let mut a = surface(f, SURFACE)?;
    let mut b = surface(f, SURFACE)?;
    let ha = pin(&dev, &a)?;
    let hb = pin(&dev, &b)?;
    ensure!(ha != hb, "PIN_CUDA gave handle {ha} twice");
    let rng = &mut ctx.rng;
    h2c2h_sides(&dev, rng, Side::Gpu(&mut a, ha), Side::Gpu(&mut b, hb), len)?;
    h2c2h_sides(&dev, rng, Side::Gpu(&mut b, hb), Side::Gpu(&mut a, ha), len)?;
    let mut host = GuardedBuf::new(len, 1);
    h2c2h_sides(&dev, rng, Side::Gpu(&mut a, ha), Side::Host(&mut host), len)?;
    let mut host = GuardedBuf::new(len, 4095);
    h2c2h_sides(&dev, rng, Side::Host(&mut host), Side::Gpu(&mut b, hb), len)?;
    unpin(&dev, ha)?;
    unpin(&dev, hb)
}

/// A round trip longer than the driver's pinning window, between a surface and host memory both ways: the
/// second window starts 4 MiB into the surface (its segments and syncs from there), the host side is
/// pinned a window at a time, and the tail is odd.
fn h2c2h_across_windows(ctx: &mut Ctx) -> TestResult {
    let f = flavour(ctx.dev)?;
    let dev = open(ctx)?;
    let size = gate::WINDOW as usize + (64 << 10);
    let len = size - 100;
    let mut a = surface(f, size)?;
    let ha = pin(&dev, &a)?;
    let rng = &mut ctx.rng;
    let mut host = GuardedBuf::new(len, 1);
    h2c2h_sides(&dev, rng, Side::Gpu(&mut a, ha), Side::Host(&mut host), len)?;
    let mut host = GuardedBuf::new(len, 4095);
    h2c2h_sides(&dev, rng, Side::Host(&mut host), Side::Gpu(&mut a, ha), len)?;
    unpin(&dev, ha)
}

/// PIN_CUDA at an address and size that are not GPU-page multiples works in both flavours (the driver
/// aligns the pin and keeps the offset, as the reference does), and the transfer starts at that very
/// address and moves exactly `len` bytes.
fn unaligned_pin(ctx: &mut Ctx) -> TestResult {
    let f = flavour(ctx.dev)?;
    let g = f.granule();
    let dev = open(ctx)?;
    // Offsets from a granule boundary and lengths (all <= FPGA RAM): inside one page, across CPU pages,
    // the last byte of a granule, across a granule boundary, just after one.
    let mut s = surface(f, 3 * g)?;
    let cases = [
        (1, g - 1),
        (100, 8192 + 7),
        (g - 1, 1),
        (g - 100, 8192),
        (g + 3, 4096),
    ];
    for (off, len) in cases {
        let va = s.va() + off as u64;
        let what = format!("pinned at surface +{off} size {len}");
        let h = pin_range(&dev, va, len)?;
        // Surface -> FPGA -> host: the bytes from va on.
        s.fill_random(&mut ctx.rng);
        ctx_err(
            &format!("H2C {what}"),
            dev.h2c_cuda(h.into(), 0, len as u64),
        )?;
        let mut host = GuardedBuf::new(len, 0);
        ctx_err(&format!("C2H {what}"), dev.c2h(host.as_mut_slice(), 0))?;
        compare(
            &format!("surface -> host, {what}"),
            &s.as_slice()[off..off + len],
            host.as_slice(),
        )?;
        // Host -> FPGA -> surface: exactly [va, va + len) changes.
        let mut src = GuardedBuf::new(len, 1);
        ctx.rng.fill(src.as_mut_slice());
        for (d, b) in s.as_mut_slice()[off..off + len]
            .iter_mut()
            .zip(src.as_slice())
        {
            *d = !b;
        }
        let before = s.as_slice().to_vec();
        ctx_err(&format!("H2C host {what}"), dev.h2c(src.as_slice(), 0))?;
        // SAFETY: no reference into the surface is live during the call.
        ctx_err(&format!("C2H into {what}"), unsafe {
            dev.c2h_cuda(h.into(), 0, len as u64)
        })?;
        compare(
            &format!("host -> surface, {what}"),
            src.as_slice(),
            &s.as_slice()[off..off + len],
        )?;
        compare(
            &format!("surface before the pinned start, {what}"),
            &before[..off],
            &s.as_slice()[..off],
        )?;
        compare(
            &format!("surface after the pinned end, {what}"),
            &before[off + len..],
            &s.as_slice()[off + len..],
        )?;
        s.check_guards()?;
        expect_errno(
            &format!("H2C of {} bytes, {what}", len + 1),
            dev.h2c_cuda(h.into(), 0, len as u64 + 1),
            libc::EINVAL,
        )?;
        unpin(&dev, h)?;
    }
    Ok(())
}

/// PIN_CUDA's argument checks: size 0, a range that wraps, unmapped memory, a range running into a hole.
fn pin_bad_args(ctx: &mut Ctx) -> TestResult {
    let f = flavour(ctx.dev)?;
    let g = f.granule();
    let dev = open(ctx)?;
    let s = surface(f, 4 * g)?;
    expect_errno("PIN_CUDA size 0", dev.pin_surface(s.va(), 0), libc::EINVAL)?;
    let top = u64::MAX - g as u64 + 1;
    for (va, size) in [
        (top, 2 * g as u64),
        (s.va(), u64::MAX - g as u64 + 1),
        (s.va(), u64::MAX),
    ] {
        expect_errno(
            &format!("PIN_CUDA {va:#x}+{size:#x} (wraps)"),
            dev.pin_surface(va, size),
            libc::EINVAL,
        )?;
    }
    let mut gone = surface(f, 2 * g)?;
    let va = gone.va();
    ctx_err("munmap", gone.unmap())?;
    expect_errno(
        "PIN_CUDA of unmapped memory",
        dev.pin_surface(va, 2 * g as u64),
        libc::EFAULT,
    )?;
    let mut holed = surface(f, 3 * g)?;
    ctx_err("punch", holed.punch(g, g))?;
    expect_errno(
        "PIN_CUDA of a range with an unmapped middle",
        dev.pin_surface(holed.va(), 3 * g as u64),
        libc::EFAULT,
    )?;
    drop(holed);
    // Nothing was pinned by the refused calls: a fresh PIN on this file works and the device still does.
    let h = pin(&dev, &s)?;
    unpin(&dev, h)?;
    sanity(ctx)
}

/// PIN_CUDA of a kernel address is EFAULT, like a kernel pointer in H2C/C2H (docs/driver.md: "unmapped or
/// kernel user pointer").
fn pin_kernel_address(ctx: &mut Ctx) -> TestResult {
    let f = flavour(ctx.dev)?;
    let g = f.granule() as u64;
    let dev = open(ctx)?;
    for va in [KERNEL_ADDR, 1 << 47, 1 << 56] {
        expect_errno(
            &format!("PIN_CUDA {va:#x}+{g:#x}"),
            dev.pin_surface(va, g),
            libc::EFAULT,
        )?;
    }
    sanity(ctx)
}

/// The device writes through a CUDA handle, so memory the process may only read must not be pinnable.
fn pin_readonly(ctx: &mut Ctx) -> TestResult {
    let f = flavour(ctx.dev)?;
    let dev = open(ctx)?;
    let mut s = surface(f, 2 * f.granule())?;
    s.fill_random(&mut ctx.rng);
    let before = s.as_slice().to_vec();
    ctx_err("mprotect", s.protect(libc::PROT_READ))?;
    expect_errno(
        "PIN_CUDA of read-only memory",
        dev.pin_surface(s.va(), s.len() as u64),
        libc::EFAULT,
    )?;
    compare("read-only surface", &before, s.as_slice())?;
    sanity(ctx)
}

/// A transfer longer than the pinned size is EINVAL whichever side the handle is on, and writes nothing;
/// exactly the pinned size works.
fn len_beyond_pin(ctx: &mut Ctx) -> TestResult {
    let f = flavour(ctx.dev)?;
    let p = f.granule();
    let dev = open(ctx)?;
    // Pin the first granule of two: the second is mapped, so only the driver's length check stands between
    // a too-long transfer and it.
    let mut s = surface(f, 2 * p)?;
    let h = pin_range(&dev, s.va(), p)?;
    s.fill_random(&mut ctx.rng);
    let before = s.as_slice().to_vec();
    let mut host = GuardedBuf::new(2 * p, 0);
    let hp = host.as_mut_slice().as_mut_ptr() as u64;
    let h64 = u64::from(h);
    for len in [p as u64 + 1, 2 * p as u64, u64::MAX] {
        let what = format!("len {len:#x} with {p:#x} pinned");
        // SAFETY: the destination `hp` is 2 * p bytes of `host`, not borrowed during the call; u64::MAX can
        // never be pinned, so even a driver that skipped the check could write at most 2 * p bytes.
        let r = unsafe { dev.h2c2h_any(h64, hp, len, abi::H2C2H_SRC_CUDA) };
        expect_errno(&format!("H2C2H from surface, {what}"), r, libc::EINVAL)?;
        // SAFETY: the destination is the surface (raw memory); the source `host` is only read.
        let r = unsafe { dev.h2c2h_any(hp, h64, len, abi::H2C2H_DST_CUDA) };
        expect_errno(&format!("H2C2H into surface, {what}"), r, libc::EINVAL)?;
        // SAFETY: both sides are the surface.
        let r = unsafe { dev.h2c2h_any(h64, h64, len, abi::H2C2H_FLAGS) };
        expect_errno(&format!("H2C2H surface to itself, {what}"), r, libc::EINVAL)?;
        if len <= RAM as u64 {
            expect_errno(
                &format!("H2C from surface, {what}"),
                dev.h2c_cuda(h64, 0, len),
                libc::EINVAL,
            )?;
            // SAFETY: the destination is the surface.
            let r = unsafe { dev.c2h_cuda(h64, 0, len) };
            expect_errno(&format!("C2H into surface, {what}"), r, libc::EINVAL)?;
        }
    }
    compare("surface after refused requests", &before, s.as_slice())?;
    ensure!(
        host.as_slice().iter().all(|&b| b == 0),
        "a refused request wrote the host buffer"
    );
    // Exactly the pinned size works.
    let mut host = GuardedBuf::new(p, 0);
    h2c2h_sides(
        &dev,
        &mut ctx.rng,
        Side::Gpu(&mut s, h),
        Side::Host(&mut host),
        p,
    )?;
    unpin(&dev, h)
}

/// Handles that this file never got: neighbours, all ones, and the real handle with high bits set (the DMA
/// structs carry it in a u64: a driver that truncates would accept those).
fn wrong_handle(ctx: &mut Ctx) -> TestResult {
    let f = flavour(ctx.dev)?;
    let dev = open(ctx)?;
    let mut s = surface(f, f.granule())?;
    let h = pin(&dev, &s)?;
    let h64 = u64::from(h);
    for bad in [
        h64 + 1,
        h64 + 1000,
        u64::from(u32::MAX),
        1 << 32 | h64,
        1 << 63 | h64,
        u64::MAX,
    ] {
        if bad == h64 {
            continue;
        }
        dma_refuses(&dev, bad, &format!("handle {bad:#x} (pinned: {h})"))?;
    }
    for bad in [h.wrapping_add(1), h.wrapping_add(1000), u32::MAX] {
        if bad != h {
            expect_errno(
                &format!("UNPIN_CUDA {bad} (pinned: {h})"),
                dev.unpin_cuda(bad),
                libc::EINVAL,
            )?;
        }
    }
    // The real handle is untouched by all that.
    surface_to_host(&dev, &mut ctx.rng, &mut s, h, f.granule().min(RAM), 0)?;
    unpin(&dev, h)
}

/// UNPIN twice: the second is EINVAL, and the handle is dead for DMA; pinning again works.
fn unpin_twice(ctx: &mut Ctx) -> TestResult {
    let f = flavour(ctx.dev)?;
    let dev = open(ctx)?;
    let mut s = surface(f, f.granule())?;
    let h = pin(&dev, &s)?;
    unpin(&dev, h)?;
    expect_errno(
        &format!("second UNPIN_CUDA {h}"),
        dev.unpin_cuda(h),
        libc::EINVAL,
    )?;
    dma_refuses(&dev, h.into(), &format!("unpinned handle {h}"))?;
    let h2 = pin(&dev, &s)?;
    surface_to_host(&dev, &mut ctx.rng, &mut s, h2, 4096, 0)?;
    unpin(&dev, h2)
}

/// Handles belong to their open file: another file cannot use or unpin them, and two files' equal handle
/// numbers reach their own surfaces.
fn handle_of_other_fd(ctx: &mut Ctx) -> TestResult {
    let f = flavour(ctx.dev)?;
    let a = open(ctx)?;
    let b = open(ctx)?;
    let len = f.granule().min(RAM);
    let mut sa = surface(f, f.granule())?;
    let ha = pin(&a, &sa)?;
    dma_refuses(&b, ha.into(), &format!("handle {ha} of another file"))?;
    expect_errno(
        &format!("UNPIN_CUDA {ha} of another file"),
        b.unpin_cuda(ha),
        libc::EINVAL,
    )?;
    surface_to_host(&a, &mut ctx.rng, &mut sa, ha, len, 0)?;
    // Now b pins a surface of its own: handle numbers may coincide, surfaces must not.
    let mut sb = surface(f, f.granule())?;
    let hb = pin(&b, &sb)?;
    sa.fill_random(&mut ctx.rng);
    sb.fill_random(&mut ctx.rng);
    for (dev, h, s, name) in [(&a, ha, &sa, "a"), (&b, hb, &sb, "b")] {
        ctx_err(
            &format!("H2C from file {name}'s handle {h}"),
            dev.h2c_cuda(h.into(), 0, len as u64),
        )?;
        let mut host = GuardedBuf::new(len, 0);
        ctx_err("C2H", dev.c2h(host.as_mut_slice(), 0))?;
        compare(
            &format!("file {name}'s handle {h} (a: {ha}, b: {hb})"),
            &s.as_slice()[..len],
            host.as_slice(),
        )?;
    }
    // Closing b unpins b's surface only.
    drop(b);
    surface_to_host(&a, &mut ctx.rng, &mut sa, ha, len, 0)?;
    unpin(&a, ha)
}

/// A range overlapping a live pin of this process on this card is EBUSY (the DMA API does not support two
/// mappings of the same memory: on a non-coherent SoC the cache maintenance of one would undo the other's),
/// from the same file or another one; the first pin is unaffected, and once it is unpinned the range pins
/// again. Applications reuse the handle instead.
fn overlapping_pin(ctx: &mut Ctx) -> TestResult {
    let f = flavour(ctx.dev)?;
    let g = f.granule();
    let a = open(ctx)?;
    let b = open(ctx)?;
    let mut s = surface(f, 4 * g)?;
    let h = pin(&a, &s)?;
    let va = s.va();
    for (dev, file) in [(&a, "the same file"), (&b, "another file")] {
        for (off, len, what) in [
            (0, 4 * g, "the same range"),
            (g, g, "a granule inside it"),
            (3 * g + 1, g, "a range over its end"),
            (1, 1, "one byte of it"),
        ] {
            expect_errno(
                &format!("PIN_CUDA of {what} (+{off:#x} size {len:#x}) on {file}"),
                dev.pin_surface(va + off as u64, len as u64),
                libc::EBUSY,
            )?;
        }
    }
    // The refusals left the first pin alone.
    let len = g.min(RAM);
    surface_to_host(&a, &mut ctx.rng, &mut s, h, len, 0)?;
    host_to_surface(&a, &mut ctx.rng, &mut s, h, len, 0)?;
    unpin(&a, h)?;
    // Unpinned, the range is free again, for either file.
    let h2 = pin(&b, &s)?;
    surface_to_host(&b, &mut ctx.rng, &mut s, h2, len, 0)?;
    unpin(&b, h2)
}

/// Pins of neighbouring granules of one surface (4 KiB on Jetson, 64 KiB on dGPU) share no memory: all
/// three succeed, each moves its own bytes, and a range over the seam of two of them is EBUSY.
fn adjacent_pins(ctx: &mut Ctx) -> TestResult {
    let f = flavour(ctx.dev)?;
    let g = f.granule();
    let dev = open(ctx)?;
    let mut s = surface(f, 4 * g)?;
    let mut handles = Vec::new();
    for k in [0, 1, 3] {
        let h = pin_range(&dev, s.va() + (k * g) as u64, g).map_err(|e| {
            format!("granule {k} of {g:#x} bytes, next to granule(s) pinned before: {e}")
        })?;
        handles.push((k, h));
    }
    expect_errno(
        "PIN_CUDA over the seam of granules 0 and 1",
        dev.pin_surface(s.va() + g as u64 - 1, 2),
        libc::EBUSY,
    )?;
    s.fill_random(&mut ctx.rng);
    let len = g.min(RAM);
    for &(k, h) in &handles {
        ctx_err(
            &format!("H2C from granule {k}"),
            dev.h2c_cuda(h.into(), 0, len as u64),
        )?;
        let mut host = GuardedBuf::new(len, 0);
        ctx_err("C2H", dev.c2h(host.as_mut_slice(), 0))?;
        compare(
            &format!("granule {k} (handle {h})"),
            &s.as_slice()[k * g..k * g + len],
            host.as_slice(),
        )?;
    }
    for (_, h) in handles {
        unpin(&dev, h)?;
    }
    Ok(())
}

/// PIN_CUDA whose argument sits in a read-only page: the driver pins, then cannot write the handle back
/// (EFAULT). The caller never learns that handle, so the surface must not stay pinned under it: a PIN_CUDA
/// of the same memory right after must succeed (a leftover pin answers EBUSY: one surface per page and
/// card) and the surface must unpin. Fails on a driver that keeps the pin when the copy-out faults (issue
/// 24, defect 12).
fn readonly_pin_argument(ctx: &mut Ctx) -> TestResult {
    let dev = open(ctx)?;
    let s = surface(flavour(&dev)?, 65536)?;
    let mut arg = ctx_err(
        "map the argument page",
        Mapping::new(4096, libc::PROT_READ | libc::PROT_WRITE),
    )?;
    let req = abi::PinCuda {
        va: s.va(),
        size: s.len() as u64,
        ..Default::default()
    };
    // SAFETY: `PinCuda` is plain old data (repr(C), no padding the ABI does not name); the page holds it.
    let bytes = unsafe {
        std::slice::from_raw_parts(
            (&req as *const abi::PinCuda).cast::<u8>(),
            core::mem::size_of::<abi::PinCuda>(),
        )
    };
    arg.as_mut_slice()[..bytes.len()].copy_from_slice(bytes);
    ctx_err(
        "mprotect the argument read-only",
        arg.protect(libc::PROT_READ),
    )?;
    // SAFETY: the driver reads the struct and may write only into it; the page is read-only for this
    // process, so the write fails with EFAULT and nothing of ours changes.
    let r = unsafe { dev.ioctl_raw(pin_kind().cmd(), arg.addr() as libc::c_ulong) };
    expect_errno("PIN_CUDA with a read-only argument", r, libc::EFAULT)?;
    let h = pin(&dev, &s)?;
    ctx_err("UNPIN_CUDA", dev.unpin_cuda(h))?;
    sanity(ctx)
}
