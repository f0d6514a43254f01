//! Kernel-wide counters that must come back to where they were once every test has released its memory:
//! DMA-API debug (CONFIG_DMA_API_DEBUG, debugfs `dma-api/`) and the pinned-page counters of /proc/vmstat.

use std::fs;

/// DMA-API debug's debugfs folder (the bench's /init mounts debugfs).
pub const DMA_API_DIR: &str = "/sys/kernel/debug/dma-api";

/// DMA-API debug's entries on Linux 4.x: the architecture's PREALLOC_DMA_DEBUG_ENTRIES
/// (arch/x86/kernel/pci-dma.c, arch/arm64/mm/dma-mapping.c; the bench passes no dma_debug_entries=).
const PREALLOC_4X: u64 = if cfg!(target_arch = "aarch64") {
    4096
} else {
    1 << 16
};

/// A snapshot of the counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelCounters {
    /// `dma-api/error_count`: DMA-API misuse detected since boot (kernel/dma/debug.c `error_count`).
    pub dma_errors: u64,
    /// DMA-debug entries in use: `nr_total_entries - num_free_entries` (the pool grows on demand, so the
    /// free count alone is not comparable). One entry per live mapping (streaming or coherent).
    pub dma_entries: u64,
    /// Pages pinned right now with FOLL_PIN: `nr_foll_pin_acquired - nr_foll_pin_released`.
    pub pinned_pages: i64,
}

impl KernelCounters {
    /// One line for the console (no splat marker words in it: the harness scans every line).
    pub fn describe(&self) -> String {
        format!(
            "dma-api error_count {}, dma-debug entries in use {}, FOLL_PIN pages held {}",
            self.dma_errors, self.dma_entries, self.pinned_pages
        )
    }
}

/// A number read from a sysfs or debugfs file (one value, trailing newline allowed).
pub fn read_u64(path: &str) -> Result<u64, String> {
    let text = fs::read_to_string(path).map_err(|e| format!("read {path}: {e}"))?;
    text.trim()
        .parse()
        .map_err(|e| format!("{path}: {:?}: {e}", text.trim()))
}

/// Value of `key` in /proc/vmstat's text.
fn vmstat_field(text: &str, key: &str) -> Result<u64, String> {
    text.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            (k == key).then(|| v.trim().parse().ok())?
        })
        .ok_or_else(|| format!("/proc/vmstat has no {key}"))
}

/// /proc/vmstat's text, with the per-CPU deltas folded first (/proc/sys/vm/stat_refresh), else the pin
/// counters could lag by up to the per-CPU threshold. Needs no debugfs.
fn vmstat() -> Result<String, String> {
    fs::write("/proc/sys/vm/stat_refresh", "1\n")
        .map_err(|e| format!("write /proc/sys/vm/stat_refresh: {e}"))?;
    fs::read_to_string("/proc/vmstat").map_err(|e| format!("read /proc/vmstat: {e}"))
}

/// The modules that count their own pins on Linux 4.x (kmod/compat/gdr_compat.h).
const COMPAT_PIN_COUNTERS: [&str; 2] = [
    "/sys/module/picoevb/parameters/compat_pinned_pages",
    "/sys/module/gdr_nv_p2p/parameters/compat_pinned_pages",
];

/// Pages held by FOLL_PIN right now (`nr_foll_pin_acquired - nr_foll_pin_released`). Linux 4.x has no
/// FOLL_PIN (5.6): a pin there is a plain page reference that the kernel does not count, so the pages
/// gdr's modules hold pinned are read from their own counters (`compat_pinned_pages`, 0 for a module not
/// loaded). On any later kernel a missing counter is an error, never a 0.
pub fn pinned_pages() -> Result<i64, String> {
    if crate::tests::kernel_version()?.0 < 5 {
        let mut held = 0;
        for path in COMPAT_PIN_COUNTERS {
            match fs::read_to_string(path) {
                Ok(text) => {
                    held += text
                        .trim()
                        .parse::<i64>()
                        .map_err(|e| format!("{path}: {:?}: {e}", text.trim()))?
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(format!("read {path}: {e}")),
            }
        }
        return Ok(held);
    }
    let vm = vmstat()?;
    let acquired = vmstat_field(&vm, "nr_foll_pin_acquired")?;
    let released = vmstat_field(&vm, "nr_foll_pin_released")?;
    Ok(acquired as i64 - released as i64)
}

/// Pages ever pinned with FOLL_PIN since boot (`nr_foll_pin_acquired`): what a registration-cache hit must
/// not add to.
pub fn pins_acquired() -> Result<u64, String> {
    vmstat_field(&vmstat()?, "nr_foll_pin_acquired")
}

/// Reads the counters now. Per-CPU vmstat deltas are folded first (/proc/sys/vm/stat_refresh), else the
/// pin counters could lag by up to the per-CPU threshold.
pub fn read() -> Result<KernelCounters, String> {
    let dma_errors = read_u64(&format!("{DMA_API_DIR}/error_count"))?;
    // 4.x has no nr_total_entries: its pool is allocated once at boot and never grows, so the free count
    // alone is comparable; in use is counted from the architecture's pool there.
    let total = if crate::tests::kernel_version()?.0 < 5 {
        PREALLOC_4X
    } else {
        read_u64(&format!("{DMA_API_DIR}/nr_total_entries"))?
    };
    let free = read_u64(&format!("{DMA_API_DIR}/num_free_entries"))?;
    Ok(KernelCounters {
        dma_errors,
        dma_entries: total.saturating_sub(free),
        pinned_pages: pinned_pages()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_vmstat() {
        let text = "nr_free_pages 1000\nnr_foll_pin_acquired 77\nnr_foll_pin_released 70\n";
        assert_eq!(vmstat_field(text, "nr_foll_pin_acquired"), Ok(77));
        assert_eq!(vmstat_field(text, "nr_foll_pin_released"), Ok(70));
        assert!(vmstat_field(text, "nr_foll_pin").is_err());
    }
}

/// The guest's CPU time from `/proc/stat`'s `cpu` line, in clock ticks (USER_HZ): user (with nice),
/// system (with irq and softirq), idle (with iowait).
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuTicks {
    pub user: u64,
    pub system: u64,
    pub idle: u64,
}

impl CpuTicks {
    pub fn now() -> Self {
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let f: Vec<u64> = stat
            .lines()
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .skip(1)
            .map(|v| v.parse().unwrap_or(0))
            .collect();
        let at = |i: usize| f.get(i).copied().unwrap_or(0);
        Self {
            user: at(0) + at(1),
            system: at(2) + at(5) + at(6),
            idle: at(3) + at(4),
        }
    }

    /// `user/system/idle` shares of the time since `earlier`, in percent.
    pub fn shares_since(&self, earlier: &Self) -> String {
        let (u, s, i) = (
            self.user - earlier.user,
            self.system - earlier.system,
            self.idle - earlier.idle,
        );
        let all = (u + s + i).max(1) as f64;
        format!(
            "user {:.0}%, system {:.0}%, idle {:.0}%",
            100.0 * u as f64 / all,
            100.0 * s as f64 / all,
            100.0 * i as f64 / all
        )
    }
}
