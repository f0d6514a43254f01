//! "GPU memory" on the bench: the surfaces PIN_CUDA pins, as an application of each provider flavour would
//! allocate them, with guard bytes around them.
//!
//! - Jetson flavour: CUDA memory on Jetson is system memory (`cudaHostAlloc`): page-aligned, locked. Here an
//!   `mmap(MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE)` region, `mlock`ed, in 4 KiB pages.
//! - dGPU flavour: the API hands out one bus address per 64 KiB GPU page, so the memory must be made of
//!   naturally aligned, physically contiguous 64 KiB blocks. gdr's provider serves such memory from
//!   `/dev/gdr_nv_p2p_vram` (`kmod/nvidia-p2p/vram.c`); plain anonymous memory is refused there (EINVAL).
//!
//! Every surface starts at a 64 KiB boundary with 64 KiB of guard pattern before and after it inside the
//! same mapping: a driver that DMAs outside the pinned range through an address computed from the surface
//! shows up as a damaged guard, and no two surfaces share a 64 KiB GPU page (see [`ISOLATION`]).

use std::cell::Cell;
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

/// Which ioctl pins the surfaces of the test running now: PIN_CUDA (a provider's GPU memory), or PIN_HOST
/// (host memory as a surface: the path of Thor, and of Orin after CUDA 14). The `host_surface::` tests are
/// the GPU-memory tests run with PIN_HOST ([`with_pin_kind`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PinKind {
    Cuda,
    Host,
}

impl PinKind {
    /// The ioctl's name, for messages.
    pub fn ioctl(self) -> &'static str {
        match self {
            PinKind::Cuda => "PIN_CUDA",
            PinKind::Host => "PIN_HOST",
        }
    }

    /// The ioctl's number.
    pub fn cmd(self) -> u32 {
        match self {
            PinKind::Cuda => abi::IOC_PIN_CUDA,
            PinKind::Host => abi::IOC_PIN_HOST,
        }
    }
}

thread_local! {
    static PIN_KIND: Cell<PinKind> = const { Cell::new(PinKind::Cuda) };
}

/// The running test's [`PinKind`].
pub fn pin_kind() -> PinKind {
    PIN_KIND.get()
}

/// Runs `f` with surfaces pinned by `kind`; PIN_CUDA again afterwards, even if `f` panics.
pub fn with_pin_kind<T>(kind: PinKind, f: impl FnOnce() -> T) -> T {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            PIN_KIND.set(PinKind::Cuda);
        }
    }
    let _reset = Reset;
    PIN_KIND.set(kind);
    f()
}

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

/// Guard bytes on each side of a surface, and the alignment of its start: the largest GPU page. The driver
/// refuses a pin that shares a GPU page with a live one of the same process (EBUSY), so two surfaces must
/// never share one by accident of placement; tests that want neighbours pin parts of one surface.
pub const ISOLATION: usize = GPU_PAGE;

/// A GPU surface: `len` bytes (a multiple of the flavour's granule) at a 64 KiB-aligned address, zeroed,
/// between two 64 KiB guards of pattern. Unmapped on drop (or earlier, by [`Surface::unmap`]).
pub struct Surface {
    map: *mut u8,
    map_len: usize,
    /// Offset of the first surface byte in the mapping (at least `ISOLATION`).
    start: usize,
    len: usize,
    mapped: bool,
}

impl Surface {
    /// A surface of at least `len` bytes (rounded up to the granule).
    pub fn new(flavour: Flavour, len: usize) -> io::Result<Self> {
        let g = flavour.granule();
        let w = ISOLATION;
        let len = len.max(1).div_ceil(g) * g;
        let (map, map_len, file) = match flavour {
            Flavour::Jetson => {
                // Room to slide the start up to a 64 KiB boundary.
                let map_len = len + 3 * w;
                let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE;
                (mmap(map_len, flags, -1)?, map_len, None)
            }
            Flavour::Dgpu => {
                let f = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(VRAM_PATH)
                    .map_err(|e| io::Error::new(e.kind(), format!("open {VRAM_PATH}: {e}")))?;
                // The device places mappings at 64 KiB boundaries itself.
                let map_len = len + 2 * w;
                let p = mmap(map_len, libc::MAP_SHARED, f.as_raw_fd())?;
                (p, map_len, Some(f))
            }
        };
        // The mapping outlives the file descriptor.
        drop(file);
        let start = (map as usize + w).next_multiple_of(w) - map as usize;
        let mut s = Surface {
            map,
            map_len,
            start,
            len,
            mapped: true,
        };
        if start + len + w > map_len {
            return Err(io::Error::other(format!(
                "mapping at {map:?} cannot hold a 64 KiB-aligned surface"
            )));
        }
        if flavour == Flavour::Jetson {
            // SAFETY: the range lies inside our own mapping.
            if unsafe { libc::mlock(s.map.add(start).cast(), len) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        let whole = s.whole_mut();
        for (i, b) in whole.iter_mut().enumerate() {
            if i < start || i >= start + len {
                *b = guard_byte(i);
            }
        }
        Ok(s)
    }

    /// User address of the first surface byte (what an application passes to PIN_CUDA).
    pub fn va(&self) -> u64 {
        self.map as u64 + self.start as u64
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
        &self.whole()[self.start..self.start + self.len]
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        let (s, l) = (self.start, self.len);
        &mut self.whole_mut()[s..s + l]
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

    /// Checks the 64 KiB guards on both sides; describes the first damage.
    pub fn check_guards(&self) -> Result<(), String> {
        let whole = self.whole();
        let end = self.start + self.len;
        let bad = (self.start - ISOLATION..self.start)
            .chain(end..end + ISOLATION)
            .find(|&i| whole[i] != guard_byte(i));
        match bad {
            None => Ok(()),
            Some(i) => Err(format!(
                "surface guard overwritten at {:+} from the surface start (surface len {}): {:#04x}, \
                 expected {:#04x}",
                i as isize - self.start as isize,
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
        if unsafe { libc::munmap(self.map.add(self.start + offset).cast(), len) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Changes the protection of the surface bytes (not the guards), e.g. to read-only.
    pub fn protect(&mut self, prot: libc::c_int) -> io::Result<()> {
        assert!(self.mapped, "surface used after unmap");
        // SAFETY: the range lies inside our own mapping; callers only read it afterwards.
        if unsafe { libc::mprotect(self.map.add(self.start).cast(), self.len, prot) } != 0 {
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
        assert_eq!(s.va() % 65536, 0);
        assert!(s.as_slice().iter().all(|&b| b == 0));
        s.as_mut_slice().fill(0xff);
        assert!(s.check_guards().is_ok());
        let g = s.start;
        s.whole_mut()[g + 8192 + 65535] ^= 1;
        assert!(s.check_guards().unwrap_err().contains("+73727"));
        s.whole_mut()[g + 8192 + 65535] ^= 1;
        s.whole_mut()[g - 65536] ^= 1;
        assert!(s.check_guards().unwrap_err().contains("-65536"));
        s.whole_mut()[g - 65536] ^= 1;
        s.punch(4096, 4096).expect("punch");
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
