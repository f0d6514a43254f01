//! Tests that only mean something behind an IOMMU (the harness's `--iommu`, a Jetson's SMMU): the card is
//! given IOVAs, not physical addresses, and a DMA to an address the driver has unmapped fails instead of
//! reaching whatever RAM is there now. Skipped when the card has no IOMMU group.

use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

use super::cuda;
use super::isolation::own_ram;
use super::{Ctx, Needs, Test, TestResult, ctx_err, ensure, round_trip, test};
use crate::buf::compare;
use crate::dev::{Device, Mapping};
use crate::surface::Flavour;

pub fn register(v: &mut Vec<Test>) {
    v.push(test("iommu::card_sees_iovas", card_sees_iovas).needs(Needs::Iommu));
    v.push(test("iommu::stale_address_fails", stale_address_fails).needs(Needs::Iommu));
    v.push(
        test(
            "iommu::syncs_touch_the_cards_pages",
            syncs_touch_the_cards_pages,
        )
        .needs(Needs::Iommu),
    );
}

/// The card's PCI function in sysfs (the first one with the PicoEVB's IDs).
fn card_sysfs() -> Result<PathBuf, String> {
    let want = format!("{:#06x}", picoevb_regs::pci::VENDOR_ID);
    let dev = format!("{:#06x}", picoevb_regs::pci::DEVICE_ID);
    let dir = "/sys/bus/pci/devices";
    let mut found: Vec<PathBuf> = fs::read_dir(dir)
        .map_err(|e| format!("{dir}: {e}"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let id = |f: &str| fs::read_to_string(p.join(f)).unwrap_or_default();
            id("vendor").trim() == want && id("device").trim() == dev
        })
        .collect();
    found.sort();
    found
        .into_iter()
        .next()
        .ok_or_else(|| format!("no PCI function {want}:{dev} in {dir}"))
}

/// Why the IOMMU tests cannot run, or `None`. A card that cannot be found runs them (and they fail).
pub fn unmet() -> Option<String> {
    let p = card_sysfs().ok()?;
    (!p.join("iommu_group").exists()).then(|| {
        format!(
            "no IOMMU translates the card's DMA ({} has no iommu_group)",
            p.display()
        )
    })
}

/// Whether the card's DMA goes through virtio-iommu (its IOMMU device sits on a virtio device).
pub fn virtio() -> bool {
    card_sysfs()
        .and_then(|p| fs::read_link(p.join("iommu")).map_err(|e| e.to_string()))
        .is_ok_and(|l| l.to_string_lossy().contains("virtio"))
}

/// The physical address behind `va` in this process, from /proc/self/pagemap (root sees PFNs).
fn phys_addr(va: u64) -> Result<u64, String> {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
    let mut f = fs::File::open("/proc/self/pagemap").map_err(|e| format!("pagemap: {e}"))?;
    let mut entry = [0u8; 8];
    f.seek(SeekFrom::Start(va / page * 8))
        .and_then(|_| f.read_exact(&mut entry))
        .map_err(|e| format!("pagemap at {va:#x}: {e}"))?;
    let e = u64::from_le_bytes(entry);
    let pfn = e & ((1 << 55) - 1);
    ensure!(
        e >> 63 == 1 && pfn != 0,
        "pagemap entry {e:#x} for {va:#x}: page not present or PFN hidden"
    );
    Ok(pfn * page + va % page)
}

/// The guest's RAM ranges ("System RAM" in /proc/iomem, real addresses for root).
fn system_ram() -> Result<Vec<(u64, u64)>, String> {
    let text = fs::read_to_string("/proc/iomem").map_err(|e| format!("/proc/iomem: {e}"))?;
    let ranges: Vec<(u64, u64)> = text
        .lines()
        .filter(|l| !l.starts_with(' ') && l.ends_with(": System RAM"))
        .filter_map(|l| {
            let (lo, hi) = l.split(" : ").next()?.split_once('-')?;
            Some((
                u64::from_str_radix(lo, 16).ok()?,
                u64::from_str_radix(hi, 16).ok()?,
            ))
        })
        .collect();
    ensure!(!ranges.is_empty(), "no System RAM in /proc/iomem");
    Ok(ranges)
}

