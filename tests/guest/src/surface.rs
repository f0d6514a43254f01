//! "GPU memory" on the bench: the surfaces PIN_CUDA pins, as an application of each provider flavour would
//! allocate them, with guard bytes around them.
//!
//! - Jetson flavour: CUDA memory on Jetson is system memory (`cudaHostAlloc`): page-aligned, locked. Here an
//!   `mmap(MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE)` region, `mlock`ed, in 4 KiB pages.
//! - dGPU flavour: the API hands out one bus address per 64 KiB GPU page, so the memory must be made of
//!   naturally aligned, physically contiguous 64 KiB blocks. gdr's provider serves such memory from
//!   `/dev/gdr_nv_p2p_vram` (`kmod/nvidia-p2p/vram.c`); plain anonymous memory is refused there (EINVAL).
//!
//! One granule (4 KiB or 64 KiB) of guard pattern lies before and after the surface inside the same
//! mapping, so a driver that DMAs outside the pinned range through an address computed from the surface
//! shows up as a damaged guard.

use std::fs::OpenOptions;
use std::io;
use std::os::fd::AsRawFd;

use picoevb_abi as abi;

use crate::rng::Rng;

/// The dGPU provider's stand-in for GPU memory (gdr_nv_p2p.ko built with GDR_P2P_FLAVOUR=dgpu).
pub const VRAM_PATH: &str = "/dev/gdr_nv_p2p_vram";
/// Jetson's CUDA page: the CPU page.
pub const JETSON_PAGE: usize = 4096;
/// NVIDIA's dGPU page.
pub const GPU_PAGE: usize = 65536;

/// Which nvidia_p2p API the driver was built for, from ABI_INFO's caps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavour {
    Jetson,
    Dgpu,
}

impl Flavour {
    /// The flavour the caps announce, if any (a driver claiming both is caught by `cuda::caps_match_provider`).
    pub fn from_caps(caps: u64) -> Option<Self> {
        if caps & abi::CAP_CUDA_DGPU != 0 {
            Some(Flavour::Dgpu)
        } else if caps & abi::CAP_CUDA_JETSON != 0 {
            Some(Flavour::Jetson)
        } else {
            None
        }
    }

    /// Alignment and size granule of what PIN_CUDA accepts.
    pub fn granule(self) -> usize {
        match self {
            Flavour::Jetson => JETSON_PAGE,
            Flavour::Dgpu => GPU_PAGE,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Flavour::Jetson => "jetson",
            Flavour::Dgpu => "dgpu",
        }
    }
}

/// Guard byte at position `i` of the mapping: a pattern, so a shifted write shows up.
fn guard_byte(i: usize) -> u8 {
    (i as u8).wrapping_mul(41) ^ 0x5a
}

/// A GPU surface: `len` bytes (a multiple of the flavour's granule) at a granule-aligned address, zeroed,
/// between two granules of guard pattern. Unmapped on drop (or earlier, by [`Surface::unmap`]).
pub struct Surface {
    map: *mut u8,
    map_len: usize,
    guard: usize,
    len: usize,
    mapped: bool,
}

