//! Guest RAM reached through the fds QEMU sends with vfio-user `DMA_MAP` (`memory-backend-memfd,share=on`).
//!
//! Each map is `mmap(fd, offset, size, MAP_SHARED)`ed; the DMA engines then copy straight to and from guest
//! RAM. Maps without an fd (RAM QEMU cannot share, ROM ranges) are recorded but unreachable: DMA there
//! fails like an access to an unmapped bus address.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use log::{debug, warn};

use crate::guest_memory::{GuestMemory, Unmapped, for_each_piece};

/// One mapped bus-address range.
#[derive(Clone, Copy, Debug)]
struct Mapping {
    iova: u64,
    size: u64,
    /// Host address of `iova`, or `None` when QEMU sent no fd.
    host: Option<usize>,
    /// The part of an `mmap` this mapping owns and must `munmap` (page-aligned); `(0, 0)` when none.
    owned: (usize, usize),
    readable: bool,
    writable: bool,
}

impl Mapping {
    fn end(&self) -> u64 {
        self.iova + self.size
    }

    fn host_of(&self, iova: u64) -> Option<usize> {
        self.host.map(|h| h + (iova - self.iova) as usize)
    }

    /// Unmaps `[base, base + len)` of this mapping's own `mmap`.
    fn release(base: usize, len: usize) {
        if len == 0 {
            return;
        }
        // SAFETY: [base, base + len) is page-aligned and lies inside an mmap this model made and no other
        // mapping owns; callers hold the write lock, so no DMA copy is using it.
        let rc = unsafe { libc::munmap(base as *mut libc::c_void, len) };
        if rc != 0 {
            warn!(
                "munmap({base:#x}, {len:#x}) failed: {}",
                io::Error::last_os_error()
            );
        }
    }
}

/// The set of DMA maps QEMU has established.
#[derive(Default)]
pub struct MappedGuestMemory {
    maps: RwLock<Vec<Mapping>>,
}

fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(n).ok().filter(|&n| n > 0).unwrap_or(4096)
}

impl MappedGuestMemory {
    /// No maps yet.
    pub fn new() -> Self {
        Self::default()
    }

