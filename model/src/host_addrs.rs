//! The host (bus) addresses the engines DMA to and from, as the driver programmed them into descriptors.
//!
//! With an IOMMU in front of the card these are IOVAs, not guest-physical addresses: the control channel
//! reports the last one per engine so a guest test can compare it with the physical address of its buffer.
//! The `stale_addr` fault replays the previous transfer's address in place of the current one, the way a
//! card (or driver) that kept a bus address past its unmap would: behind an IOMMU that address is no longer
//! mapped and the DMA fails; without one it still reaches whatever RAM is there now.

use picoevb_regs::xdma::{Descriptor, Dir};

/// First data address of the last two transfers of each engine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostAddrs {
    /// Indexed by `Dir::index()`: the current (or last) transfer's first host address.
    last: [Option<u64>; 2],
    /// The transfer before that.
    previous: [Option<u64>; 2],
}

/// The host side of a descriptor: the source of an H2C, the destination of a C2H.
pub fn host_addr(dir: Dir, d: &Descriptor) -> u64 {
    match dir {
        Dir::H2c => d.src(),
        Dir::C2h => d.dst(),
    }
}

fn with_host_addr(dir: Dir, d: &Descriptor, addr: u64) -> Descriptor {
    let mut d = *d;
    let (lo, hi) = (addr as u32, (addr >> 32) as u32);
    match dir {
        Dir::H2c => (d.src_lo, d.src_hi) = (lo, hi),
        Dir::C2h => (d.dst_lo, d.dst_hi) = (lo, hi),
    }
    d
}

impl HostAddrs {
    /// The last transfer's first host address on `dir`, as the driver programmed it.
    pub fn last(&self, dir: Dir) -> Option<u64> {
        self.last[dir.index()]
    }

    /// Records the first data descriptor of a new transfer on `dir` and returns the descriptor to run: the
    /// same one, or with `stale` the previous transfer's host address in its place (when there was one).
    /// Returns whether the address was replaced.
    pub fn first_data(&mut self, dir: Dir, d: &Descriptor, stale: bool) -> (Descriptor, bool) {
        let i = dir.index();
        self.previous[i] = self.last[i];
        self.last[i] = Some(host_addr(dir, d));
        match self.previous[i] {
            Some(old) if stale && old != host_addr(dir, d) => (with_host_addr(dir, d, old), true),
            _ => (*d, false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desc(src: u64, dst: u64) -> Descriptor {
        Descriptor::new(0, 4096, src, dst, 0)
    }

    #[test]
    fn stale_replays_the_previous_transfers_address() {
        let mut a = HostAddrs::default();
        let (d, replaced) = a.first_data(Dir::H2c, &desc(0x1_0000_1000, 0), true);
        assert!(!replaced, "no previous transfer: nothing to replay");
        assert_eq!(d.src(), 0x1_0000_1000);
        let (d, replaced) = a.first_data(Dir::H2c, &desc(0x2000, 0x40), true);
        assert!(replaced);
        assert_eq!((d.src(), d.dst()), (0x1_0000_1000, 0x40));
        assert_eq!(
            a.last(Dir::H2c),
            Some(0x2000),
            "reports what the driver programmed"
        );
        let (d, replaced) = a.first_data(Dir::H2c, &desc(0x3000, 0), false);
        assert!(!replaced);
        assert_eq!(d.src(), 0x3000);
    }

    #[test]
    fn engines_are_separate_and_c2h_replays_the_destination() {
        let mut a = HostAddrs::default();
        a.first_data(Dir::C2h, &desc(0, 0x5000), false);
        a.first_data(Dir::H2c, &desc(0x9000, 0), false);
        let (d, replaced) = a.first_data(Dir::C2h, &desc(0x10, 0x6000), true);
        assert!(replaced);
        assert_eq!((d.src(), d.dst()), (0x10, 0x5000));
        assert_eq!(a.last(Dir::H2c), Some(0x9000));
    }
}
