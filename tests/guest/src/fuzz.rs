//! `gdr-guest-tests fuzz`: random and malformed ioctls from several threads and files at once.
//!
//! Every call must end in success or in one of the errnos the ABI allows for it; a round trip between
//! valid buffers must also move the right bytes. Pointers are either our own buffers or addresses that
//! are invalid by construction (NULL, low, kernel, a PROT_NONE hole, a read-only page), never random: a
//! random pointer could let the device scribble over this program. GPU surfaces are pinned, unpinned and
//! unmapped under the driver's feet (the provider's free callback). With the registration cache, its ioctl
//! is fuzzed too (valid limits, FLUSH, malformed calls), and besides its two own files each thread uses one
//! file shared by all threads, so lookups, inserts, evictions and limit changes race on one cache. At the
//! end the device must still work and the kernel's DMA-mapping and pinned-page counters must be back where
//! they started.

use std::io;
use std::os::fd::AsRawFd;
use std::thread;

use picoevb_abi::{self as abi, RegCache};
use picoevb_regs::pci::FPGA_RAM_SIZE;

use crate::dev::{Device, Mapping};
use crate::exporter;
use crate::kstat;
use crate::rng::Rng;
use crate::surface::{Flavour, Surface};

pub struct Options {
    pub seed: u64,
    pub iterations: u64,
    pub threads: u32,
    pub dev_path: String,
}

const SCRATCH: usize = 512 << 10;
const KERNEL_ADDR: u64 = 0xffff_8880_0000_0000;

/// What one thread saw.
struct Tally {
    calls: u64,
    ok: u64,
    errnos: [u64; 128],
    verified_bytes: u64,
    pins: u64,
    unmapped_pinned: u64,
    reg_cache: u64,
    failures: Vec<String>,
}

impl Default for Tally {
    fn default() -> Self {
        Tally {
            calls: 0,
            ok: 0,
            errnos: [0; 128],
            verified_bytes: 0,
            pins: 0,
            unmapped_pinned: 0,
            reg_cache: 0,
            failures: Vec::new(),
        }
    }
}

impl Tally {
    fn merge(&mut self, o: Tally) {
        self.calls += o.calls;
        self.ok += o.ok;
        for (a, b) in self.errnos.iter_mut().zip(o.errnos) {
            *a += b;
        }
        self.verified_bytes += o.verified_bytes;
        self.pins += o.pins;
        self.unmapped_pinned += o.unmapped_pinned;
        self.reg_cache += o.reg_cache;
        self.failures.extend(o.failures);
    }

    fn fail(&mut self, msg: String) {
        if self.failures.len() < 20 {
            self.failures.push(msg);
        }
    }

    /// Records a result; `allowed` are the errnos this call may legitimately fail with.
    fn record<T>(&mut self, what: &str, r: &io::Result<T>, allowed: &[i32]) -> bool {
        self.calls += 1;
        match r {
            Ok(_) => {
                self.ok += 1;
                true
            }
            Err(e) => {
                let errno = e.raw_os_error().unwrap_or(0);
                self.errnos[(errno as usize).min(127)] += 1;
                if !allowed.contains(&errno) && self.failures.len() < 20 {
                    self.failures.push(format!("{what}: {e}"));
                }
                false
            }
        }
    }
}

/// Memory a thread owns: a scratch buffer the device may read and write, a hole, a read-only page.
struct Arena {
    scratch: *mut u8,
    _maps: [Mapping; 3],
    hole: u64,
    readonly: u64,
}

impl Arena {
    fn new() -> io::Result<Self> {
        let scratch = Mapping::new(SCRATCH, libc::PROT_READ | libc::PROT_WRITE)?;
        let hole = Mapping::new(4096, libc::PROT_NONE)?;
        let readonly = Mapping::new(4096, libc::PROT_READ)?;
        Ok(Arena {
            scratch: scratch.addr() as *mut u8,
            hole: hole.addr(),
            readonly: readonly.addr(),
            _maps: [scratch, hole, readonly],
        })
    }