    fn read_maps(&self) -> RwLockReadGuard<'_, Vec<Mapping>> {
        self.maps.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write_maps(&self) -> RwLockWriteGuard<'_, Vec<Mapping>> {
        self.maps.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds the map of `[iova, iova + size)`; with an fd, maps `size` bytes of it at `offset`.
    pub fn map(
        &self,
        iova: u64,
        size: u64,
        offset: u64,
        readable: bool,
        writable: bool,
        fd: Option<File>,
    ) -> io::Result<()> {
        let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidInput, what.to_string());
        if size == 0 || iova.checked_add(size).is_none() {
            return Err(invalid(
                "DMA map of zero size or past the end of the address space",
            ));
        }
        if self
            .read_maps()
            .iter()
            .any(|m| iova < m.end() && m.iova < iova + size)
        {
            // QEMU unmaps before remapping; if it ever does not, the newer map wins (refusing it could make
            // QEMU give up on the device).
            warn!("DMA map {iova:#x}+{size:#x} overlaps existing maps; replacing them");
            self.unmap(iova, size);
        }
        let (host, owned) = match &fd {
            Some(file) => {
                let page = page_size() as u64;
                let skew = offset % page;
                let len = usize::try_from(size + skew).map_err(|_| invalid("DMA map too large"))?;
                let file_offset = libc::off_t::try_from(offset - skew)
                    .map_err(|_| invalid("DMA map offset too large"))?;
                let mut prot = 0;
                if readable {
                    prot |= libc::PROT_READ;
                }
                if writable {
                    prot |= libc::PROT_WRITE;
                }
                // SAFETY: a fresh shared mapping of a file QEMU handed us; we never alias it with Rust references,
                // only copy through raw pointers while the mapping is registered.
                let p = unsafe {
                    libc::mmap(
                        std::ptr::null_mut(),
                        len,
                        prot,
                        libc::MAP_SHARED,
                        file.as_raw_fd(),
                        file_offset,
                    )
                };
                if p == libc::MAP_FAILED {
                    return Err(io::Error::last_os_error());
                }
                let base = p as usize;
                (Some(base + skew as usize), (base, len))
            }
            None => (None, (0, 0)),
        };
        debug!(
            "dma map iova={iova:#x} size={size:#x} fd={} r={readable} w={writable}",
            fd.is_some()
        );
        self.write_maps().push(Mapping {
            iova,
            size,
            host,
            owned,
            readable,
            writable,
        });
        Ok(())
    }

    /// Removes `[iova, iova + size)`. The range may cover several maps; a map it covers only partly is split
    /// and keeps the rest (or is dropped whole when the cut is not page-aligned). Returns the maps touched.
    pub fn unmap(&self, iova: u64, size: u64) -> usize {
        let end = iova.saturating_add(size);
        let page = page_size();
        let mut maps = self.write_maps();
        let mut kept = Vec::with_capacity(maps.len());
        let mut touched = 0;
        for m in maps.drain(..) {
            let (cut_lo, cut_hi) = (m.iova.max(iova), m.end().min(end));
            if cut_lo >= cut_hi {
                kept.push(m);
                continue;
            }
            touched += 1;
            if cut_lo == m.iova && cut_hi == m.end() {
                Mapping::release(m.owned.0, m.owned.1);
                continue;
            }
            let (Some(h_lo), Some(h_hi)) = (m.host_of(cut_lo), m.host_of(cut_hi)) else {
                // No fd: nothing to munmap, just keep the uncut parts.
                kept.extend(split_fdless(&m, cut_lo, cut_hi));
                continue;
            };
            let aligned = |h: usize| h.is_multiple_of(page);
            let lo_ok = cut_lo == m.iova || aligned(h_lo);
            let hi_ok = cut_hi == m.end() || aligned(h_hi);
            if !(lo_ok && hi_ok) {
                warn!(
                    "dma unmap {iova:#x}+{size:#x} cuts map {:#x}+{:#x} off a page boundary; dropping it whole",
                    m.iova, m.size
                );
                Mapping::release(m.owned.0, m.owned.1);
                continue;
            }
            let owned_end = m.owned.0 + m.owned.1;
            let cut_from = if cut_lo == m.iova { m.owned.0 } else { h_lo };
            let cut_to = if cut_hi == m.end() { owned_end } else { h_hi };
            Mapping::release(cut_from, cut_to - cut_from);
            if cut_lo > m.iova {
                kept.push(Mapping {
                    size: cut_lo - m.iova,
                    owned: (m.owned.0, cut_from - m.owned.0),
                    ..m
                });
            }
            if cut_hi < m.end() {
                kept.push(Mapping {
                    iova: cut_hi,
                    size: m.end() - cut_hi,
                    host: Some(h_hi),
                    owned: (cut_to, owned_end - cut_to),
                    ..m
                });
            }
        }
        *maps = kept;
        debug!("dma unmap iova={iova:#x} size={size:#x}: {touched} map(s)");
        touched
    }

    /// Removes every map.
    pub fn unmap_all(&self) -> usize {
        let mut maps = self.write_maps();
        for m in maps.iter() {
            Mapping::release(m.owned.0, m.owned.1);
        }
        let n = maps.len();
        maps.clear();
        n
    }

    fn locate(maps: &[Mapping], a: u64, write: bool) -> Option<(usize, u64)> {
        let m = maps.iter().find(|m| a >= m.iova && a < m.end())?;
        let allowed = if write { m.writable } else { m.readable };
        Some((m.host_of(a).filter(|_| allowed)?, m.end() - a))
    }
}

/// The parts of an fd-less map left after cutting `[lo, hi)` out of it.
fn split_fdless(m: &Mapping, lo: u64, hi: u64) -> Vec<Mapping> {
    let mut parts = Vec::new();
    if lo > m.iova {
        parts.push(Mapping {
            size: lo - m.iova,
            ..*m
        });
    }
    if hi < m.end() {
        parts.push(Mapping {
            iova: hi,
            size: m.end() - hi,
            ..*m
        });
    }
    parts
}

impl GuestMemory for MappedGuestMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Unmapped> {
        let maps = self.read_maps();
        let dst = buf.as_mut_ptr();
        for_each_piece(
            addr,
            buf.len(),
            |a| Self::locate(&maps, a, false).map(|(_, n)| n),
            |a, done, n| {
                let (host, _) = Self::locate(&maps, a, false).expect("located above");
                // SAFETY: [host, host + n) lies inside a live mapping (the read lock keeps it mapped) and
                // [done, done + n) inside `buf`. The guest may change the bytes concurrently, as with any
                // device DMA; the copy is of plain bytes, so a torn read is harmless.
                unsafe { std::ptr::copy_nonoverlapping(host as *const u8, dst.add(done), n) };
            },
        )
    }

    fn write(&self, addr: u64, data: &[u8]) -> Result<(), Unmapped> {
        let maps = self.read_maps();
        for_each_piece(
            addr,
            data.len(),
            |a| Self::locate(&maps, a, true).map(|(_, n)| n),
            |a, done, n| {
                let (host, _) = Self::locate(&maps, a, true).expect("located above");
                // SAFETY: [host, host + n) lies inside a live, writable shared mapping (kept mapped by the read
                // lock) and [done, done + n) inside `data`. Plain byte stores into guest RAM, as device DMA does.
                unsafe {
                    std::ptr::copy_nonoverlapping(data.as_ptr().add(done), host as *mut u8, n)
                };
            },
        )
    }

    fn map_count(&self) -> u64 {
        self.read_maps().len() as u64
    }
}