/// The host address the model's H2C engine last started at, as the driver programmed it.
fn last_h2c_addr(ctx: &mut Ctx) -> Result<u64, String> {
    ctx.rpc
        .get()?
        .state()?
        .h2c
        .host_addr
        .ok_or_else(|| "model state has no h2c.host_addr".to_string())
}

fn filled(len: usize, ctx: &mut Ctx) -> Result<Mapping, String> {
    let mut m = ctx_err(
        "mmap",
        Mapping::new(len, libc::PROT_READ | libc::PROT_WRITE),
    )?;
    ctx.rng.fill(m.as_mut_slice());
    Ok(m)
}

/// An H2C from one page: the address the card was given is not the page's physical address, nor any RAM
/// address at all. Without an IOMMU it is the physical address (or, through a bounce buffer, another RAM
/// address), so this fails.
fn card_sees_iovas(ctx: &mut Ctx) -> TestResult {
    let buf = filled(4096, ctx)?;
    let pa = phys_addr(buf.addr())?;
    ctx_err("h2c", ctx.dev.h2c(buf.as_slice(), 0))?;
    let bus = last_h2c_addr(ctx)?;
    ensure!(
        bus != pa,
        "the card was given {bus:#x}, the buffer's physical address: no translation"
    );
    let ram = system_ram()?;
    ensure!(
        !ram.iter().any(|&(lo, hi)| (lo..=hi).contains(&bus)),
        "the card was given {bus:#x}, inside guest RAM {ram:x?}: not an IOVA (buffer at physical {pa:#x})"
    );
    Ok(())
}

/// The model replays the previous H2C's address (`stale_addr`) after the driver unmapped that buffer: the
/// IOMMU must stop the read (read_error, the ioctl fails) and the card must recover. Without an IOMMU the
/// read reaches the old physical page and the H2C "succeeds" with stale bytes, which fails this test.
fn stale_address_fails(ctx: &mut Ctx) -> TestResult {
    ctx.rpc.get()?.clear()?;
    // Two pages, so the freed IOVA range (an 8 KiB one) is not handed straight back for the one-page buffer
    // below. Its own file: closing it drops anything the registration cache kept mapped.
    let old = filled(8192, ctx)?;
    let f = ctx_err("open", Device::open(ctx.dev_path))?;
    ctx_err("h2c from the first buffer", f.h2c(old.as_slice(), 0))?;
    let old_bus = last_h2c_addr(ctx)?;
    drop(f);
    drop(old);
    let before = ctx.rpc.get()?.state()?;
    own_ram(ctx.dev)?;
    ctx.rpc.get()?.inject("stale_addr", 1)?;
    let new = filled(4096, ctx)?;
    let r = ctx.dev.h2c(new.as_slice(), 0x4000);
    let new_bus = last_h2c_addr(ctx)?;
    let after = ctx.rpc.get()?.state()?;
    ctx.rpc.get()?.clear()?;
    ensure!(
        new_bus != old_bus,
        "the new buffer got the old IOVA {old_bus:#x} again: the stale address is live, nothing to prove"
    );
    ensure!(
        after.faults_injected == before.faults_injected + 1,
        "stale_addr was not applied (faults_injected {} -> {})",
        before.faults_injected,
        after.faults_injected
    );
    ensure!(
        r.is_err(),
        "H2C at the unmapped address {old_bus:#x} (instead of {new_bus:#x}) succeeded: DMA outside a live \
         mapping reached memory"
    );
    ensure!(
        after.h2c.errors == before.h2c.errors + 1,
        "model h2c errors {} -> {}: the read did not fail in the model",
        before.h2c.errors,
        after.h2c.errors
    );
    round_trip(ctx.dev, &mut ctx.rng, 4096, 0, 0, 0).map(|_| ())
}

