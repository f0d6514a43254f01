//! Bus-address segments of a pinned and DMA-mapped buffer, and a cursor that walks them in pieces.

use crate::errno::Errno;

/// One bus-contiguous range. `repr(C)`: the 5.10 module's C glue hands arrays of them to this logic.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Segment {
    /// Bus (DMA) address.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
}

/// Merges neighbours that are contiguous on the bus, in place, dropping empty segments. Returns how many
/// segments remain at the front of `segs`. Fewer segments means fewer descriptors.
pub fn coalesce(segs: &mut [Segment]) -> usize {
    let mut out = 0;
    for i in 0..segs.len() {
        let s = segs[i];
        if s.len == 0 {
            continue;
        }
        if out > 0 {
            let last = &mut segs[out - 1];
            if last.addr.checked_add(last.len) == Some(s.addr) {
                last.len += s.len;
                continue;
            }
        }
        segs[out] = s;
        out += 1;
    }
    out
}

/// Total bytes in `segs`.
pub fn total_len(segs: &[Segment]) -> u64 {
    segs.iter().map(|s| s.len).sum()
}

/// Walks a segment list front to back, handing out pieces no longer than asked for.
#[derive(Clone, Debug)]
pub struct Cursor<'a> {
    segs: &'a [Segment],
    idx: usize,
    off: u64,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `segs`.
    pub fn new(segs: &'a [Segment]) -> Self {
        Self {
            segs,
            idx: 0,
            off: 0,
        }
    }

    /// Skips `n` bytes (the offset of a user buffer into its first page, say).
    pub fn skip(&mut self, mut n: u64) -> Result<(), Errno> {
        while n > 0 {
            let seg = self.segs.get(self.idx).ok_or(Errno::EINVAL)?;
            let left = seg.len - self.off;
            if n < left {
                self.off += n;
                return Ok(());
            }
            n -= left;
            self.idx += 1;
            self.off = 0;
        }
        Ok(())
    }

    /// The next piece of at most `max` bytes, or `None` at the end.
    pub fn take(&mut self, max: u64) -> Option<Segment> {
        while let Some(seg) = self.segs.get(self.idx) {
            let left = seg.len - self.off;
            if left == 0 {
                self.idx += 1;
                self.off = 0;
                continue;
            }
            let n = left.min(max);
            let piece = Segment {
                addr: seg.addr + self.off,
                len: n,
            };
            self.off += n;
            if self.off == seg.len {
                self.idx += 1;
                self.off = 0;
            }
            return Some(piece);
        }
        None
    }

    /// Bytes left after the cursor.
    pub fn remaining(&self) -> u64 {
        let rest: u64 = self.segs.iter().skip(self.idx).map(|s| s.len).sum();
        rest - self.off
    }
}

/// The bytes `[offset, offset + len)` of the buffer `segs` describe, as segments: a cached buffer serving
/// part of itself.
pub fn window(segs: &[Segment], offset: u64, len: u64) -> Result<Window<'_>, Errno> {
    match offset.checked_add(len) {
        Some(end) if end <= total_len(segs) => {}
        _ => return Err(Errno::EINVAL),
    }
    let mut cur = Cursor::new(segs);
    cur.skip(offset)?;
    Ok(Window { cur, left: len })
}

/// Iterator returned by [`window`].
#[derive(Clone, Debug)]
pub struct Window<'a> {
    cur: Cursor<'a>,
    left: u64,
}

impl Iterator for Window<'_> {
    type Item = Segment;

    fn next(&mut self) -> Option<Segment> {
        if self.left == 0 {
            return None;
        }
        let piece = self.cur.take(self.left)?;
        self.left -= piece.len;
        Some(piece)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::vec::Vec;

    fn s(addr: u64, len: u64) -> Segment {
        Segment { addr, len }
    }

    #[test]
    fn coalesce_merges_contiguous_and_drops_empty() {
        let mut v = [
            s(0x1000, 0x1000),
            s(0x2000, 0x1000),
            s(0x5000, 0),
            s(0x9000, 0x10),
            s(0x9010, 0x20),
        ];
        let n = coalesce(&mut v);
        assert_eq!(&v[..n], &[s(0x1000, 0x2000), s(0x9000, 0x30)]);
    }

    #[test]
    fn coalesce_keeps_gaps_and_reversed_order() {
        let mut v = [s(0x2000, 0x1000), s(0x1000, 0x1000), s(0x3001, 1)];
        assert_eq!(coalesce(&mut v), 3);
    }

    #[test]
    fn coalesce_does_not_overflow_at_top_of_address_space() {
        let mut v = [s(u64::MAX - 0xfff, 0x1000), s(0, 0x1000)];
        assert_eq!(coalesce(&mut v), 2);
    }

    #[test]
    fn cursor_skips_and_splits() {
        let v = [s(0x1000, 0x1000), s(0x8000, 0x3000)];
        let mut c = Cursor::new(&v);
        c.skip(0xff0).unwrap();
        assert_eq!(c.remaining(), 0x3010);
        assert_eq!(c.take(0x2000), Some(s(0x1ff0, 0x10)));
        assert_eq!(c.take(0x2000), Some(s(0x8000, 0x2000)));
        assert_eq!(c.take(0x2000), Some(s(0xa000, 0x1000)));
        assert_eq!(c.take(0x2000), None);
        assert_eq!(c.remaining(), 0);
    }

    #[test]
    fn cursor_skip_past_end_is_an_error() {
        let v = [s(0x1000, 0x10)];
        let mut c = Cursor::new(&v);
        assert_eq!(c.skip(0x11), Err(Errno::EINVAL));
        let mut c = Cursor::new(&v);
        assert_eq!(c.skip(0x10), Ok(()));
        assert_eq!(c.take(1), None);
    }

    #[test]
    fn window_cuts_inside_and_across_segments() {
        let v = [s(0x1000, 0x1000), s(0x8000, 0x3000)];
        let w: Vec<Segment> = window(&v, 0x800, 0x1000).unwrap().collect();
        assert_eq!(w, [s(0x1800, 0x800), s(0x8000, 0x800)]);
        let w: Vec<Segment> = window(&v, 0x1100, 0x100).unwrap().collect();
        assert_eq!(w, [s(0x8100, 0x100)]);
        let whole: Vec<Segment> = window(&v, 0, 0x4000).unwrap().collect();
        assert_eq!(whole, v);
        assert_eq!(window(&v, 0x4000, 0).unwrap().count(), 0);
    }

    #[test]
    fn window_past_the_end_is_an_error() {
        let v = [s(0x1000, 0x1000)];
        assert!(window(&v, 0x800, 0x801).is_err());
        assert!(window(&v, 0x1001, 0).is_err());
        assert!(window(&v, u64::MAX, 2).is_err());
    }
}