impl Drop for MappedGuestMemory {
    fn drop(&mut self) {
        self.unmap_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Seek, SeekFrom, Write};

    fn memfd(len: u64) -> File {
        // SAFETY: memfd_create with a valid NUL-terminated name; the fd is owned by the File from here on.
        let fd = unsafe { libc::memfd_create(c"picoevb-model-test".as_ptr(), 0) };
        assert!(fd >= 0, "memfd_create: {}", io::Error::last_os_error());
        // SAFETY: fd is a fresh, valid descriptor nobody else owns.
        let f = unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        f.set_len(len).unwrap();
        f
    }

    #[test]
    fn reads_and_writes_reach_the_file() {
        let page = page_size() as u64;
        let mut f = memfd(4 * page);
        let m = MappedGuestMemory::new();
        m.map(
            0x10_0000,
            2 * page,
            page,
            true,
            true,
            Some(f.try_clone().unwrap()),
        )
        .unwrap();
        m.write(0x10_0000 + 8, b"hello").unwrap();
        let mut back = [0u8; 5];
        f.seek(SeekFrom::Start(page + 8)).unwrap();
        f.read_exact(&mut back).unwrap();
        assert_eq!(&back, b"hello");
        f.seek(SeekFrom::Start(page + 100)).unwrap();
        f.write_all(b"guest").unwrap();
        let mut buf = [0u8; 5];
        m.read(0x10_0000 + 100, &mut buf).unwrap();
        assert_eq!(&buf, b"guest");
        assert_eq!(
            m.read(0x10_0000 + 2 * page, &mut buf),
            Err(Unmapped(0x10_0000 + 2 * page))
        );
    }

    #[test]
    fn unmap_covers_several_maps_and_splits_partial_ones() {
        let page = page_size() as u64;
        let f = memfd(8 * page);
        let m = MappedGuestMemory::new();
        m.map(0, 2 * page, 0, true, true, Some(f.try_clone().unwrap()))
            .unwrap();
        m.map(
            2 * page,
            2 * page,
            2 * page,
            true,
            true,
            Some(f.try_clone().unwrap()),
        )
        .unwrap();
        m.map(
            4 * page,
            4 * page,
            4 * page,
            true,
            true,
            Some(f.try_clone().unwrap()),
        )
        .unwrap();
        m.map(0x1000_0000, page, 0, true, false, None).unwrap();
        assert_eq!(m.map_count(), 4);
        // Covers the first two maps and the first page of the third.
        assert_eq!(m.unmap(0, 5 * page), 3);
        assert_eq!(m.map_count(), 2);
        let mut b = [0u8; 1];
        assert!(m.read(page, &mut b).is_err());
        assert!(m.read(4 * page, &mut b).is_err());
        m.write(5 * page, &[7]).unwrap();
        m.read(5 * page, &mut b).unwrap();
        assert_eq!(b, [7]);
        assert!(
            m.read(0x1000_0000, &mut b).is_err(),
            "fd-less maps are unreachable"
        );
        assert_eq!(m.unmap_all(), 2);
    }

    #[test]
    fn read_only_maps_refuse_writes_and_overlaps_replace() {
        let page = page_size() as u64;
        let f = memfd(page);
        let m = MappedGuestMemory::new();
        m.map(0x2000_0000, page, 0, true, false, Some(f)).unwrap();
        assert_eq!(m.write(0x2000_0000, &[1]), Err(Unmapped(0x2000_0000)));
        let mut b = [0u8; 1];
        assert!(m.read(0x2000_0000, &mut b).is_ok());
        m.map(0x2000_0000, page, 0, true, true, None).unwrap();
        assert_eq!(m.map_count(), 1);
        assert_eq!(
            m.read(0x2000_0000, &mut b),
            Err(Unmapped(0x2000_0000)),
            "the fd-less map replaced it"
        );
        assert!(m.map(0, 0, 0, true, true, None).is_err(), "zero size");
    }
}
