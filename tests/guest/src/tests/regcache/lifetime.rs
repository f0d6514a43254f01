//! What ends a cached buffer: close, per-file caches, fork.

use super::*;

/// Closing a file with buffers cached (one of them stale, its work item maybe pending) unpins and unmaps
/// them all; unmapping the memory afterwards releases nothing twice.
pub(super) fn close_releases(ctx: &mut Ctx) -> TestResult {
    const LEN: usize = 16 << 10;
    let p0 = kstat::pinned_pages()?;
    let dma0 = kstat::read().ok().map(|k| k.dma_entries);
    let mut bufs = (0..5)
        .map(|_| host(LEN, &mut ctx.rng))
        .collect::<Result<Vec<_>, _>>()?;
    let per = pages(bufs[0].addr(), LEN);
    {
        let dev = open_cached(ctx)?;
        for (i, b) in bufs.iter_mut().enumerate() {
            used_once(&dev, b.as_slice(), &format!("buffer {i}"))?;
            if i % 2 == 0 {
                h2c(&dev, b.as_slice(), 0, &format!("buffer {i}"))?;
            } else {
                c2h(&dev, b.as_mut_slice(), 0, &format!("buffer {i}"))?;
            }
        }
        holds("five cached", &query(&dev)?, 5, 5 * LEN as u64)?;
        pins_are(p0 + 5 * per, Duration::ZERO, "five buffers cached")?;
        if let Some(d0) = dma0 {
            let d = kstat::read()?.dma_entries;
            ensure!(
                d >= d0 + 5,
                "{d} DMA-debug entries in use with five buffers cached, {d0} before: cached buffers are \
                 not DMA-mapped?"
            );
        }
        ctx_err(
            "madvise(MADV_DONTNEED)",
            bufs[4].madvise(libc::MADV_DONTNEED),
        )?;
    }
    pins_are(
        p0,
        INVALIDATE,
        "after closing a file with five buffers cached",
    )?;
    if let Some(d0) = dma0 {
        let until = Instant::now() + INVALIDATE;
        let mut d = kstat::read()?.dma_entries;
        while d != d0 && Instant::now() < until {
            thread::sleep(Duration::from_millis(20));
            d = kstat::read()?.dma_entries;
        }
        ensure!(
            d == d0,
            "{d} DMA-debug entries in use after close, {d0} before open"
        );
    }
    drop(bufs);
    pins_are(p0, INVALIDATE, "after unmapping the once cached memory")
}

/// Each file has its own cache, but a page is cached once per card: the same buffer used by a second file
/// is pinned per request while the first caches it; once the first file is closed, the second caches it.
pub(super) fn per_file(ctx: &mut Ctx) -> TestResult {
    const LEN: usize = 16 << 10;
    let p0 = kstat::pinned_pages()?;
    let a = open_cached(ctx)?;
    let b = open_cached(ctx)?;
    let verify = open_uncached(ctx)?;
    let mut buf = host(LEN, &mut ctx.rng)?;
    let per = pages(buf.addr(), LEN);
    used_once(&a, buf.as_slice(), "file a")?;
    used_once(&b, buf.as_slice(), "file b")?;
    let (a0, b0) = (query(&a)?, query(&b)?);
    h2c(&a, buf.as_slice(), 0, "file a")?;
    h2c(&b, buf.as_slice(), 0, "file b")?;
    h2c(&a, buf.as_slice(), 0, "file a again")?;
    delta("file a", &a0, &query(&a)?, (1, 1, 0, 0))?;
    // One long-lived mapping per page and card: file a holds these pages, so b pins them per request.
    delta("file b", &b0, &query(&b)?, (0, 0, 0, 1))?;
    pins_are(
        p0 + per,
        Duration::ZERO,
        "one buffer used by two files, cached by one",
    )?;
    drop(a);
    pins_are(p0, INVALIDATE, "after closing file a")?;
    ctx.rng.fill(buf.as_mut_slice());
    h2c(&b, buf.as_slice(), 0, "file b after a closed")?;
    fpga_holds(&verify, 0, buf.as_slice(), "file b after a closed")?;
    delta("file b after a closed", &b0, &query(&b)?, (0, 1, 0, 1))?;
    pins_are(p0 + per, Duration::ZERO, "file b caches it now")?;
    drop(b);
    pins_are(p0, INVALIDATE, "after closing both files")
}

