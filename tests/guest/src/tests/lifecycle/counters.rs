//! The kernel's own counters back where they started, last of the whole suite.

use super::*;

/// Last test of the suite: DMA-API debug found no error during the whole run, and once every test has
/// released its memory the DMA-debug entries in use and the FOLL_PIN pages held are what they were before
/// the first test. Unpinning may finish in a work item: the counters get a few seconds to settle.
pub(super) fn counters_back_to_baseline(ctx: &mut Ctx) -> TestResult {
    let base = ctx
        .baseline
        .as_ref()
        .map_err(|e| format!("no baseline from before the first test: {e}"))?;
    // The shared file's cached buffers are the one thing that may stay pinned while a file is open.
    quiesce(ctx.dev)?;
    let until = Instant::now() + SETTLE;
    let now = loop {
        let now = kstat::read()?;
        let settled = now.dma_entries == base.dma_entries && now.pinned_pages == base.pinned_pages;
        if settled || Instant::now() > until {
            break now;
        }
        thread::sleep(Duration::from_millis(50));
    };
    println!("GUEST COUNTERS before the first test: {}", base.describe());
    println!("GUEST COUNTERS now: {}", now.describe());
    ensure!(
        now.dma_errors == 0,
        "dma-api error_count is {} (before the first test: {}): the kernel log has the details",
        now.dma_errors,
        base.dma_errors
    );
    ensure!(
        now.dma_entries == base.dma_entries,
        "{} DMA-debug entries in use, {} before the first test: DMA mappings leaked (or freed twice)",
        now.dma_entries,
        base.dma_entries
    );
    ensure!(
        now.pinned_pages == base.pinned_pages,
        "{} pages held by FOLL_PIN, {} before the first test: pins leaked (or released twice)",
        now.pinned_pages,
        base.pinned_pages
    );
    Ok(())
}
