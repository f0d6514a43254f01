//! Heap buffers at a chosen offset from a page boundary, with guard bytes around them, so a test can place a
//! DMA source or destination at any alignment and catch a driver that writes outside it.

use std::alloc::{Layout, alloc, dealloc};

const PAGE: usize = 4096;
/// Guard bytes checked after the data (before it, the whole lead-in is guard).
const TAIL_GUARD: usize = 256;

/// Guard byte at position `i` of the allocation: a pattern, not a constant, so a shifted write shows up.
fn guard_byte(i: usize) -> u8 {
    (i as u8).wrapping_mul(37) ^ 0xa5
}

/// `len` bytes starting `misalign` bytes after a page boundary (plus whole pages of lead-in), from the
/// process heap (glibc malloc, like a user application's buffers).
pub struct GuardedBuf {
    base: *mut u8,
    layout: Layout,
    start: usize,
    len: usize,
}

impl GuardedBuf {
    /// A buffer of `len` bytes whose first byte is at `misalign % 4096` within its page, filled with zeros;
    /// everything around it is guard.
    pub fn new(len: usize, misalign: usize) -> Self {
        let start = PAGE + misalign % PAGE;
        let size = start + len + TAIL_GUARD;
        let layout = Layout::from_size_align(size, PAGE).expect("buffer layout");
        // SAFETY: `size` is non-zero (it includes a page of lead-in).
        let base = unsafe { alloc(layout) };
        assert!(!base.is_null(), "out of memory allocating {size} bytes");
        let mut b = GuardedBuf {
            base,
            layout,
            start,
            len,
        };
        for (i, byte) in b.whole_mut().iter_mut().enumerate() {
            *byte = guard_byte(i);
        }
        b.as_mut_slice().fill(0);
        b
    }

    fn whole_mut(&mut self) -> &mut [u8] {
        // SAFETY: `base` is a live allocation of `layout.size()` bytes owned by `self`.
        unsafe { std::slice::from_raw_parts_mut(self.base, self.layout.size()) }
    }

    fn whole(&self) -> &[u8] {
        // SAFETY: as in `whole_mut`, shared.
        unsafe { std::slice::from_raw_parts(self.base, self.layout.size()) }
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.whole()[self.start..self.start + self.len]
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        let (s, l) = (self.start, self.len);
        &mut self.whole_mut()[s..s + l]
    }

    /// Checks that every guard byte still holds its pattern; describes the first damage found.
    pub fn check_guards(&self) -> Result<(), String> {
        let whole = self.whole();
        let end = self.start + self.len;
        let bad = (0..self.start)
            .chain(end..whole.len())
            .find(|&i| whole[i] != guard_byte(i));
        match bad {
            None => Ok(()),
            Some(i) => {
                let rel = i as isize - self.start as isize;
                Err(format!(
                    "guard byte overwritten at {rel:+} from the buffer start (buffer len {}): {:#04x}, \
                     expected {:#04x}",
                    self.len,
                    whole[i],
                    guard_byte(i)
                ))
            }
        }
    }
}

impl Drop for GuardedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this very layout, freed once.
        unsafe { dealloc(self.base, self.layout) }
    }
}

/// Compares `got` with `want` and describes the first mismatch and how many bytes differ.
pub fn compare(what: &str, want: &[u8], got: &[u8]) -> Result<(), String> {
    if want.len() != got.len() {
        return Err(format!("{what}: length {} != {}", got.len(), want.len()));
    }
    match want.iter().zip(got).position(|(a, b)| a != b) {
        None => Ok(()),
        Some(first) => {
            let n = want.iter().zip(got).filter(|(a, b)| a != b).count();
            Err(format!(
                "{what}: {n} of {} bytes differ, first at {first}: got {:#04x}, expected {:#04x}",
                want.len(),
                got[first],
                want[first]
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alignment_and_guards() {
        for mis in [0, 1, 3, 4095] {
            let mut b = GuardedBuf::new(100, mis);
            assert_eq!(b.as_slice().as_ptr() as usize % PAGE, mis);
            b.as_mut_slice().fill(0xff);
            assert!(b.check_guards().is_ok());
            let i = b.start + 100;
            b.whole_mut()[i] ^= 1;
            assert!(b.check_guards().unwrap_err().contains("+100"));
        }
        let mut b = GuardedBuf::new(10, 5);
        let i = b.start - 1;
        b.whole_mut()[i] ^= 1;
        assert!(b.check_guards().unwrap_err().contains("-1"));
    }

    #[test]
    fn compare_reports_first_mismatch() {
        assert!(compare("x", &[1, 2, 3], &[1, 2, 3]).is_ok());
        let e = compare("x", &[1, 2, 3], &[1, 9, 8]).unwrap_err();
        assert!(e.contains("2 of 3 bytes differ, first at 1"), "{e}");
    }
}