/// A forked child using the inherited file at the parent's address is in another address space: a miss,
/// its own copy. Whether or not fork's copy-on-write drops the parent's buffer, the parent's new bytes
/// reach the device and C2H lands in the memory the parent sees; the child's buffers go with its exit and
/// close leaves nothing pinned.
pub(super) fn fork_child(ctx: &mut Ctx) -> TestResult {
    const LEN: usize = 16 << 10;
    const CHILD_OFF: usize = 32 << 10;
    let p0 = kstat::pinned_pages()?;
    let dev = open_cached(ctx)?;
    let verify = open_uncached(ctx)?;
    let mut b = host(LEN, &mut ctx.rng)?;
    let a = b.as_slice().to_vec();
    let child_pattern = random(LEN, &mut ctx.rng);
    used_once(&dev, b.as_slice(), "parent")?;
    h2c(&dev, b.as_slice(), 0, "parent")?;
    h2c(&dev, b.as_slice(), 0, "parent again")?;
    let s0 = query(&dev)?;
    ensure!(
        (s0.hits, s0.misses) == (1, 1),
        "parent before fork: {}",
        describe(&s0)
    );
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid out array of two ints.
    let rc = unsafe { libc::pipe(fds.as_mut_ptr()) };
    ensure!(rc == 0, "pipe: {}", io::Error::last_os_error());
    // SAFETY: the suite is single-threaded here (no test leaves threads behind), so the child may run
    // ordinary Rust; it never returns into the suite: it ends in _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork: {}", io::Error::last_os_error()));
    }
    if pid == 0 {
        let r = panic::catch_unwind(AssertUnwindSafe(|| {
            child_uses_inherited_file(&dev, &mut b, &a, &child_pattern, CHILD_OFF)
        }));
        let msg = match r {
            Ok(Ok(())) => String::new(),
            Ok(Err(e)) => e,
            Err(_) => "child panicked".into(),
        };
        // SAFETY: writes our own bytes to our pipe, then ends the child without the parent's destructors.
        unsafe {
            libc::write(fds[1], msg.as_ptr().cast(), msg.len());
            libc::_exit(i32::from(!msg.is_empty()));
        }
    }
    // SAFETY: the write end belongs to the child now; the read end becomes a File we own.
    let mut pipe = unsafe {
        libc::close(fds[1]);
        std::fs::File::from_raw_fd(fds[0])
    };
    let status = reap(pid, Duration::from_secs(60))?;
    let mut msg = String::new();
    let _ = pipe.read_to_string(&mut msg);
    ensure!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child (status {status:#x}): {msg}"
    );
    compare(
        "the parent's buffer after the child wrote its copy",
        &a,
        b.as_slice(),
    )?;
    let d = random(LEN, &mut ctx.rng);
    b.as_mut_slice().copy_from_slice(&d);
    h2c(&dev, b.as_slice(), 0, "parent after fork")?;
    fpga_holds(&verify, 0, &d, "parent's H2C after fork")?;
    c2h(&dev, b.as_mut_slice(), CHILD_OFF, "parent after fork")?;
    compare(
        "parent's C2H of the child's data after fork",
        &child_pattern,
        b.as_slice(),
    )?;
    // The child cached two buffers (its copy of `b` and its own); its exit drops them.
    settle(&dev, "the child's buffers dropped after its exit", |s| {
        s.entries == 1 && s.invalidations >= s0.invalidations + 2
    })?;
    pins_are(
        p0 + pages(b.addr(), LEN),
        INVALIDATE,
        "the parent's buffer cached, the child's gone",
    )?;
    drop(dev);
    pins_are(p0, INVALIDATE, "after close")
}

/// The child's side of `fork_child`.
fn child_uses_inherited_file(
    dev: &Device,
    b: &mut Mapping,
    a: &[u8],
    pattern: &[u8],
    off: usize,
) -> TestResult {
    used_once(dev, b.as_slice(), "child, the parent's address")?;
    let s0 = query(dev)?;
    h2c(dev, b.as_slice(), off, "child, the parent's address")?;
    let s1 = query(dev)?;
    delta(
        "child's second H2C at the parent's cached address (another address space)",
        &s0,
        &s1,
        (0, 1, ANY, 0),
    )?;
    let mut d = ctx_err("mmap", Mapping::new(b.len(), RW))?;
    c2h(dev, d.as_mut_slice(), off, "child")?;
    compare("child: its copy of the parent's data", a, d.as_slice())?;
    b.as_mut_slice().copy_from_slice(pattern);
    h2c(dev, b.as_slice(), off, "child, new bytes")?;
    c2h(dev, d.as_mut_slice(), off, "child")?;
    compare("child: its new bytes", pattern, d.as_slice())
}

/// waitpid with a limit; kills the child past it.
fn reap(pid: libc::pid_t, limit: Duration) -> Result<libc::c_int, String> {
    let until = Instant::now() + limit;
    loop {
        let mut status = 0;
        // SAFETY: waits for our own child; `status` is a valid out pointer.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            return Ok(status);
        }
        if r < 0 {
            return Err(format!("waitpid: {}", io::Error::last_os_error()));
        }
        if Instant::now() > until {
            // SAFETY: our own child, not reaped yet.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            return Err(format!("child still running after {} s", limit.as_secs()));
        }
        thread::sleep(Duration::from_millis(10));
    }
}
