//! One memory under many addresses or files: the driver's rules key on the pages, per card. A memfd mapped
//! at two addresses is one surface (PIN_CUDA through the second address is EBUSY), PIN_CUDA through one
//! address drops a host buffer cached through the other, and a page is cached once per card however many
//! files or addresses use it (DMA-API debug supports at most 7 overlapping mappings of a cache line).

use super::*;

/// A memfd of `len` bytes mapped shared at `n` addresses: the same pages under each.
struct Aliases {
    fd: libc::c_int,
    len: usize,
    addrs: Vec<*mut libc::c_void>,
}

impl Aliases {
    fn new(len: usize, n: usize) -> Result<Self, String> {
        // SAFETY: plain syscalls on a new file descriptor we own; every mapping is checked and kept in
        // `addrs` until drop.
        unsafe {
            let fd = libc::memfd_create(c"gdr-alias".as_ptr(), 0);
            ensure!(fd >= 0, "memfd_create: {}", io::Error::last_os_error());
            let mut me = Aliases {
                fd,
                len,
                addrs: Vec::new(),
            };
            ensure!(
                libc::ftruncate(fd, len as libc::off_t) == 0,
                "ftruncate: {}",
                io::Error::last_os_error()
            );
            for _ in 0..n {
                let a = libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    RW,
                    libc::MAP_SHARED | libc::MAP_POPULATE,
                    fd,
                    0,
                );
                ensure!(
                    a != libc::MAP_FAILED,
                    "mmap of the memfd: {}",
                    io::Error::last_os_error()
                );
                me.addrs.push(a);
            }
            Ok(me)
        }
    }

    fn addr(&self, i: usize) -> u64 {
        self.addrs[i] as u64
    }

    /// The bytes, through address `i`.
    fn slice(&self, i: usize) -> &[u8] {
        // SAFETY: `len` bytes mapped readable and writable until drop.
        unsafe { std::slice::from_raw_parts(self.addrs[i].cast(), self.len) }
    }

    fn fill(&mut self, rng: &mut Rng) {
        // SAFETY: as in `slice`; `&mut self` keeps other borrows out.
        rng.fill(unsafe { std::slice::from_raw_parts_mut(self.addrs[0].cast(), self.len) });
    }
}

impl Drop for Aliases {
    fn drop(&mut self) {
        // SAFETY: our own mappings and descriptor, released once.
        unsafe {
            for &a in &self.addrs {
                libc::munmap(a, self.len);
            }
            libc::close(self.fd);
        }
    }
}

/// PIN_CUDA of memory already pinned as a surface under another address is EBUSY, also for a part of
/// it; after UNPIN_CUDA the other address pins.
pub(super) fn pin_cuda_twice(ctx: &mut Ctx) -> TestResult {
    let dev = open_cached(ctx)?;
    let m = Aliases::new(2 * PAGE, 2)?;
    let h = super::super::cuda::pin_range(&dev, m.addr(0), 2 * PAGE)?;
    for (what, va, len) in [
        ("the whole memory", m.addr(1), 2 * PAGE),
        ("its second page", m.addr(1) + PAGE as u64, PAGE),
    ] {
        expect_errno(
            &format!("PIN_CUDA of {what} through a second address"),
            dev.pin_cuda(va, len as u64),
            libc::EBUSY,
        )?;
    }
    let other = open_cached(ctx)?;
    expect_errno(
        "PIN_CUDA through a second address, from another file",
        other.pin_cuda(m.addr(1), 2 * PAGE as u64),
        libc::EBUSY,
    )?;
    super::super::cuda::unpin(&dev, h)?;
    let h = super::super::cuda::pin_range(&dev, m.addr(1), 2 * PAGE)?;
    super::super::cuda::unpin(&dev, h)
}

/// PIN_CUDA through one address drops the host buffer cached through the other (in another file), and
/// host DMA through that address is then pinned for once, moving the right bytes.
pub(super) fn pin_cuda_evicts_alias(ctx: &mut Ctx) -> TestResult {
    let (a, b) = (open_cached(ctx)?, open_cached(ctx)?);
    let verify = open_uncached(ctx)?;
    let mut m = Aliases::new(2 * PAGE, 2)?;
    m.fill(&mut ctx.rng);
    used_once(&b, m.slice(1), "the second address")?;
    h2c(&b, m.slice(1), 0, "host H2C through the second address")?;
    let b0 = query(&b)?;
    holds("cached through the second address", &b0, 1, 2 * PAGE as u64)?;
    let h = super::super::cuda::pin_range(&a, m.addr(0), 2 * PAGE)?;
    let b1 = query(&b)?;
    delta("PIN_CUDA through the first address", &b0, &b1, (0, 0, 1, 0))?;
    holds("after PIN_CUDA of the alias", &b1, 0, 0)?;
    m.fill(&mut ctx.rng);
    h2c(&b, m.slice(1), 0, "host H2C on the surface's pages")?;
    fpga_holds(&verify, 0, m.slice(0), "host H2C on the surface's pages")?;
    delta(
        "host DMA on the surface's pages",
        &b1,
        &query(&b)?,
        (0, 0, 0, 1),
    )?;
    super::super::cuda::unpin(&a, h)
}

/// How many files and addresses use one page: past DMA-API debug's 7 overlapping mappings per cache line.
const USERS: usize = 12;

/// One page used by many files: it is cached by one of them; the others pin it per request, with the
/// right bytes.
pub(super) fn many_files_one_page(ctx: &mut Ctx) -> TestResult {
    let files = (0..USERS)
        .map(|_| open_cached(ctx))
        .collect::<Result<Vec<_>, _>>()?;
    let verify = open_uncached(ctx)?;
    let mut m = Aliases::new(PAGE, 1)?;
    for round in 0..2 {
        for (i, f) in files.iter().enumerate() {
            m.fill(&mut ctx.rng);
            let what = format!("round {round}, file {i}: H2C of the shared page");
            h2c(f, m.slice(0), 0, &what)?;
            fpga_holds(&verify, 0, m.slice(0), &what)?;
        }
    }
    one_cached("files", &files)
}

/// One page under many addresses of one file: cached under one of them.
pub(super) fn many_addresses_one_page(ctx: &mut Ctx) -> TestResult {
    let dev = open_cached(ctx)?;
    let verify = open_uncached(ctx)?;
    let mut m = Aliases::new(PAGE, USERS)?;
    for round in 0..2 {
        for i in 0..USERS {
            m.fill(&mut ctx.rng);
            let what = format!("round {round}: H2C of the page through address {i}");
            h2c(&dev, m.slice(i), 0, &what)?;
            fpga_holds(&verify, 0, m.slice(0), &what)?;
        }
    }
    one_cached("addresses", std::slice::from_ref(&dev))
}

/// Exactly one buffer cached over `files`.
fn one_cached(what: &str, files: &[Device]) -> TestResult {
    let states = files.iter().map(query).collect::<Result<Vec<_>, _>>()?;
    let entries: u32 = states.iter().map(|s| s.entries).sum();
    ensure!(
        entries == 1,
        "one page used through {USERS} {what}: {entries} cached buffers hold it, expected 1 (one long-lived \
         mapping per page and card); entries per file {:?}",
        states.iter().map(|s| s.entries).collect::<Vec<_>>()
    );
    Ok(())
}