    /// A user pointer for a buffer of `len` bytes: mostly valid, sometimes invalid by construction.
    fn pointer(&self, rng: &mut Rng, len: u64) -> (u64, bool) {
        match rng.next_u64() % 10 {
            0 => (0, false),
            1 => (0x10, false),
            2 => (KERNEL_ADDR + rng.next_u64() % 0x1000_0000, false),
            3 => (self.hole + rng.next_u64() % 4096, false),
            4 => (self.readonly, false),
            _ => {
                let len = len.min(SCRATCH as u64 / 2);
                let off = rng.next_u64() % (SCRATCH as u64 / 2 - len + 1);
                (self.scratch as u64 + off, true)
            }
        }
    }
}

fn length(rng: &mut Rng) -> u64 {
    match rng.next_u64() % 12 {
        0 => 0,
        1 => u64::MAX - rng.next_u64() % 16,
        2 => 65536 + rng.next_u64() % 65536,
        3 => 1 + rng.next_u64() % 16,
        4 => (300 << 20) + rng.next_u64() % 4096,
        _ => 1 + rng.next_u64() % 65536,
    }
}

fn flags(rng: &mut Rng, cuda_bits: u64) -> u64 {
    match rng.next_u64() % 8 {
        0 => rng.next_u64(),
        1 => 1 << (rng.next_u64() % 64),
        2 => cuda_bits,
        _ => 0,
    }
}

const E: &[i32] = &[libc::EINVAL, libc::EFAULT];

/// The registration cache as the fuzzer sees it: whether the driver has it, its capacity, and per file the
/// last answer (counters never go back).
struct CacheView {
    present: bool,
    capacity: u32,
    last: [Option<RegCache>; 3],
}

/// The shared file's index in a worker's files.
const SHARED: usize = 2;

/// A random IOC_REG_CACHE call on file `d`: valid ones must succeed with a consistent answer, malformed ones
/// fail with their errno; without the cache every call is ENOTTY.
fn reg_cache_call(
    rng: &mut Rng,
    dev: &Device,
    d: usize,
    arena: &Arena,
    cache: &mut CacheView,
    tally: &mut Tally,
) {
    tally.reg_cache += 1;
    let small = |rng: &mut Rng| match rng.next_u64() % 4 {
        0 => 0,
        1 => cache.capacity,
        _ => 1 + (rng.next_u64() % 8) as u32,
    };
    let mut a = RegCache::default();
    let kind = rng.next_u64() % 10;
    let (what, allowed): (&str, &[i32]) = match kind {
        0..=2 => ("REG_CACHE QUERY", &[]),
        3 | 4 => {
            a.op = abi::REG_CACHE_SET_LIMITS;
            a.max_entries = small(rng);
            a.max_bytes = match rng.next_u64() % 3 {
                0 => 4096 * (1 + rng.next_u64() % 16),
                1 => 1 << 20,
                _ => 64 << 20,
            };
            ("REG_CACHE SET_LIMITS", &[])
        }
        5 => {
            a.op = abi::REG_CACHE_FLUSH;
            ("REG_CACHE FLUSH", &[])
        }
        6 => {
            a.op = 3 + (rng.next_u64() % u64::from(u32::MAX - 3)) as u32;
            a.max_entries = small(rng);
            ("REG_CACHE unknown op", &[libc::EINVAL])
        }
        7 => {
            a.op = abi::REG_CACHE_SET_LIMITS;
            a.max_entries = cache
                .capacity
                .saturating_add(1 + (rng.next_u64() % 1000) as u32);
            a.max_bytes = 1 << 20;
            ("REG_CACHE SET_LIMITS over capacity", &[libc::EINVAL])
        }
        8 => {
            a.op = (rng.next_u64() % 3) as u32;
            a.max_entries = small(rng);
            a.max_bytes = 1 << 20;
            a.reserved[(rng.next_u64() % 4) as usize] = rng.next_u64() | 1;
            ("REG_CACHE nonzero reserved", &[libc::EINVAL])
        }
        _ => {
            // Our scratch memory (random bytes: almost always a bad op, now and then a valid call) or an
            // address invalid by construction.
            let (p, valid) = arena.pointer(rng, std::mem::size_of::<RegCache>() as u64);
            // SAFETY: `p` is our scratch memory, with no references into it, or invalid by construction.
            let r = unsafe { dev.ioctl_raw(abi::IOC_REG_CACHE, p as libc::c_ulong) };
            let allowed: &[i32] = match (cache.present, valid) {
                (false, _) => &[libc::ENOTTY],
                (true, true) => &[libc::EINVAL],
                (true, false) => &[libc::EFAULT],
            };
            tally.record("REG_CACHE with a random pointer", &r, allowed);
            return;
        }
    };
    let requested = a;
    let r = dev.reg_cache_raw(&mut a);
    if !cache.present {
        tally.record(what, &r, &[libc::ENOTTY]);
        return;
    }
    if !tally.record(what, &r, allowed) || kind >= 6 {
        if r.is_ok() {
            tally.fail(format!("{what} succeeded: {requested:?}"));
        }
        return;
    }
    // Valid and done: a consistent answer, counters not going back. On the file only this thread uses the
    // answer must also show exactly what was asked for.
    let mut bad = Vec::new();
    if a.max_entries > a.capacity
        || a.entries > a.max_entries
        || a.bytes > a.max_bytes
        || (a.entries == 0) != (a.bytes == 0)
        || a.reserved != [0; 4]
        || a.capacity != cache.capacity
    {
        bad.push("inconsistent");
    }
    let own = d != SHARED;
    if own
        && requested.op == abi::REG_CACHE_SET_LIMITS
        && (a.max_entries, a.max_bytes) != (requested.max_entries, requested.max_bytes)
    {
        bad.push("limits not as set");
    }
    if own && requested.op == abi::REG_CACHE_FLUSH && a.entries != 0 {
        bad.push("entries left after FLUSH");
    }
    if let Some(l) = &cache.last[d] {
        let now = [a.hits, a.misses, a.evictions, a.invalidations, a.uncached];
        let then = [l.hits, l.misses, l.evictions, l.invalidations, l.uncached];
        if now.iter().zip(then).any(|(n, t)| *n < t) {
            bad.push("a counter went back");
        }
    }
    if !bad.is_empty() {
        tally.fail(format!(
            "{what} on file {d}: {}: asked {requested:?}, answered {a:?}",
            bad.join(", ")
        ));
    }
    cache.last[d] = Some(a);
}

