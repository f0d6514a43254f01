//! An open `/dev/picoevbN` and its ioctls (the ABI from `picoevb-abi`). Works the same on an fd from the
//! agent's `Open` and on a node opened directly (tests, the self-test child).

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

use picoevb_abi as abi;

use crate::Error;

/// An open card.
#[derive(Debug)]
pub struct Device {
    fd: OwnedFd,
}

/// Result of one DMA request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transfer {
    pub bytes: u64,
    /// DMA time as the driver measured it (pinning and mapping excluded).
    pub dma_time_ns: u64,
}

impl Transfer {
    /// MB/s (10^6 bytes per second).
    pub fn mbps(&self) -> f64 {
        if self.dma_time_ns == 0 {
            return 0.0;
        }
        self.bytes as f64 * 1e3 / self.dma_time_ns as f64
    }
}

/// A pinned CUDA allocation; unpin it with [`Device::unpin_cuda`] before freeing the memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CudaHandle(pub u32);

impl Device {
    /// Wraps an fd (from the agent's `Open`).
    pub fn from_fd(fd: OwnedFd) -> Self {
        Self { fd }
    }

    /// Opens a node directly (needs permission on the node: the agent and tests).
    pub fn open_path(path: &Path) -> Result<Self, Error> {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| Error::Os {
                op: "open",
                errno: e.raw_os_error().unwrap_or(0),
            })?;
        Ok(Self { fd: f.into() })
    }

    fn ioctl<T>(&self, op: &'static str, cmd: u32, arg: *mut T) -> Result<(), Error> {
        // SAFETY: `cmd` is one of picoevb-abi's commands and `arg` points to the struct of the size and
        // layout that command encodes (every caller below passes `&mut` of the matching type), valid for the
        // duration of the call.
        let rc = unsafe { libc::ioctl(self.fd.as_raw_fd(), cmd as _, arg) };
        if rc < 0 {
            return Err(Error::last_os(op));
        }
        Ok(())
    }

    /// Driver ABI version, capabilities and the card's ID block.
    pub fn abi_info(&self) -> Result<abi::AbiInfo, Error> {
        let mut info = abi::AbiInfo::default();
        self.ioctl("ABI_INFO", abi::IOC_ABI_INFO, &mut info)?;
        Ok(info)
    }

    /// Bytes of FPGA RAM.
    pub fn card_info(&self) -> Result<abi::CardInfo, Error> {
        let mut info = abi::CardInfo::default();
        self.ioctl("CARD_INFO", abi::IOC_CARD_INFO, &mut info)?;
        Ok(info)
    }

    /// Sets the three LEDs: bit set = LED lit (the ABI's active-low value is handled here).
    pub fn set_leds(&self, lit: u32) -> Result<(), Error> {
        if lit > 7 {
            return Err(Error::InvalidArgument(format!("LED mask {lit} is above 7")));
        }
        // SAFETY: IOC_LED takes its argument by value, not as a pointer.
        let rc = unsafe { libc::ioctl(self.fd.as_raw_fd(), abi::IOC_LED as _, !lit & 7) };
        if rc < 0 {
            return Err(Error::last_os("LED"));
        }
        Ok(())
    }

    /// Pins `size` bytes of CUDA memory at `va` (a cudaHostAlloc/cuMemAlloc address) for DMA.
    pub fn pin_cuda(&self, va: u64, size: u64) -> Result<CudaHandle, Error> {
        let mut p = abi::PinCuda {
            va,
            size,
            ..Default::default()
        };
        self.ioctl("PIN_CUDA", abi::IOC_PIN_CUDA, &mut p)?;
        Ok(CudaHandle(p.handle))
    }

    pub fn unpin_cuda(&self, h: CudaHandle) -> Result<(), Error> {
        let mut u = abi::UnpinCuda { handle: h.0 };
        self.ioctl("UNPIN_CUDA", abi::IOC_UNPIN_CUDA, &mut u)
    }

    /// Host memory -> FPGA RAM at `fpga_offset`.
    pub fn h2c(&self, src: &[u8], fpga_offset: u64) -> Result<Transfer, Error> {
        self.h2c_raw(src.as_ptr() as u64, src.len() as u64, fpga_offset, 0)
    }

    /// FPGA RAM at `fpga_offset` -> host memory.
    pub fn c2h(&self, dst: &mut [u8], fpga_offset: u64) -> Result<Transfer, Error> {
        self.c2h_raw(dst.as_mut_ptr() as u64, dst.len() as u64, fpga_offset, 0)
    }

    /// Pinned CUDA memory -> FPGA RAM.
    pub fn h2c_cuda(&self, src: CudaHandle, len: u64, fpga_offset: u64) -> Result<Transfer, Error> {
        self.h2c_raw(src.0 as u64, len, fpga_offset, abi::H2C_SRC_CUDA)
    }

    /// FPGA RAM -> pinned CUDA memory.
    pub fn c2h_cuda(&self, dst: CudaHandle, len: u64, fpga_offset: u64) -> Result<Transfer, Error> {
        self.c2h_raw(dst.0 as u64, len, fpga_offset, abi::C2H_DST_CUDA)
    }

    fn h2c_raw(&self, src: u64, len: u64, dst: u64, flags: u64) -> Result<Transfer, Error> {
        let mut d = abi::H2cDma {
            src,
            dst,
            len,
            flags,
            dma_time_ns: 0,
        };
        self.ioctl("H2C_DMA", abi::IOC_H2C_DMA, &mut d)?;
        Ok(Transfer {
            bytes: len,
            dma_time_ns: d.dma_time_ns,
        })
    }

    fn c2h_raw(&self, dst: u64, len: u64, src: u64, flags: u64) -> Result<Transfer, Error> {
        let mut d = abi::C2hDma {
            dst,
            src,
            len,
            flags,
            dma_time_ns: 0,
        };
        self.ioctl("C2H_DMA", abi::IOC_C2H_DMA, &mut d)?;
        Ok(Transfer {
            bytes: len,
            dma_time_ns: d.dma_time_ns,
        })
    }

    /// Source -> FPGA -> destination in one request (CUDA handles where `flags` say so).
    pub fn h2c2h(&self, src: u64, dst: u64, len: u64, flags: u64) -> Result<Transfer, Error> {
        let mut d = abi::H2c2hDma {
            src,
            dst,
            len,
            flags,
            dma_time_ns: 0,
        };
        self.ioctl("H2C2H_DMA", abi::IOC_H2C2H_DMA, &mut d)?;
        Ok(Transfer {
            bytes: len,
            dma_time_ns: d.dma_time_ns,
        })
    }
}

impl Device {
    /// Gives up the fd.
    pub fn into_fd(self) -> OwnedFd {
        self.fd
    }
}

impl AsRawFd for Device {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_operation_and_errno() {
        // /dev/null answers every ioctl with ENOTTY: the error must say which call and why.
        let d = Device::open_path(Path::new("/dev/null")).unwrap();
        let e = d.abi_info().unwrap_err();
        assert_eq!(e.errno(), Some(libc::ENOTTY));
        assert!(e.to_string().starts_with("ABI_INFO: "), "{e}");
        assert!(matches!(d.set_leds(8), Err(Error::InvalidArgument(_))));
        let missing = Device::open_path(Path::new("/nonexistent/picoevb9")).unwrap_err();
        assert_eq!(missing.errno(), Some(libc::ENOENT));
    }

    #[test]
    fn bandwidth() {
        let t = Transfer {
            bytes: 65536,
            dma_time_ns: 65536,
        };
        assert_eq!(t.mbps(), 1000.0);
        assert_eq!(
            Transfer {
                bytes: 1,
                dma_time_ns: 0
            }
            .mbps(),
            0.0
        );
    }
}
