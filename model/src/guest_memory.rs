//! Guest memory as the DMA engines see it: bus addresses that either reach guest RAM or do not.
//!
//! The device logic only knows this trait. The real implementation maps the fds QEMU passes in `DMA_MAP`
//! ([`crate::mapped_memory`]); tests use [`FakeGuestMemory`].

use std::sync::Mutex;

/// A DMA access touched a bus address that no mapping covers (the first such address).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unmapped(pub u64);

/// Bus-address access to guest memory. Implementations are shared with the engine worker threads.
pub trait GuestMemory: Send + Sync {
    /// Copies guest memory at `addr` into `buf`; fails if any byte is not mapped.
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Unmapped>;
    /// Copies `data` to guest memory at `addr`. On failure the bytes before the unmapped address may have
    /// been written (like a stream of posted writes of which some land).
    fn write(&self, addr: u64, data: &[u8]) -> Result<(), Unmapped>;
    /// Number of mappings currently held (reported by the control channel).
    fn map_count(&self) -> u64;
}

/// Walks `[addr, addr + len)` in pieces that each lie in one mapping. `locate(a)` returns how many bytes from
/// `a` the mapping holding `a` still covers, or `None`; `copy(a, done, n)` moves `n` bytes at `a`, which is
/// `done` bytes into the access.
pub(crate) fn for_each_piece(
    addr: u64,
    len: usize,
    locate: impl Fn(u64) -> Option<u64>,
    mut copy: impl FnMut(u64, usize, usize),
) -> Result<(), Unmapped> {
    let mut done = 0usize;
    while done < len {
        let a = addr.checked_add(done as u64).ok_or(Unmapped(u64::MAX))?;
        let avail = locate(a).filter(|&n| n > 0).ok_or(Unmapped(a))?;
        let n = usize::try_from(avail).unwrap_or(usize::MAX).min(len - done);
        copy(a, done, n);
        done += n;
    }
    Ok(())
}

/// In-memory guest RAM for tests: a set of regions at bus addresses.
#[derive(Default)]
pub struct FakeGuestMemory {
    regions: Mutex<Vec<(u64, Vec<u8>)>>,
}

impl FakeGuestMemory {
    /// Empty memory: every access fails.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a zeroed region of `size` bytes at bus address `base`.
    pub fn add_region(&self, base: u64, size: usize) {
        self.lock().push((base, vec![0; size]));
    }

    /// Removes the region that starts at `base`.
    pub fn remove_region(&self, base: u64) {
        self.lock().retain(|(b, _)| *b != base);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(u64, Vec<u8>)>> {
        self.regions.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn locate(regions: &[(u64, Vec<u8>)], a: u64) -> Option<(usize, usize, u64)> {
        regions.iter().enumerate().find_map(|(i, (base, bytes))| {
            let off = a.checked_sub(*base)?;
            (off < bytes.len() as u64).then(|| (i, off as usize, bytes.len() as u64 - off))
        })
    }
}

impl GuestMemory for FakeGuestMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Unmapped> {
        let regions = self.lock();
        for_each_piece(
            addr,
            buf.len(),
            |a| Self::locate(&regions, a).map(|(_, _, n)| n),
            |a, done, n| {
                let (i, off, _) = Self::locate(&regions, a).expect("located above");
                buf[done..done + n].copy_from_slice(&regions[i].1[off..off + n]);
            },
        )
    }

    fn write(&self, addr: u64, data: &[u8]) -> Result<(), Unmapped> {
        let mut regions = self.lock();
        let snapshot: Vec<(u64, u64)> = regions.iter().map(|(b, v)| (*b, v.len() as u64)).collect();
        let locate = |a: u64| {
            snapshot.iter().enumerate().find_map(|(i, &(base, len))| {
                let off = a.checked_sub(base)?;
                (off < len).then(|| (i, off as usize, len - off))
            })
        };
        for_each_piece(
            addr,
            data.len(),
            |a| locate(a).map(|(_, _, n)| n),
            |a, done, n| {
                let (i, off, _) = locate(a).expect("located above");
                regions[i].1[off..off + n].copy_from_slice(&data[done..done + n]);
            },
        )
    }

    fn map_count(&self) -> u64 {
        self.lock().len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accesses_span_adjacent_regions_and_stop_at_holes() {
        let m = FakeGuestMemory::new();
        m.add_region(0x1000, 0x10);
        m.add_region(0x1010, 0x10);
        m.write(0x100c, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        let mut b = [0; 8];
        m.read(0x100c, &mut b).unwrap();
        assert_eq!(b, [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(m.read(0x101c, &mut b), Err(Unmapped(0x1020)));
        assert_eq!(m.write(u64::MAX, &[0, 0]), Err(Unmapped(u64::MAX)));
        assert_eq!(m.map_count(), 2);
    }
}