/// IMPORT_DMABUF of a fresh udmabuf with a window that is sometimes wrong; an imported one is used by an H2C
/// and unpinned (on this thread's own file, so no other thread's UNPIN can end it first).
fn dmabuf_call(rng: &mut Rng, dev: &Device, tally: &mut Tally) {
    let page = exporter::page_size();
    let pages = 1 + rng.next_u64() % 16;
    let size = pages * page;
    let (_memfd, buf) = match exporter::udmabuf_from_memfd(size) {
        Ok(b) => b,
        Err(e) => {
            tally.failures.push(format!("udmabuf of {size}: {e}"));
            return;
        }
    };
    let (offset, len) = if rng.next_u64().is_multiple_of(3) {
        (rng.next_u64() % (2 * size), rng.next_u64() % (2 * size))
    } else {
        let first = rng.next_u64() % pages;
        (first * page, (1 + rng.next_u64() % (pages - first)) * page)
    };
    let r = dev.import_dmabuf(buf.as_raw_fd(), offset, len);
    if tally.record("IMPORT_DMABUF", &r, &[libc::EINVAL])
        && let Ok(a) = r
    {
        tally.pins += 1;
        let r = dev.h2c_cuda(a.handle.into(), 0, len.min(FPGA_RAM_SIZE));
        tally.record("H2C from an import", &r, &[]);
        let r = dev.unpin_cuda(a.handle);
        tally.record("UNPIN of an import", &r, &[]);
    }
}