/// The driver's bench switch and counters for sync pieces (p2p.c, `check_syncs`).
const SYNC_PARAMS: &str = "/sys/module/picoevb/parameters";

fn sync_param(name: &str) -> Result<i64, String> {
    let path = format!("{SYNC_PARAMS}/{name}");
    let text = fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    text.trim()
        .parse()
        .map_err(|e| format!("{path}: {text:?}: {e}"))
}

fn check_syncs(on: bool) -> TestResult {
    let path = format!("{SYNC_PARAMS}/check_syncs");
    fs::write(&path, if on { "1" } else { "0" }).map_err(|e| format!("{path}: {e}"))
}

/// Behind an IOMMU a DMA segment is contiguous in IOVA only, and `dma_sync_single_*` translates its start
/// alone: a sync over several pages would clean or invalidate whatever follows the first page physically
/// (defect 5 of the driver's round 2). With `check_syncs` on, the driver checks every piece it syncs
/// against the IOMMU's page table (both ends must be one physical run) while cached buffers, starting
/// mid-page and spanning physically scattered pages, and a surface (Jetson) go through the card both ways.
/// Fails when a piece spans discontiguous pages (syncs_wrong, and the WARN the harness counts) or when no
/// piece was checked at all.
fn syncs_touch_the_cards_pages(ctx: &mut Ctx) -> TestResult {
    check_syncs(true)?;
    let r = checked_syncs(ctx);
    check_syncs(false)?;
    r
}

fn checked_syncs(ctx: &mut Ctx) -> TestResult {
    const PAGES: u64 = 16;
    let before = sync_param("syncs_checked")?;
    let src = filled((PAGES * 4096) as usize, ctx)?;
    let scattered = (0..PAGES - 1).any(|i| {
        let a = src.addr() + i * 4096;
        matches!((phys_addr(a), phys_addr(a + 4096)), (Ok(p), Ok(q)) if q != p + 4096)
    });
    ensure!(
        scattered,
        "the buffer's {PAGES} pages are physically contiguous: a whole-segment sync would look right"
    );
    // A file of its own: a fresh registration cache, so the first pass pins (miss) and the second hits.
    let dev = cuda::open(ctx)?;
    let mut back = ctx_err(
        "mmap",
        Mapping::new(src.len(), libc::PROT_READ | libc::PROT_WRITE),
    )?;
    let (from, len) = (100usize, src.len() - 200);
    for pass in ["miss", "hit"] {
        ctx_err(
            &format!("h2c ({pass})"),
            dev.h2c(&src.as_slice()[from..from + len], 0),
        )?;
        ctx_err(
            &format!("c2h ({pass})"),
            dev.c2h(&mut back.as_mut_slice()[from..from + len], 0),
        )?;
        compare(
            &format!("cached round trip ({pass})"),
            &src.as_slice()[from..from + len],
            &back.as_slice()[from..from + len],
        )?;
    }
    if let Ok(Flavour::Jetson) = cuda::flavour(&dev) {
        let mut s = cuda::surface(Flavour::Jetson, 65536)?;
        let h = cuda::pin(&dev, &s)?;
        cuda::surface_to_host(&dev, &mut ctx.rng, &mut s, h, 65536 - 300, 0)?;
        cuda::unpin(&dev, h)?;
    }
    let (checked, wrong) = (
        sync_param("syncs_checked")? - before,
        sync_param("syncs_wrong")?,
    );
    ensure!(
        checked > 0,
        "check_syncs checked no sync piece: the transfers synced nothing behind the IOMMU"
    );
    ensure!(
        wrong == 0,
        "{wrong} sync piece(s) spanned physically discontiguous pages ({checked} checked)"
    );
    println!("GUEST SYNCS {checked} pieces checked against the IOMMU, each one physical run");
    Ok(())
}
