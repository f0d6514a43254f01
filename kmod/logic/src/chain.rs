//! XDMA scatter-gather descriptor chains (PG195 "Descriptors"): one chain per request, built from the
//! mapped segments, so a request costs one engine run and one interrupt however fragmented the buffer is.
//!
//! Layout rules the engine imposes: descriptors are 32-byte aligned; the engine fetches a block of
//! `1 + adj` adjacent descriptors, then continues at `next` of the last one fetched with that descriptor's
//! Nxt_adj as the next block's extra count; an adjacent block must not cross a 4 KiB boundary and holds at
//! most 64 descriptors. Every descriptor carries a correct `next` and Nxt_adj, so any fetch granularity works.

use crate::errno::Errno;
use crate::segments::Cursor;
use crate::xdma::{self, Descriptor, Dir};

/// Where a built chain starts, for the SGDMA registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chain {
    /// Bus address of the first descriptor (SGDMA 0x80/0x84).
    pub first: u64,
    /// Extra adjacent descriptors after the first (SGDMA 0x88).
    pub first_adj: u32,
    /// Descriptors used.
    pub count: usize,
    /// Bytes the chain moves.
    pub bytes: u64,
}

/// Fills `descs` (whose first element lies at bus address `base`) with a chain moving up to `len` bytes
/// between the host pieces of `host` and FPGA RAM starting at `fpga_addr`, each descriptor at most `max_len`
/// bytes. Stops early when `descs` is full: `Chain::bytes` says how far it got, and the caller runs the
/// rest as another chain. Fails only on arguments no caller should pass.
pub fn build(
    dir: Dir,
    host: &mut Cursor<'_>,
    len: u64,
    fpga_addr: u64,
    max_len: u32,
    descs: &mut [Descriptor],
    base: u64,
) -> Result<Chain, Errno> {
    if base % xdma::DESC_ALIGN != 0
        || max_len == 0
        || max_len > xdma::DESC_LEN_FIELD_MAX
        || len == 0
    {
        return Err(Errno::EINVAL);
    }
    let mut count = 0;
    let mut done = 0u64;
    while done < len && count < descs.len() {
        let Some(piece) = host.take((len - done).min(u64::from(max_len))) else {
            break;
        };
        let fpga = fpga_addr + done;
        let (src, dst) = match dir {
            Dir::H2c => (piece.addr, fpga),
            Dir::C2h => (fpga, piece.addr),
        };
        // `piece.len <= max_len` fits the 28-bit length field.
        descs[count] = Descriptor::new(0, piece.len as u32, src, dst, 0);
        done += piece.len;
        count += 1;
    }
    if count == 0 {
        return Err(Errno::EINVAL);
    }
    link(&mut descs[..count], base);
    Ok(Chain {
        first: base,
        first_adj: block_end(base, 0, count) as u32 - 1,
        count,
        bytes: done,
    })
}

/// End (exclusive index) of the adjacent block that starts at descriptor `start`.
fn block_end(base: u64, start: usize, count: usize) -> usize {
    let addr = base + (start * xdma::DESC_SIZE) as u64;
    let to_boundary =
        (xdma::DESC_BLOCK_BOUNDARY - addr % xdma::DESC_BLOCK_BOUNDARY) as usize / xdma::DESC_SIZE;
    count.min(start + to_boundary.min(xdma::DESC_MAX_ADJACENT))
}