/// One thread's run: its own two files and the one shared by all threads.
fn worker(
    opts: &Options,
    t: u32,
    flavour: Option<Flavour>,
    iterations: u64,
    shared: &Device,
) -> Tally {
    let mut rng = Rng::new(opts.seed ^ (u64::from(t) << 32 | 0x5eed));
    let mut tally = Tally::default();
    let open = |tally: &mut Tally| match Device::open(&opts.dev_path) {
        Ok(d) => Some(d),
        Err(e) => {
            tally.failures.push(format!("open {}: {e}", opts.dev_path));
            None
        }
    };
    let (Some(a), Some(b)) = (open(&mut tally), open(&mut tally)) else {
        return tally;
    };
    let devs = [&a, &b, shared];
    let mut cache = match shared.reg_cache_query() {
        Ok(s) => CacheView {
            present: true,
            capacity: s.capacity,
            last: [None; 3],
        },
        Err(_) => CacheView {
            present: false,
            capacity: 64,
            last: [None; 3],
        },
    };
    let arena = match Arena::new() {
        Ok(a) => a,
        Err(e) => {
            tally.failures.push(format!("mmap: {e}"));
            return tally;
        }
    };
    // dma-buf import (CAP_DMABUF) of udmabufs, when the kernel has both.
    let dmabuf = shared
        .abi_info()
        .is_ok_and(|i| i.caps & abi::CAP_DMABUF != 0)
        && std::path::Path::new(exporter::UDMABUF_PATH).exists();
    // Pinned surfaces: (file index, handle, surface, length pinned).
    let mut pinned: Vec<(usize, u32, Surface, u64)> = Vec::new();
    // EBUSY: a malformed range can run into a surface this thread has pinned (one pin per range).
    // EAGAIN: another thread remapped the memory while it was being pinned.
    let pin_errs: &[i32] = &[
        libc::EINVAL,
        libc::EFAULT,
        libc::EOPNOTSUPP,
        libc::ENOMEM,
        libc::EBUSY,
        libc::EAGAIN,
    ];

    for _ in 0..iterations {
        let d = (rng.next_u64() % 3) as usize;
        let dev = devs[d];
        let handle = |rng: &mut Rng| -> u64 {
            match pinned
                .iter()
                .filter(|p| p.0 == d)
                .nth((rng.next_u64() % 4) as usize)
            {
                Some(p) if !rng.next_u64().is_multiple_of(4) => u64::from(p.1),
                _ => {
                    (rng.next_u64() % 64)
                        | if rng.next_u64().is_multiple_of(8) {
                            1 << 40
                        } else {
                            0
                        }
                }
            }
        };
        match rng.next_u64() % 13 {
            0 => {
                let v = if rng.next_u64().is_multiple_of(8) {
                    rng.next_u64()
                } else {
                    rng.next_u64() % 8
                };
                // SAFETY: LED passes a plain integer; nothing is dereferenced.
                let r = unsafe { dev.ioctl_raw(abi::IOC_LED, v as libc::c_ulong) };
                tally.record("LED", &r, &[libc::EINVAL]);
            }
            1 => {
                let (p, _) = arena.pointer(&mut rng, 64);
                let cmd = if rng.next_u64().is_multiple_of(2) {
                    abi::IOC_CARD_INFO
                } else {
                    abi::IOC_ABI_INFO
                };
                // SAFETY: `p` is our scratch memory or invalid by construction (the kernel then faults).
                let r = unsafe { dev.ioctl_raw(cmd, p as libc::c_ulong) };
                tally.record("INFO", &r, &[libc::EFAULT]);
            }
            2 | 3 => {
                let len = length(&mut rng);
                let cuda = rng.next_u64().is_multiple_of(4);
                let host = if cuda {
                    handle(&mut rng)
                } else {
                    arena.pointer(&mut rng, len).0
                };
                let fpga = rng.next_u64() % 0x20000;
                let f = flags(&mut rng, if cuda { 1 } else { 0 });
                let mut req = abi::H2cDma {
                    src: host,
                    dst: fpga,
                    len,
                    flags: f,
                    dma_time_ns: 0,
                };
                let cmd = if rng.next_u64().is_multiple_of(2) {
                    abi::IOC_H2C_DMA
                } else {
                    // C2H has dst (host) first: the same two words swapped.
                    req = abi::H2cDma {
                        src: fpga,
                        dst: host,
                        ..req
                    };
                    abi::IOC_C2H_DMA
                };
                // SAFETY: host pointers are our scratch memory (no references into it are live) or invalid
                // by construction; handles name only our own pinned surfaces.
                let r = unsafe { dev.ioctl_raw(cmd, &mut req as *mut _ as libc::c_ulong) };
                tally.record("H2C/C2H", &r, E);
            }
            4 | 5 => {
                let len = length(&mut rng).min(if rng.next_u64().is_multiple_of(16) {
                    u64::MAX
                } else {
                    128 << 10
                });
                let f = flags(&mut rng, 3);
                let half = (SCRATCH / 2) as u64;
                let valid = f == 0 && len > 0 && len <= half && !rng.next_u64().is_multiple_of(3);
                let (src, dst) = if valid {
                    (arena.scratch as u64, arena.scratch as u64 + half)
                } else {
                    let s = if f & 1 != 0 {
                        handle(&mut rng)
                    } else {
                        arena.pointer(&mut rng, len).0
                    };
                    let t = if f & 2 != 0 {
                        handle(&mut rng)
                    } else {
                        arena.pointer(&mut rng, len).0
                    };
                    (s, t)
                };
                if valid {
                    let n = len as usize;
                    // SAFETY: both halves lie in our scratch mapping; no references into it outlive this.
                    unsafe {
                        let s = std::slice::from_raw_parts_mut(arena.scratch, n);
                        rng.fill(s);
                        std::ptr::write_bytes(arena.scratch.add(SCRATCH / 2), !s[0], n);
                    }
                }
                let mut req = abi::H2c2hDma {
                    src,
                    dst,
                    len,
                    flags: f,
                    dma_time_ns: 0,
                };
                // SAFETY: as for H2C/C2H.
                let r = unsafe {
                    dev.ioctl_raw(abi::IOC_H2C2H_DMA, &mut req as *mut _ as libc::c_ulong)
                };
                if tally.record("H2C2H", &r, E) && valid {
                    // SAFETY: the DMA is over; both ranges are ours and not otherwise borrowed.
                    let same = unsafe {
                        std::slice::from_raw_parts(arena.scratch, len as usize)
                            == std::slice::from_raw_parts(
                                arena.scratch.add(SCRATCH / 2),
                                len as usize,
                            )
                    };
                    if same {
                        tally.verified_bytes += len;
                    } else if tally.failures.len() < 20 {
                        tally
                            .failures
                            .push(format!("H2C2H of {len} bytes returned wrong data"));
                    }
                }
            }
            6 => {
                // Never on the shared file: another thread's random UNPIN_CUDA could end this thread's pin.
                let d = d % 2;
                let dev = devs[d];
                if dmabuf && rng.next_u64().is_multiple_of(4) {
                    dmabuf_call(&mut rng, dev, &mut tally);
                    continue;
                }
                // PIN_HOST (host memory as a surface, no provider needed) half the time, and always
                // without a provider; its handles behave as PIN_CUDA's.
                let host = flavour.is_none() || rng.next_u64().is_multiple_of(2);
                if flavour.is_none() && rng.next_u64().is_multiple_of(4) {
                    let r = dev.pin_cuda(arena.scratch as u64, 4096);
                    tally.record("PIN_CUDA without provider", &r, &[libc::EOPNOTSUPP]);
                    continue;
                }
                let fl = if host {
                    Flavour::Jetson
                } else {
                    flavour.unwrap_or(Flavour::Jetson)
                };
                if pinned.len() >= 16 {
                    continue;
                }
                let size = fl.granule() * (1 + (rng.next_u64() % 8) as usize);
                let s = match Surface::new(fl, size) {
                    Ok(s) => s,
                    Err(e) => {
                        tally.failures.push(format!("surface of {size}: {e}"));
                        continue;
                    }
                };
                let bad = rng.next_u64().is_multiple_of(5);
                let (va, len) = if bad {
                    (arena.pointer(&mut rng, 4096).0, 4096)
                } else {
                    (s.va(), s.len() as u64)
                };
                let size = if bad { length(&mut rng) } else { len };
                let (r, what) = if host {
                    (dev.pin_host(va, size), "PIN_HOST")
                } else {
                    (dev.pin_cuda(va, size), "PIN_CUDA")
                };
                if tally.record(what, &r, pin_errs)
                    && let Ok(h) = r
                {
                    tally.pins += 1;
                    if bad {
                        let _ = dev.unpin_cuda(h);
                    } else {
                        pinned.push((d, h, s, len));
                    }
                }
            }
            7 => {
                let h = handle(&mut rng);
                let r = dev.unpin_cuda(h as u32);
                tally.record("UNPIN_CUDA", &r, &[libc::EINVAL]);
                // UNPIN_CUDA's handle is 32 bits: a random one with high bits set names `h as u32`.
                pinned.retain(|p| !(p.0 == d && p.1 == h as u32));
            }
            8 => {
                // The memory behind a pinned surface goes away: the provider's callback ends the pin.
                if !pinned.is_empty() {
                    let i = (rng.next_u64() % pinned.len() as u64) as usize;
                    let (fd, h, mut s, _) = pinned.swap_remove(i);
                    if let Err(e) = s.unmap() {
                        tally.failures.push(format!("munmap surface: {e}"));
                    }
                    tally.unmapped_pinned += 1;
                    let r = devs[fd].h2c_cuda(u64::from(h), 0, 64);
                    tally.calls += 1;
                    if !matches!(&r, Err(e) if e.raw_os_error() == Some(libc::EINVAL)) {
                        tally
                            .failures
                            .push(format!("DMA from an unmapped surface: {r:?}, want EINVAL"));
                    }
                }
            }
            9 => reg_cache_call(&mut rng, dev, d, &arena, &mut cache, &mut tally),
            10 => {
                // IOC_STREAM with any op, flags and sizes. A source it enables produces on demand (period
                // 0), so a later stream C2H never waits for records: the fuzzer's own requests must not time
                // out.
                let mut a = abi::Stream {
                    op: (rng.next_u64() % 6) as u32,
                    enable: (rng.next_u64() % 3) as u32,
                    record_bytes: match rng.next_u64() % 4 {
                        0 => rng.next_u64() as u32,
                        1 => (rng.next_u64() % 4200) as u32,
                        _ => 8 * (3 + (rng.next_u64() % 510) as u32),
                    },
                    period_ticks: rng.next_u64() as u32,
                    ..Default::default()
                };
                if a.enable != 0 {
                    a.period_ticks = 0;
                }
                if rng.next_u64().is_multiple_of(16) {
                    a.reserved[1] = 1;
                }
                let r = dev.stream_raw(&mut a);
                tally.record("STREAM", &r, &[libc::EINVAL, libc::EOPNOTSUPP]);
            }
            11 => {
                // IOC_STREAM_RING: a short ring into (or, RING_H2C, out of) our scratch memory or one of our
                // surfaces, its control block in the scratch's upper half (or anywhere). At most 8 slots are
                // moved and never more than the ring holds, so a back-pressure ring, whose consumer nobody
                // runs, never waits; a `total` of 0 (until stopped) is never asked for.
                let slots = (rng.next_u64() % 10) as u32;
                let slot_bytes = match rng.next_u64() % 4 {
                    0 => rng.next_u64() % 64,
                    1 => 4096,
                    _ => 8 * (1 + rng.next_u64() % 512),
                };
                let total = 1 + rng.next_u64() % u64::from(slots.clamp(1, 8));
                let cuda = rng.next_u64().is_multiple_of(4);
                let ring = if cuda {
                    handle(&mut rng)
                } else {
                    arena.pointer(&mut rng, u64::from(slots) * slot_bytes).0
                };
                let upper = arena.scratch as u64 + SCRATCH as u64 / 2;
                let control = match rng.next_u64() % 8 {
                    0 => arena.hole,
                    1 => arena.readonly,
                    2 => upper + 4,
                    _ => {
                        // A fresh control block whose caller has produced everything already, so a ring
                        // the driver empties (RING_H2C) never waits for slots either.
                        let words = [0, u64::MAX, 0, 0, 0];
                        // SAFETY: 40 bytes at the start of our scratch's upper half (8-aligned: the scratch
                        // is a mapping), no reference into it.
                        unsafe {
                            std::ptr::copy_nonoverlapping(words.as_ptr(), upper as *mut u64, 5)
                        };
                        upper
                    }
                };
                let mut flags = if cuda { abi::RING_CUDA } else { 0 };
                match rng.next_u64() % 4 {
                    0 | 1 => flags |= abi::RING_DROP_OLDEST,
                    2 => flags |= abi::RING_H2C,
                    _ => {}
                }
                if rng.next_u64().is_multiple_of(16) {
                    flags |= 1 << (rng.next_u64() % 32);
                }
                // The ring's eventfd (RING_EVENTFD): a live one of ours, none, or a descriptor that is
                // not one (the device's own); a stray flag bit may set it with descriptor 0.
                let wake = crate::dev::EventFd::new().ok();
                let eventfd = match rng.next_u64() % 8 {
                    0 => wake.as_ref().map_or(-1, |e| e.raw()),
                    1 => -1,
                    2 => dev.raw_fd(),
                    _ => 0,
                };
                if eventfd != 0 {
                    flags |= abi::RING_EVENTFD;
                }
                let mut a = abi::StreamRing {
                    ring,
                    control,
                    slot_bytes,
                    total,
                    slots,
                    chain_slots: (rng.next_u64() % 5) as u32,
                    flags,
                    eventfd,
                    ..Default::default()
                };
                // SAFETY: the ring and the control block are our scratch memory (no references into it are
                // live) or invalid by construction; handles name only our own pinned surfaces.
                let r = unsafe { dev.stream_ring_raw(&mut a) };
                tally.record(
                    "STREAM_RING",
                    &r,
                    &[libc::EINVAL, libc::EFAULT, libc::EBADF],
                );
            }
            _ => {
                // Unknown ioctls: other numbers of our type and foreign types, with our scratch pointer.
                let nr = 7 + rng.next_u64() % 0x39;
                let ty = if rng.next_u64().is_multiple_of(2) {
                    u32::from(b'P')
                } else {
                    (rng.next_u64() % 256) as u32
                };
                let size = (rng.next_u64() % 128) as u32;
                let dir = (rng.next_u64() % 4) as u32;
                let cmd = dir << 30 | size << 16 | ty << 8 | nr as u32;
                let known = [
                    abi::IOC_LED,
                    abi::IOC_PIN_CUDA,
                    abi::IOC_UNPIN_CUDA,
                    abi::IOC_H2C2H_DMA,
                    abi::IOC_CARD_INFO,
                    abi::IOC_H2C_DMA,
                    abi::IOC_C2H_DMA,
                    abi::IOC_ABI_INFO,
                    abi::IOC_REG_CACHE,
                ];
                if known.contains(&cmd) {
                    continue;
                }
                // SAFETY: the driver must not act on unknown commands; the pointer is our scratch anyway.
                let r = unsafe { dev.ioctl_raw(cmd, arena.scratch as libc::c_ulong) };
                tally.record("unknown ioctl", &r, &[libc::ENOTTY]);
                if r.is_ok() && tally.failures.len() < 20 {
                    tally
                        .failures
                        .push(format!("unknown ioctl {cmd:#x} succeeded"));
                }
            }
        }
    }
    // Half the surfaces are unpinned, the rest are left to close() and drop.
    for (i, (fd, h, _, _)) in pinned.iter().enumerate() {
        if i % 2 == 0 {
            let r = devs[*fd].unpin_cuda(*h);
            tally.record("final UNPIN_CUDA", &r, &[]);
        }
    }
    drop((a, b));
    drop(pinned);
    tally
}

