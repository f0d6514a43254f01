//! What the C glue relies on: chains are the logic's own, the register map carries the shared definitions,
//! and the C storage of the logic's state fits it. The ioctls' dispatch is host-tested where it is written,
//! `kmod/logic/src/ioctl.rs`.

use super::surface::*;
use super::{segments::Segment, xdma};
use core::mem::size_of;
use picoevb_logic::abi;

#[test]
fn register_map_is_the_shared_one() {
    assert_eq!(PEVB_REGS.desc_len_max, xdma::DESC_LEN_MAX);
    assert_eq!(PEVB_LAYOUT.segment, 16);
    assert_eq!(PEVB_LAYOUT.descriptor as usize, xdma::DESC_SIZE);
}

#[test]
fn the_cache_glue_keeps_the_policy_in_c_storage() {
    assert!(PEVB_LAYOUT.policy_align as usize <= size_of::<u64>());
    let mut v = vec![0u64; (PEVB_LAYOUT.policy as usize).div_ceil(8)];
    let p = v.as_mut_ptr().cast::<picoevb_logic::cache_policy::Policy>();
    // SAFETY: `v` holds `PEVB_LAYOUT.policy` bytes, u64-aligned.
    unsafe { pevb_policy_init(p, 4096) };
    // SAFETY: initialised above.
    assert_eq!(unsafe { pevb_policy_entries(p) }, 0);
    // SAFETY: as above; the policy is what `Policy::new` made.
    let q = unsafe { &*p }.report();
    assert_eq!((q.entries, q.capacity, q.max_entries), (0, 64, 64));
}

#[test]
fn a_window_of_a_cached_buffer() {
    let segs = [
        Segment {
            addr: 0x1000,
            len: 0x800,
        },
        Segment {
            addr: 0x9000,
            len: 0x1000,
        },
    ];
    let mut out = [Segment { addr: 0, len: 0 }; 2];
    // SAFETY: both arrays valid for their lengths.
    let n = unsafe { pevb_segments_window(segs.as_ptr(), 2, 0x700, 0x200, out.as_mut_ptr(), 2) };
    assert_eq!(n, 2);
    assert_eq!(
        (out[0].addr, out[0].len, out[1].addr, out[1].len),
        (0x1700, 0x100, 0x9000, 0x100)
    );
    // Past the end, or more pieces than `out` holds: EINVAL.
    assert_eq!(
        // SAFETY: as above.
        unsafe { pevb_segments_window(segs.as_ptr(), 2, 0x700, 0x1200, out.as_mut_ptr(), 2) },
        -22
    );
    assert_eq!(
        // SAFETY: as above.
        unsafe { pevb_segments_window(segs.as_ptr(), 2, 0x700, 0x200, out.as_mut_ptr(), 1) },
        -22
    );
}

#[test]
fn ram_owner_goes_through_the_logic() {
    // The C glue's storage, `struct pevb_ram_owner` (PevbRamOwner): PEVB_LAYOUT.owner bytes.
    assert!(PEVB_LAYOUT.owner as usize <= 4 * 8 && PEVB_LAYOUT.owner_align <= 8);
    let mut o = core::mem::MaybeUninit::<PevbRamOwner>::uninit();
    let (mut a, mut b) = (0u64, 0u64);
    // SAFETY: `o` is initialised by pevb_ram_init before any other call; `a`/`b` are memberships.
    unsafe {
        pevb_ram_init(o.as_mut_ptr());
        let o = o.as_mut_ptr();
        assert_eq!(pevb_ram_begin(o, &mut a, 1), PEVB_RAM_SCRUB_FIRST);
        pevb_ram_scrubbed(o, true);
        pevb_ram_end(o);
        assert_eq!(pevb_ram_begin(o, &mut b, 2), -16);
        assert_eq!(pevb_ram_claim(o, &mut b, 2), -16);
        assert_eq!(pevb_ram_state(o, &mut b, 2), abi::RAM_OTHER);
        assert_eq!(pevb_ram_release(o, &mut b, 2), -16);
        pevb_ram_close(o, &mut a);
        assert_eq!(pevb_ram_state(o, &mut b, 2), abi::RAM_FREE);
        assert_eq!(pevb_ram_claim(o, &mut b, 2), PEVB_RAM_SCRUB_FIRST);
    }
}
