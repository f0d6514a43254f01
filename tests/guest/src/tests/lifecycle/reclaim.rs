//! Free callbacks run as direct reclaim runs them: the bench provider's `reclaim_callbacks` holds lockdep's
//! fs_reclaim map around each, so lockdep learns what the driver's callback takes, and reports a lock of
//! those held across an allocation that may reclaim: the recursion real reclaim would make on the same
//! thread (reclaim unmaps a surface page, its callback waits for that lock), which a bench guest with
//! plenty of memory never really reclaims.

use std::fs;

use super::*;
use crate::buf::GuardedBuf;

const RECLAIM: &str = "/sys/module/gdr_nv_p2p/parameters/reclaim_callbacks";
const LOCKDEP: &str = "/proc/lockdep_stats";
/// Surfaces pinned at once per round: enough that the card's list of surfaces grows several times.
const SURFACES: usize = 6;

/// The provider's reclaim context for callbacks, off again when this value goes.
struct ReclaimCallbacks;

impl ReclaimCallbacks {
    fn on() -> Result<Self, String> {
        fs::write(RECLAIM, "Y").map_err(|e| format!("{RECLAIM}: {e}"))?;
        Ok(ReclaimCallbacks)
    }
}

impl Drop for ReclaimCallbacks {
    fn drop(&mut self) {
        let _ = fs::write(RECLAIM, "N");
    }
}

/// Whether lockdep still runs: it turns itself off (`debug_locks: 0`) after its first report.
fn lockdep_on() -> Result<bool, String> {
    let text = fs::read_to_string(LOCKDEP).map_err(|e| format!("{LOCKDEP}: {e}"))?;
    text.lines()
        .find_map(|l| l.trim().strip_prefix("debug_locks:"))
        .map(|v| v.trim() == "1")
        .ok_or_else(|| format!("{LOCKDEP}: no debug_locks line"))
}

/// Rounds of pinning `SURFACES` surfaces and letting them go, by UNPIN and by munmap, with every free
/// callback in the reclaim context. Fails (lockdep reports, then is off) on a driver that allocates under
/// a lock its callback takes: the card's list of surfaces grown under its lock (issue 24, defect 3).
pub(super) fn callbacks_in_reclaim(ctx: &mut Ctx) -> TestResult {
    let f = flavour(ctx.dev)?;
    ensure!(
        lockdep_on()?,
        "lockdep is already off (an earlier report on the console): this test cannot see anything"
    );
    let _reclaim = ReclaimCallbacks::on()?;
    let dev = open(ctx)?;
    for round in 0..3 {
        let surfaces = (0..SURFACES)
            .map(|_| surface(f, 65536))
            .collect::<Result<Vec<_>, _>>()?;
        let handles = surfaces
            .iter()
            .map(|s| pin(&dev, s))
            .collect::<Result<Vec<_>, _>>()?;
        // Half by UNPIN (the callback inside the ioctl), half by the memory going away (munmap).
        for (i, (s, h)) in surfaces.into_iter().zip(handles).enumerate() {
            if i % 2 == 0 {
                unpin(&dev, h)?;
            }
            drop(s);
        }
        ensure!(
            lockdep_on()?,
            "round {round}: lockdep reported (see the console) and turned itself off: a lock the free \
             callback takes was held across an allocation that may reclaim"
        );
    }
    drop(dev);
    sanity(ctx)
}

/// DMAs through surfaces (one-way, surface to surface, to and from the host), then their free callbacks in
/// the reclaim context (UNPIN, munmap). The driver tells lockdep that a callback waits for every DMA's use
/// of its surface, so lockdep reports an allocation a DMA makes while it holds a use: reclaim could run the
/// callback on that very thread, which would wait for the use forever (issue 24, defect 8: the surface's
/// segment list built under the use, and a host pin's next to it).
pub(super) fn dma_uses_in_reclaim(ctx: &mut Ctx) -> TestResult {
    let f = flavour(ctx.dev)?;
    ensure!(
        lockdep_on()?,
        "lockdep is already off (an earlier report on the console): this test cannot see anything"
    );
    let _reclaim = ReclaimCallbacks::on()?;
    let dev = open(ctx)?;
    let mut rng = Rng::for_test(24, "lifecycle::dma_uses_in_reclaim_context");
    let (mut a, mut b) = (surface(f, 65536)?, surface(f, 65536)?);
    let (ha, hb) = (pin(&dev, &a)?, pin(&dev, &b)?);
    let mut host = GuardedBuf::new(8192, 0);
    surface_to_host(&dev, &mut rng, &mut a, ha, 4096, 0)?;
    host_to_surface(&dev, &mut rng, &mut b, hb, 4096, 0)?;
    h2c2h_sides(
        &dev,
        &mut rng,
        Side::Gpu(&mut a, ha),
        Side::Gpu(&mut b, hb),
        8192,
    )?;
    h2c2h_sides(
        &dev,
        &mut rng,
        Side::Gpu(&mut a, ha),
        Side::Host(&mut host),
        8192,
    )?;
    h2c2h_sides(
        &dev,
        &mut rng,
        Side::Host(&mut host),
        Side::Gpu(&mut b, hb),
        8192,
    )?;
    // One callback inside the ioctl, one from the invalidation of munmap.
    unpin(&dev, ha)?;
    drop(b);
    ensure!(
        lockdep_on()?,
        "lockdep reported (see the console) and turned itself off: a DMA allocated while it held a use of \
         a surface, which the surface's free callback (here in the reclaim context) waits for"
    );
    drop(a);
    drop(dev);
    sanity(ctx)
}