/// Runs the fuzzer; prints its figures and TEST lines; returns the exit code.
pub fn run(opts: &Options) -> i32 {
    println!("GUEST SEED {}", opts.seed);
    let before = kstat::read();
    let flavour = Device::open(&opts.dev_path)
        .and_then(|d| d.abi_info())
        .ok()
        .and_then(|i| Flavour::from_caps(i.caps));
    let per = opts.iterations.div_ceil(u64::from(opts.threads.max(1)));
    let mut total = Tally::default();
    let shared = match Device::open(&opts.dev_path) {
        Ok(d) => d,
        Err(e) => {
            println!("TEST fuzz::open ... FAILED: open {}: {e}", opts.dev_path);
            println!("GUEST RESULT: 0 passed, 1 failed");
            return 1;
        }
    };
    thread::scope(|s| {
        let hs: Vec<_> = (0..opts.threads.max(1))
            .map(|t| {
                let shared = &shared;
                s.spawn(move || worker(opts, t, flavour, per, shared))
            })
            .collect();
        for h in hs {
            match h.join() {
                Ok(t) => total.merge(t),
                Err(_) => total.failures.push("a fuzz thread panicked".into()),
            }
        }
    });
    let errnos: Vec<String> = total
        .errnos
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(e, n)| format!("{}:{n}", crate::tests::errno_name(e as i32)))
        .collect();
    println!(
        "GUEST FUZZ threads {} calls {} ok {} errors [{}] verified_bytes {} pins {} unmapped_while_pinned {} \
         provider {} reg_cache {}",
        opts.threads,
        total.calls,
        total.ok,
        errnos.join(" "),
        total.verified_bytes,
        total.pins,
        total.unmapped_pinned,
        flavour.map_or("none", |f| f.name()),
        total.reg_cache
    );
    if let Ok(c) = shared.reg_cache_query() {
        println!(
            "GUEST FUZZ shared file's cache: hits {} misses {} evictions {} invalidations {} uncached {}",
            c.hits, c.misses, c.evictions, c.invalidations, c.uncached
        );
    }
    // Closed before the counters are compared: its cached buffers are pinned until then.
    drop(shared);
    let mut failed = 0;
    let mut report = |name: &str, r: Result<(), String>| match r {
        Ok(()) => println!("TEST {name} ... ok"),
        Err(e) => {
            failed += 1;
            println!("TEST {name} ... FAILED: {e}");
        }
    };
    report(
        "fuzz::every_result_allowed",
        if total.failures.is_empty() {
            Ok(())
        } else {
            Err(total.failures.join("; "))
        },
    );
    report("fuzz::device_works_after", sanity(opts));
    report("fuzz::kernel_counters_back_to_baseline", counters(&before));
    println!("GUEST RESULT: {} passed, {failed} failed", 3 - failed);
    i32::from(failed > 0)
}