impl Surface {
    /// A surface of at least `len` bytes (rounded up to the granule).
    pub fn new(flavour: Flavour, len: usize) -> io::Result<Self> {
        let g = flavour.granule();
        let len = len.max(1).div_ceil(g) * g;
        let map_len = len + 2 * g;
        let (map, file) = match flavour {
            Flavour::Jetson => (
                mmap(
                    map_len,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                    -1,
                )?,
                None,
            ),
            Flavour::Dgpu => {
                let f = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(VRAM_PATH)
                    .map_err(|e| io::Error::new(e.kind(), format!("open {VRAM_PATH}: {e}")))?;
                (mmap(map_len, libc::MAP_SHARED, f.as_raw_fd())?, Some(f))
            }
        };
        // The mapping outlives the file descriptor.
        drop(file);
        let mut s = Surface {
            map,
            map_len,
            guard: g,
            len,
            mapped: true,
        };
        if !s.va().is_multiple_of(g as u64) {
            return Err(io::Error::other(format!(
                "surface at {:#x} is not {g}-byte aligned",
                s.va()
            )));
        }
        if flavour == Flavour::Jetson {
            // SAFETY: the range lies inside our own mapping.
            if unsafe { libc::mlock(s.map.add(g).cast(), len) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        let whole = s.whole_mut();
        for (i, b) in whole[..g].iter_mut().enumerate() {
            *b = guard_byte(i);
        }
        for (i, b) in whole.iter_mut().enumerate().skip(g + len) {
            *b = guard_byte(i);
        }
        Ok(s)
    }

    /// User address of the first surface byte (what an application passes to PIN_CUDA).
    pub fn va(&self) -> u64 {
        self.map as u64 + self.guard as u64
    }

    pub fn len(&self) -> usize {
        self.len
    }

    fn whole_mut(&mut self) -> &mut [u8] {
        assert!(self.mapped, "surface used after unmap");
        // SAFETY: `map` is our live mapping of `map_len` bytes, readable and writable.
        unsafe { std::slice::from_raw_parts_mut(self.map, self.map_len) }
    }

    fn whole(&self) -> &[u8] {
        assert!(self.mapped, "surface used after unmap");
        // SAFETY: as in `whole_mut`, shared.
        unsafe { std::slice::from_raw_parts(self.map, self.map_len) }
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.whole()[self.guard..self.guard + self.len]
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        let (g, l) = (self.guard, self.len);
        &mut self.whole_mut()[g..g + l]
    }

    /// Random bytes over the whole surface.
    pub fn fill_random(&mut self, rng: &mut Rng) {
        rng.fill(self.as_mut_slice());
    }

    /// Every byte the complement of `other`'s at the same position (so every byte a copy writes changes).
    pub fn fill_complement(&mut self, other: &[u8]) {
        for (d, s) in self.as_mut_slice().iter_mut().zip(other) {
            *d = !s;
        }
    }

    /// Checks the guard granules on both sides; describes the first damage.
    pub fn check_guards(&self) -> Result<(), String> {
        let whole = self.whole();
        let end = self.guard + self.len;
        let bad = (0..self.guard)
            .chain(end..whole.len())
            .find(|&i| whole[i] != guard_byte(i));
        match bad {
            None => Ok(()),
            Some(i) => Err(format!(
                "surface guard overwritten at {:+} from the surface start (surface len {}): {:#04x}, \
                 expected {:#04x}",
                i as isize - self.guard as isize,
                self.len,
                whole[i],
                guard_byte(i)
            )),
        }
    }

    /// Unmaps `len` bytes at `offset` from the surface start (both multiples of the CPU page), leaving a hole;
    /// the rest stays mapped.
    pub fn punch(&mut self, offset: usize, len: usize) -> io::Result<()> {
        assert!(
            self.mapped && offset + len <= self.len,
            "punch outside the surface"
        );
        // SAFETY: the range lies inside our own mapping, and no slice into it outlives this `&mut self` call.
        if unsafe { libc::munmap(self.map.add(self.guard + offset).cast(), len) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Changes the protection of the surface bytes (not the guards), e.g. to read-only.
    pub fn protect(&mut self, prot: libc::c_int) -> io::Result<()> {
        assert!(self.mapped, "surface used after unmap");
        // SAFETY: the range lies inside our own mapping; callers only read it afterwards.
        if unsafe { libc::mprotect(self.map.add(self.guard).cast(), self.len, prot) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Unmaps the whole mapping now: the memory behind any handle pinned on it goes away.
    pub fn unmap(&mut self) -> io::Result<()> {
        assert!(self.mapped, "surface unmapped twice");
        // SAFETY: our own mapping; no slice into it outlives this `&mut self` call.
        if unsafe { libc::munmap(self.map.cast(), self.map_len) } != 0 {
            return Err(io::Error::last_os_error());
        }
        self.mapped = false;
        Ok(())
    }
}

impl Drop for Surface {
    fn drop(&mut self) {
        if self.mapped {
            // SAFETY: our own mapping, unmapped once.
            unsafe { libc::munmap(self.map.cast(), self.map_len) };
        }
    }
}

fn mmap(len: usize, flags: libc::c_int, fd: libc::c_int) -> io::Result<*mut u8> {
    // SAFETY: a fresh mapping at an address the kernel picks; no existing memory is affected.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            flags,
            fd,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        Err(io::Error::last_os_error())
    } else {
        Ok(p.cast())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jetson_surface_layout_and_guards() {
        let mut s = Surface::new(Flavour::Jetson, 5000).expect("surface");
        assert_eq!(s.len(), 8192);
        assert_eq!(s.va() % 4096, 0);
        assert!(s.as_slice().iter().all(|&b| b == 0));
        s.as_mut_slice().fill(0xff);
        assert!(s.check_guards().is_ok());
        let g = s.guard;
        s.whole_mut()[g + 8192] ^= 1;
        assert!(s.check_guards().unwrap_err().contains("+8192"));
        s.whole_mut()[g + 8192] ^= 1;
        s.whole_mut()[g - 1] ^= 1;
        assert!(s.check_guards().unwrap_err().contains("-1"));
        s.unmap().expect("unmap");
    }

    #[test]
    fn flavour_from_caps() {
        assert_eq!(Flavour::from_caps(abi::CAP_MSI), None);
        assert_eq!(
            Flavour::from_caps(abi::CAP_CUDA_JETSON | abi::CAP_MSI),
            Some(Flavour::Jetson)
        );
        assert_eq!(Flavour::from_caps(abi::CAP_CUDA_DGPU), Some(Flavour::Dgpu));
        assert_eq!(Flavour::Dgpu.granule(), 65536);
    }
}
