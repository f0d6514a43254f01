//! Physically contiguous runs of a buffer, from /proc/self/pagemap: the reference driver issues one
//! descriptor (one engine run, one interrupt) per bus-contiguous range, so to do a transfer the reference
//! scheme's way through gdr's ABI, the report issues one ioctl per such run. Without an IOMMU (the bench)
//! bus addresses are physical addresses.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};

const PAGE: u64 = 4096;
/// pagemap entry: bit 63 present, bits 0..54 the page frame number (zero without CAP_SYS_ADMIN).
const PRESENT: u64 = 1 << 63;
const PFN_MASK: u64 = (1 << 55) - 1;

/// `(offset, len)` pieces of `[addr, addr + len)` that are physically contiguous; every page must be
/// resident (touch the buffer first). Err if pagemap cannot tell (not root, page not present).
pub fn contiguous_runs(addr: u64, len: u64) -> Result<Vec<(u64, u64)>, String> {
    if len == 0 {
        return Ok(Vec::new());
    }
    let first = addr / PAGE;
    let last = (addr + len - 1) / PAGE;
    let mut f = File::open("/proc/self/pagemap").map_err(|e| format!("open pagemap: {e}"))?;
    f.seek(SeekFrom::Start(first * 8))
        .map_err(|e| format!("seek pagemap: {e}"))?;
    let mut raw = vec![0u8; ((last - first + 1) * 8) as usize];
    f.read_exact(&mut raw)
        .map_err(|e| format!("read pagemap: {e}"))?;
    let pfns: Vec<u64> = raw
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .map(|e| if e & PRESENT != 0 { e & PFN_MASK } else { 0 })
        .collect();
    if pfns.contains(&0) {
        return Err("pagemap shows no frame for some page (not resident, or not root)".into());
    }
    Ok(runs(addr, len, &pfns))
}

/// The runs of `[addr, addr + len)` given the frame of each page it touches.
fn runs(addr: u64, len: u64, pfns: &[u64]) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    let mut off = 0;
    for (i, &pfn) in pfns.iter().enumerate() {
        let piece = (PAGE - (addr + off) % PAGE).min(len - off);
        match out.last_mut() {
            Some(last) if i > 0 && pfns[i - 1] + 1 == pfn => last.1 += piece,
            _ => out.push((off, piece)),
        }
        off += piece;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_merge_consecutive_frames() {
        assert_eq!(
            runs(0, 3 * PAGE, &[5, 6, 9]),
            [(0, 2 * PAGE), (2 * PAGE, PAGE)]
        );
        assert_eq!(
            runs(100, PAGE, &[5, 7]),
            [(0, PAGE - 100), (PAGE - 100, 100)]
        );
        assert_eq!(runs(100, 10, &[5]), [(0, 10)]);
        assert_eq!(
            runs(0, 2 * PAGE, &[8, 7]).len(),
            2,
            "descending frames are not contiguous"
        );
    }
}