/// Writes control words and next pointers: Nxt_adj of descriptor i counts the descriptors after i+1 in the
/// block holding i+1; the last descriptor stops the engine and raises the one completion interrupt.
fn link(descs: &mut [Descriptor], base: u64) {
    let count = descs.len();
    let addr = |i: usize| base + (i * xdma::DESC_SIZE) as u64;
    let mut end = block_end(base, 0, count);
    for (i, d) in descs.iter_mut().enumerate() {
        let next = i + 1;
        if next == end && next < count {
            end = block_end(base, next, count);
        }
        if next < count {
            let adj = (end - next - 1) as u32;
            d.control = xdma::desc_control(adj, 0);
            let a = addr(next);
            d.next_lo = a as u32;
            d.next_hi = (a >> 32) as u32;
        } else {
            d.control =
                xdma::desc_control(0, xdma::DESC_STOP | xdma::DESC_COMPLETED | xdma::DESC_EOP);
            d.next_lo = 0;
            d.next_hi = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::segments::Segment;
    use std::vec::Vec;

    /// Walks a chain the way PG195 says the engine fetches it; returns the descriptor indices in fetch order
    /// and checks every block stays inside 4 KiB and 64 descriptors.
    fn fetch_order(descs: &[Descriptor], base: u64, chain: &Chain) -> Vec<usize> {
        let mut order = Vec::new();
        let mut addr = chain.first;
        let mut adj = chain.first_adj as usize;
        loop {
            assert!(adj < xdma::DESC_MAX_ADJACENT);
            let first = ((addr - base) as usize) / xdma::DESC_SIZE;
            let last_addr = addr + (adj * xdma::DESC_SIZE) as u64;
            assert_eq!(
                addr / 4096,
                last_addr / 4096,
                "adjacent block crosses 4 KiB at {addr:#x}"
            );
            for (i, d) in descs.iter().enumerate().skip(first).take(adj + 1) {
                assert_eq!(xdma::desc_magic(d.control), xdma::DESC_MAGIC);
                order.push(i);
            }
            let last = &descs[first + adj];
            if last.control & xdma::DESC_STOP != 0 {
                return order;
            }
            addr = last.next();
            adj = xdma::desc_next_adj(last.control) as usize;
        }
    }

    fn run(
        segs: &[Segment],
        skip: u64,
        len: u64,
        base: u64,
        slots: usize,
        max: u32,
    ) -> (Vec<Descriptor>, Chain) {
        let mut descs = std::vec![Descriptor::default(); slots];
        let mut cur = Cursor::new(segs);
        cur.skip(skip).unwrap();
        let chain = build(Dir::H2c, &mut cur, len, 0x100, max, &mut descs, base).unwrap();
        (descs, chain)
    }

    #[test]
    fn single_segment_is_one_stop_descriptor() {
        let (d, c) = run(
            &[Segment {
                addr: 0x1234,
                len: 100,
            }],
            0,
            100,
            0x10000,
            4,
            xdma::DESC_LEN_MAX,
        );
        assert_eq!(
            c,
            Chain {
                first: 0x10000,
                first_adj: 0,
                count: 1,
                bytes: 100
            }
        );
        assert_eq!(d[0].control, 0xad4b_0013);
        assert_eq!(
            (d[0].src(), d[0].dst(), d[0].len, d[0].next()),
            (0x1234, 0x100, 100, 0)
        );
    }

    #[test]
    fn c2h_swaps_source_and_destination() {
        let mut descs = [Descriptor::default(); 2];
        let segs = [Segment {
            addr: 0x8000,
            len: 64,
        }];
        let c = build(
            Dir::C2h,
            &mut Cursor::new(&segs),
            64,
            0x40,
            1 << 20,
            &mut descs,
            0,
        )
        .unwrap();
        assert_eq!(c.count, 1);
        assert_eq!((descs[0].src(), descs[0].dst()), (0x40, 0x8000));
    }

    #[test]
    fn pages_become_linked_descriptors_with_advancing_fpga_address() {
        let segs: Vec<Segment> = (0..17)
            .map(|i| Segment {
                addr: 0x100000 + i * 0x3000,
                len: 0x1000,
            })
            .collect();
        let (d, c) = run(&segs, 0x10, 0x10000, 0x20000, 128, xdma::DESC_LEN_MAX);
        assert_eq!((c.count, c.bytes), (17, 0x10000));
        assert_eq!(fetch_order(&d, 0x20000, &c), (0..17).collect::<Vec<_>>());
        assert_eq!(d[0].src(), 0x100010);
        assert_eq!(d[0].len, 0xff0);
        assert_eq!(d[1].dst(), 0x100 + 0xff0);
        assert_eq!(d[16].len, 0x10);
        let sum: u64 = d[..17].iter().map(|x| u64::from(x.len)).sum();
        assert_eq!(sum, 0x10000);
    }

    #[test]
    fn blocks_split_at_64_and_at_4k_boundaries() {
        let segs: Vec<Segment> = (0..300)
            .map(|i| Segment {
                addr: i * 0x2000,
                len: 8,
            })
            .collect();
        // A base 0x60 before a 4 KiB boundary: the first block holds 3 descriptors.
        let base = 0x4_0000 - 0x60;
        let (d, c) = run(&segs, 0, 300 * 8, base, 300, xdma::DESC_LEN_MAX);
        assert_eq!(c.first_adj, 2);
        assert_eq!(fetch_order(&d, base, &c), (0..300).collect::<Vec<_>>());
        // After the first 3, blocks are 64 long: descriptor 2's Nxt_adj names 63 extra.
        assert_eq!(xdma::desc_next_adj(d[2].control), 63);
    }

    #[test]
    fn long_segments_split_at_max_len() {
        let segs = [Segment {
            addr: 0,
            len: 10_000,
        }];
        let (d, c) = run(&segs, 0, 10_000, 0, 8, 4096);
        assert_eq!(c.count, 3);
        assert_eq!([d[0].len, d[1].len, d[2].len], [4096, 4096, 1808]);
        assert_eq!(d[2].dst(), 0x100 + 8192);
    }

    #[test]
    fn full_descriptor_table_returns_partial_chain() {
        let segs: Vec<Segment> = (0..10)
            .map(|i| Segment {
                addr: i * 0x10000,
                len: 0x1000,
            })
            .collect();
        let (d, c) = run(&segs, 0, 0xa000, 0, 4, xdma::DESC_LEN_MAX);
        assert_eq!((c.count, c.bytes), (4, 0x4000));
        assert!(d[3].control & xdma::DESC_STOP != 0);
    }

    #[test]
    fn rejects_misaligned_table_and_bad_lengths() {
        let segs = [Segment { addr: 0, len: 8 }];
        let mut descs = [Descriptor::default(); 1];
        let b = |base, len, max, descs: &mut [Descriptor]| {
            build(Dir::H2c, &mut Cursor::new(&segs), len, 0, max, descs, base)
        };
        assert_eq!(b(0x10, 8, 64, &mut descs), Err(Errno::EINVAL));
        assert_eq!(b(0, 0, 64, &mut descs), Err(Errno::EINVAL));
        assert_eq!(b(0, 8, 0, &mut descs), Err(Errno::EINVAL));
        assert_eq!(b(0, 8, 1 << 28, &mut descs), Err(Errno::EINVAL));
        assert_eq!(b(0, 8, 64, &mut []), Err(Errno::EINVAL));
    }
}
