//! A ring this process fills and the driver empties into the card's stream checker (`RING_H2C`): the
//! writer copies whole slots in and publishes `produced`; the driver moves them in chains, one H2C each,
//! and publishes `consumed`, below which the writer may write again. The writer waits for room asleep on
//! the ring's eventfd (ABI 1.7), or napping with an older driver.

use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use picoevb_abi as abi;

use super::driver::{Driver, Memory};
use super::{RingConfig, RingPolicy, RingSummary, check, ring_arg};
use crate::Error;

/// A running ring the driver empties into the checker: its writer's side. Dropping it stops the driver at
/// its next chain boundary (slots written but not yet moved are not moved).
pub struct RingWriter {
    driver: Driver,
    slots: u64,
    slot_bytes: usize,
    written: u64,
}

impl std::fmt::Debug for RingWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingWriter")
            .field("slot_bytes", &self.slot_bytes)
            .field("written", &self.written)
            .finish_non_exhaustive()
    }
}

impl RingWriter {
    /// Starts the driver emptying a ring of `config`'s shape into the checker of the card `fd` is open on.
    /// Back-pressure only: the driver never moves a slot before it is written.
    pub(crate) fn start(fd: OwnedFd, config: RingConfig, wake: bool) -> Result<RingWriter, Error> {
        if config.policy != RingPolicy::BackPressure {
            return Err(Error::InvalidArgument(
                "a ring the driver empties waits for its writer: back-pressure only".into(),
            ));
        }
        let len = check(&config)?;
        let mem = Memory::new(len)?;
        let arg = ring_arg(&config, mem.slots() as u64, abi::RING_H2C);
        let driver = Driver::start(fd, arg, mem, wake)?;
        Ok(RingWriter {
            driver,
            slots: u64::from(config.slots),
            slot_bytes: config.slot_bytes,
            written: 0,
        })
    }

    /// Bytes per slot.
    pub fn slot_bytes(&self) -> usize {
        self.slot_bytes
    }

    /// Slots written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Slots the driver moved into the checker so far.
    pub fn moved(&self) -> u64 {
        self.driver.mem().control().consumed.load(Ordering::Acquire)
    }

    /// Copies `slot` (exactly `slot_bytes` long) into the next slot if the driver has moved what was there;
    /// `Ok(false)` while the ring is full. Once the driver's call has returned: its error, or (its `total`
    /// moved, or stopped) InvalidArgument.
    pub fn try_write(&mut self, slot: &[u8]) -> Result<bool, Error> {
        if slot.len() != self.slot_bytes {
            return Err(Error::InvalidArgument(format!(
                "a slot is {} bytes, not {}",
                self.slot_bytes,
                slot.len()
            )));
        }
        if self.driver.ended() {
            self.driver.join()?;
            return Err(Error::InvalidArgument(
                "the ring has ended: its total was moved, or it was stopped".into(),
            ));
        }
        let c = self.driver.mem().control();
        if self.written >= self.moved() + self.slots {
            return Ok(false);
        }
        let at = (self.written % self.slots) as usize * self.slot_bytes;
        // SAFETY: the slot lies inside the live mapping (index < slots); the driver moved what it held
        // (`consumed`, loaded with acquire: its device read the slot before the driver published that) and
        // reads it again only after `produced` below says so, so nothing reads it while it is written;
        // written through a raw pointer, never a reference.
        unsafe {
            std::ptr::copy_nonoverlapping(
                slot.as_ptr(),
                self.driver.mem().slots().add(at),
                self.slot_bytes,
            )
        };
        self.written += 1;
        c.produced.store(self.written, Ordering::Release);
        Ok(true)
    }

    /// [`RingWriter::try_write`], waiting up to `timeout` for room; `Ok(false)` at the timeout.
    pub fn write(&mut self, slot: &[u8], timeout: Duration) -> Result<bool, Error> {
        let deadline = Instant::now() + timeout;
        loop {
            if self.try_write(slot)? {
                return Ok(true);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(false);
            }
            self.driver.sleep(deadline - now)?;
        }
    }

    /// Waits up to `timeout` for the driver to move every slot written, then stops it and says what the
    /// ring did (`read`: the slots written). Timeout if slots were left unmoved; the driver's error if it
    /// ended with one.
    pub fn finish(mut self, timeout: Duration) -> Result<RingSummary, Error> {
        let deadline = Instant::now() + timeout;
        while self.moved() < self.written && !self.driver.ended() {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            self.driver.sleep(deadline - now)?;
        }
        let a = self.driver.finish()?;
        if a.produced < self.written {
            return Err(Error::Timeout(format!(
                "the driver moved {} of the {} slots written",
                a.produced, self.written
            )));
        }
        Ok(RingSummary::of(&a, self.written, 0))
    }
}