fn sanity(opts: &Options) -> Result<(), String> {
    let dev = Device::open(&opts.dev_path).map_err(|e| format!("open: {e}"))?;
    let src: Vec<u8> = (0..65536u32).map(|i| (i * 7 + 3) as u8).collect();
    let mut dst = vec![0u8; src.len()];
    dev.h2c2h(&src, &mut dst)
        .map_err(|e| format!("H2C2H: {e}"))?;
    if src != dst {
        return Err("H2C2H after fuzzing returned wrong data".into());
    }
    Ok(())
}

fn counters(before: &Result<kstat::KernelCounters, String>) -> Result<(), String> {
    let before = before
        .as_ref()
        .map_err(|e| format!("counters before: {e}"))?;
    // The provider's free callbacks and deferred frees may still be running: give them a moment.
    let mut after = kstat::read()?;
    for _ in 0..50 {
        if after.pinned_pages == before.pinned_pages && after.dma_entries == before.dma_entries {
            break;
        }
        thread::sleep(std::time::Duration::from_millis(100));
        after = kstat::read()?;
    }
    println!("GUEST FUZZ counters before: {}", before.describe());
    println!("GUEST FUZZ counters after:  {}", after.describe());
    if after.dma_errors != before.dma_errors {
        return Err(format!(
            "DMA-API errors {} -> {}",
            before.dma_errors, after.dma_errors
        ));
    }
    if after.pinned_pages != before.pinned_pages || after.dma_entries != before.dma_entries {
        return Err(format!(
            "not back to baseline: {} vs {}",
            after.describe(),
            before.describe()
        ));
    }
    Ok(())
}
