//! A ring the driver fills from the stream source in a surface of the card's file (`RING_CUDA`): GPU memory
//! pinned with `Device::pin`, host memory with `Device::pin_host_memory`, an imported dma-buf. Its reader
//! is the application's own, most often a CUDA kernel, which follows the ring's protocol
//! (`picoevb_logic::stream_ring`) over the control block this type owns: a page of its own, so that the
//! application can map it for the GPU (`cudaHostRegister(control, page, cudaHostRegisterMapped)`, then
//! `cudaHostGetDevicePointer`) and its kernel polls `produced` and `writing` and stores `consumed`.
//! Unpinning the surface, or freeing its memory, ends the ring (EINVAL) at the chain in flight.

use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use picoevb_abi as abi;

use super::driver::{Driver, Memory};
use super::{RingConfig, RingSummary, check, ring_arg};
use crate::{CudaHandle, Error};

/// A running ring in a surface: the driver's side and the control block. Dropping it stops the driver at
/// its next chain boundary.
pub struct SurfaceRing {
    driver: Driver,
}

impl std::fmt::Debug for SurfaceRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SurfaceRing")
            .field("produced", &self.produced())
            .finish_non_exhaustive()
    }
}

impl SurfaceRing {
    /// Starts the driver filling a ring of `config`'s shape from offset 0 of `surface` (a handle of the
    /// file `fd` duplicates; the driver refuses a surface smaller than the ring with EINVAL, at once).
    pub(crate) fn start(
        fd: OwnedFd,
        surface: CudaHandle,
        config: RingConfig,
        wake: bool,
    ) -> Result<SurfaceRing, Error> {
        check(&config)?;
        let mem = Memory::new(0)?;
        let arg = ring_arg(&config, u64::from(surface.0), abi::RING_CUDA);
        let driver = Driver::start(fd, arg, mem, wake)?;
        Ok(SurfaceRing { driver })
    }

    /// The control block (`abi::RingControl`'s layout) at the start of a page of its own, for the reader:
    /// it loads `produced` (acquire) and `writing`, and with back-pressure stores `consumed` (release).
    /// Valid while this value lives.
    pub fn control(&self) -> *mut abi::RingControl {
        std::ptr::from_ref(self.driver.mem().control())
            .cast_mut()
            .cast()
    }

    /// Slots the driver has filled whole.
    pub fn produced(&self) -> u64 {
        self.driver.mem().control().produced.load(Ordering::Acquire)
    }

    /// Slots below which the driver may be writing now (a seqlock reader's check).
    pub fn writing(&self) -> u64 {
        self.driver.mem().control().writing.load(Ordering::Acquire)
    }

    /// Releases every slot below `consumed` to a back-pressure driver (for a reader that reports through
    /// this process rather than storing the word itself).
    pub fn release(&self, consumed: u64) {
        self.driver
            .mem()
            .control()
            .consumed
            .store(consumed, Ordering::Release);
    }

    /// Waits up to `timeout` until the driver has filled more than `seen` slots, or its call returned;
    /// then `produced`. The driver's error if it ended with one.
    pub fn wait(&mut self, seen: u64, timeout: Duration) -> Result<u64, Error> {
        let deadline = Instant::now() + timeout;
        loop {
            // Checked before `produced` is loaded: once the driver has ended, this load sees its last slot.
            let ended = self.driver.ended();
            let p = self.produced();
            if p > seen {
                return Ok(p);
            }
            if ended {
                self.driver.join()?;
                return Ok(p);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(p);
            }
            self.driver.sleep(deadline - now)?;
        }
    }

    /// Whether the driver's call has returned.
    pub fn ended(&self) -> bool {
        self.driver.ended()
    }

    /// Whether a waiter sleeps on the ring's eventfd (the driver has ABI 1.7).
    pub fn sleeps(&self) -> bool {
        self.driver.sleeps()
    }

    /// Stops the driver at its next chain boundary, waits for it, and says what the ring did (`read` and
    /// `dropped` are the reader's to count: 0 here).
    pub fn finish(mut self) -> Result<RingSummary, Error> {
        let a = self.driver.finish()?;
        Ok(RingSummary::of(&a, 0, 0))
    }
}
