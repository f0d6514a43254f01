//! Checks of ioctl arguments, before anything is pinned or touched: every bad request gets its errno here.

use crate::abi;
use crate::errno::Errno;

/// Longest H2C2H copy accepted. The reference has no limit; an unbounded pin of user memory is a denial of
/// service, and 256 MiB is far beyond what a 64 KiB-BRAM card moves usefully in one call.
pub const MAX_H2C2H_LEN: u64 = 256 << 20;

/// Highest user address a buffer may reach. Both x86-64 (47-bit) and arm64 (48-bit) user spaces fit; the
/// kernel's own pinning checks the real limit, this only keeps arithmetic from overflowing.
pub const USER_ADDR_LIMIT: u64 = 1 << 56;

/// Host side of a transfer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Host {
    /// Ordinary user memory at this virtual address.
    User(u64),
    /// A CUDA surface pinned with PIN_CUDA.
    Cuda(u32),
}

/// A checked one-direction transfer (H2C or C2H).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OneWay {
    /// Host memory.
    pub host: Host,
    /// Card (AXI) address: an offset in FPGA RAM, or the stream window's address.
    pub fpga: u64,
    /// Bytes.
    pub len: u64,
    /// Timed by the card's clock (`*_CARD_TIME`).
    pub card_time: bool,
}

/// A checked host -> FPGA -> host copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoundTrip {
    /// Source.
    pub src: Host,
    /// Destination.
    pub dst: Host,
    /// Bytes.
    pub len: u64,
}

fn host(field: u64, cuda: bool, len: u64) -> Result<Host, Errno> {
    if cuda {
        // Handles are small non-negative ints; anything wider cannot name one.
        return u32::try_from(field)
            .ok()
            .filter(|h| *h <= i32::MAX as u32)
            .map(Host::Cuda)
            .ok_or(Errno::EINVAL);
    }
    match field.checked_add(len) {
        Some(end) if end <= USER_ADDR_LIMIT => Ok(Host::User(field)),
        _ => Err(Errno::EFAULT),
    }
}

/// What a one-way transfer is checked against: the card's RAM and whether its design has the stream block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Card {
    /// Bytes of FPGA RAM.
    pub ram: u64,
    /// The ID block has `CAP_STREAM`.
    pub stream: bool,
}

/// The card (AXI) address of a one-way transfer's device side: `offset` into the RAM, or with `stream` the
/// stream window, whose address is the block's, not the caller's (`offset` must be 0).
fn card_addr(offset: u64, len: u64, stream: bool, card: &Card) -> Result<u64, Errno> {
    if stream {
        if !card.stream {
            return Err(Errno::EOPNOTSUPP);
        }
        if offset != 0 || len == 0 || len % abi::STREAM_ALIGN != 0 || len > MAX_H2C2H_LEN {
            return Err(Errno::EINVAL);
        }
        return Ok(crate::stream::WINDOW_AXI_ADDR);
    }
    if len == 0 || len > card.ram || offset > card.ram - len {
        return Err(Errno::EINVAL);
    }
    Ok(offset)
}

/// Checks PICOEVB_IOC_H2C_DMA against `card`.
pub fn h2c(req: &abi::H2cDma, card: &Card) -> Result<OneWay, Errno> {
    if req.flags & !abi::H2C_FLAGS != 0 {
        return Err(Errno::EINVAL);
    }
    let fpga = card_addr(req.dst, req.len, req.flags & abi::H2C_DST_STREAM != 0, card)?;
    Ok(OneWay {
        host: host(req.src, req.flags & abi::H2C_SRC_CUDA != 0, req.len)?,
        fpga,
        len: req.len,
        card_time: req.flags & abi::H2C_CARD_TIME != 0,
    })
}

/// Checks PICOEVB_IOC_C2H_DMA against `card`.
pub fn c2h(req: &abi::C2hDma, card: &Card) -> Result<OneWay, Errno> {
    if req.flags & !abi::C2H_FLAGS != 0 {
        return Err(Errno::EINVAL);
    }
    let fpga = card_addr(req.src, req.len, req.flags & abi::C2H_SRC_STREAM != 0, card)?;
    Ok(OneWay {
        host: host(req.dst, req.flags & abi::C2H_DST_CUDA != 0, req.len)?,
        fpga,
        len: req.len,
        card_time: req.flags & abi::C2H_CARD_TIME != 0,
    })
}

/// Checks PICOEVB_IOC_H2C2H_DMA.
pub fn h2c2h(req: &abi::H2c2hDma) -> Result<RoundTrip, Errno> {
    if req.flags & !abi::H2C2H_FLAGS != 0 || req.len == 0 || req.len > MAX_H2C2H_LEN {
        return Err(Errno::EINVAL);
    }
    Ok(RoundTrip {
        src: host(req.src, req.flags & abi::H2C2H_SRC_CUDA != 0, req.len)?,
        dst: host(req.dst, req.flags & abi::H2C2H_DST_CUDA != 0, req.len)?,
        len: req.len,
    })
}

/// Largest PIN_CUDA: no request can use more of a surface (DMA through a handle starts at its `va` and
/// moves at most an H2C2H's length). Bounding it here keeps huge sizes away from the provider's page-array
/// allocation (`1 << 40` would ask kvmalloc for over INT_MAX bytes, which warns).
pub const MAX_PIN_CUDA_LEN: u64 = MAX_H2C2H_LEN;

/// Checks PICOEVB_IOC_PIN_CUDA: returns the range to pin (the shim aligns it to the GPU page size and
/// keeps the offset). A range beyond user space is EFAULT, as for every other user pointer.
pub fn pin_cuda(req: &abi::PinCuda) -> Result<(u64, u64), Errno> {
    match req.va.checked_add(req.size) {
        _ if req.size == 0 || req.size > MAX_PIN_CUDA_LEN => Err(Errno::EINVAL),
        None => Err(Errno::EINVAL),
        Some(end) if end > USER_ADDR_LIMIT => Err(Errno::EFAULT),
        Some(_) => Ok((req.va, req.size)),
    }
}

/// Checks PICOEVB_IOC_IMPORT_DMABUF: returns the fd and the window (offset, length). Whole host pages and
/// the buffer's bounds are the kernel's to check: it knows both.
pub fn import_dmabuf(req: &abi::ImportDmabuf) -> Result<(i32, u64, u64), Errno> {
    match req.offset.checked_add(req.size) {
        _ if req.flags != 0 || req.reserved != [0; 2] => Err(Errno::EINVAL),
        _ if req.size == 0 || req.size > MAX_PIN_CUDA_LEN => Err(Errno::EINVAL),
        None => Err(Errno::EINVAL),
        _ if req.fd < 0 => Err(Errno::EBADF),
        Some(_) => Ok((req.fd, req.offset, req.size)),
    }
}

/// The value PICOEVB_IOC_LED writes to the GPIO data register. The argument is the value itself (the
/// reference passes it by value); the register is 32 bits wide, so wider arguments are refused rather than
/// silently truncated.
pub fn led_value(arg: usize) -> Result<u32, Errno> {
    u32::try_from(arg).map_err(|_| Errno::EINVAL)
}

/// Pages spanned by `len` bytes at user address `addr`, and the offset into the first.
pub fn page_span(addr: u64, len: u64, page_size: u64) -> (u64, u64) {
    let first = addr & !(page_size - 1);
    let end = (addr + len).div_ceil(page_size) * page_size;
    ((end - first) / page_size, addr - first)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(src: u64, dst: u64, len: u64, flags: u64) -> Result<OneWay, Errno> {
        h2c(
            &abi::H2cDma {
                src,
                dst,
                len,
                flags,
                dma_time_ns: 0,
            },
            &CARD,
        )
    }

    const CARD: Card = Card {
        ram: 65536,
        stream: false,
    };
    const STREAM_CARD: Card = Card {
        ram: 65536,
        stream: true,
    };

    #[test]
    fn h2c_accepts_the_whole_ram_and_odd_offsets() {
        assert_eq!(
            h(0x1000, 0, 65536, 0),
            Ok(OneWay {
                host: Host::User(0x1000),
                fpga: 0,
                len: 65536,
                card_time: false
            })
        );
        assert_eq!(h(0x1001, 65535, 1, 0).map(|o| o.fpga), Ok(65535));
    }

    #[test]
    fn h2c_rejects_bad_ranges_and_flags() {
        assert_eq!(h(0x1000, 0, 0, 0), Err(Errno::EINVAL));
        assert_eq!(h(0x1000, 1, 65536, 0), Err(Errno::EINVAL));
        assert_eq!(h(0x1000, 65536, 1, 0), Err(Errno::EINVAL));
        assert_eq!(h(0x1000, u64::MAX, 2, 0), Err(Errno::EINVAL));
        assert_eq!(h(0x1000, 0, u64::MAX, 0), Err(Errno::EINVAL));
        assert_eq!(h(0x1000, 0, 16, 1 << 5), Err(Errno::EINVAL));
        assert_eq!(h(u64::MAX - 4, 0, 16, 0), Err(Errno::EFAULT));
        assert_eq!(
            h(0x1000, 0, 16, abi::H2C_CARD_TIME).map(|o| o.card_time),
            Ok(true)
        );
    }

    #[test]
    fn cuda_handles_must_fit_an_int() {
        assert_eq!(
            h(7, 0, 16, abi::H2C_SRC_CUDA).map(|o| o.host),
            Ok(Host::Cuda(7))
        );
        assert_eq!(h(1 << 31, 0, 16, abi::H2C_SRC_CUDA), Err(Errno::EINVAL));
        assert_eq!(h(1 << 32, 0, 16, abi::H2C_SRC_CUDA), Err(Errno::EINVAL));
    }

    #[test]
    fn c2h_reads_dst_first() {
        let r = c2h(
            &abi::C2hDma {
                dst: 0x5000,
                src: 8,
                len: 8,
                flags: 0,
                dma_time_ns: 0,
            },
            &CARD,
        );
        assert_eq!(
            r,
            Ok(OneWay {
                host: Host::User(0x5000),
                fpga: 8,
                len: 8,
                card_time: false
            })
        );
        let c = |flags| {
            c2h(
                &abi::C2hDma {
                    dst: 0x5000,
                    src: 8,
                    len: 8,
                    flags,
                    dma_time_ns: 0,
                },
                &CARD,
            )
        };
        assert_eq!(c(8), Err(Errno::EINVAL));
        assert_eq!(c(abi::C2H_CARD_TIME).map(|x| x.card_time), Ok(true));
    }

    #[test]
    fn stream_transfers_need_the_block_and_whole_beats_and_name_no_offset() {
        let c = |src, len, card: &Card| {
            c2h(
                &abi::C2hDma {
                    dst: 0x5000,
                    src,
                    len,
                    flags: abi::C2H_SRC_STREAM,
                    dma_time_ns: 0,
                },
                card,
            )
        };
        assert_eq!(
            c(0, 1 << 20, &STREAM_CARD),
            Ok(OneWay {
                host: Host::User(0x5000),
                fpga: crate::stream::WINDOW_AXI_ADDR,
                len: 1 << 20,
                card_time: false
            }),
            "not bounded by the RAM"
        );
        assert_eq!(c(0, 4096, &CARD), Err(Errno::EOPNOTSUPP));
        assert_eq!(c(8, 4096, &STREAM_CARD), Err(Errno::EINVAL));
        assert_eq!(c(0, 4100, &STREAM_CARD), Err(Errno::EINVAL));
        assert_eq!(c(0, 0, &STREAM_CARD), Err(Errno::EINVAL));
        assert_eq!(c(0, MAX_H2C2H_LEN + 8, &STREAM_CARD), Err(Errno::EINVAL));
        let h = |dst, len| {
            h2c(
                &abi::H2cDma {
                    src: 0x1000,
                    dst,
                    len,
                    flags: abi::H2C_DST_STREAM | abi::H2C_SRC_CUDA,
                    dma_time_ns: 0,
                },
                &STREAM_CARD,
            )
        };
        assert_eq!(
            h(0, 256).map(|o| (o.host, o.fpga)),
            Ok((Host::Cuda(0x1000), crate::stream::WINDOW_AXI_ADDR))
        );
        assert_eq!(h(64, 256), Err(Errno::EINVAL));
    }

    #[test]
    fn h2c2h_bounds() {
        let rt = |len, flags| {
            h2c2h(&abi::H2c2hDma {
                src: 0x1000,
                dst: 0x2000,
                len,
                flags,
                dma_time_ns: 0,
            })
        };
        assert!(rt(MAX_H2C2H_LEN, 0).is_ok());
        assert_eq!(rt(MAX_H2C2H_LEN + 1, 0), Err(Errno::EINVAL));
        assert_eq!(rt(0, 0), Err(Errno::EINVAL));
        assert_eq!(rt(8, 4), Err(Errno::EINVAL));
        assert_eq!(
            rt(8, 3).map(|r| (r.src, r.dst)),
            Ok((Host::Cuda(0x1000), Host::Cuda(0x2000)))
        );
    }

    #[test]
    fn import_dmabuf_checks_what_the_kernel_need_not() {
        let ok = abi::ImportDmabuf {
            fd: 3,
            offset: 4096,
            size: 8192,
            ..Default::default()
        };
        let p = |f: &dyn Fn(&mut abi::ImportDmabuf)| {
            let mut a = ok;
            f(&mut a);
            import_dmabuf(&a)
        };
        assert_eq!(p(&|_| {}), Ok((3, 4096, 8192)));
        assert_eq!(p(&|a| a.flags = 1), Err(Errno::EINVAL));
        assert_eq!(p(&|a| a.reserved[1] = 1), Err(Errno::EINVAL));
        assert_eq!(p(&|a| a.size = 0), Err(Errno::EINVAL));
        assert_eq!(p(&|a| a.size = MAX_PIN_CUDA_LEN + 4096), Err(Errno::EINVAL));
        assert_eq!(p(&|a| a.offset = u64::MAX), Err(Errno::EINVAL));
        assert_eq!(p(&|a| a.fd = -1), Err(Errno::EBADF));
        // Whole pages are the kernel's check (it knows the page size): passed through.
        assert_eq!(p(&|a| a.offset = 1), Ok((3, 1, 8192)));
    }

    #[test]
    fn pin_cuda_ranges() {
        let p = |va, size| {
            pin_cuda(&abi::PinCuda {
                va,
                size,
                handle: 0,
                pad: 0,
            })
        };
        assert_eq!(p(0x1001, 4095), Ok((0x1001, 4095)));
        assert_eq!(p(0x1000, 0), Err(Errno::EINVAL));
        assert_eq!(p(u64::MAX, 2), Err(Errno::EINVAL));
        assert_eq!(p(USER_ADDR_LIMIT, 1), Err(Errno::EFAULT));
        assert_eq!(p(0xffff_8880_0000_0000, 0x10000), Err(Errno::EFAULT));
        assert_eq!(p(0x1000, MAX_PIN_CUDA_LEN), Ok((0x1000, MAX_PIN_CUDA_LEN)));
        assert_eq!(p(0x1000, MAX_PIN_CUDA_LEN + 1), Err(Errno::EINVAL));
        assert_eq!(p(0x1000, 1 << 40), Err(Errno::EINVAL));
    }

    #[test]
    fn led_and_page_span() {
        assert_eq!(led_value(5), Ok(5));
        assert_eq!(led_value(usize::MAX), Err(Errno::EINVAL));
        assert_eq!(page_span(0x1fff, 2, 4096), (2, 0xfff));
        assert_eq!(page_span(0x1000, 4096, 4096), (1, 0));
        assert_eq!(page_span(0x1001, 65536, 4096), (17, 1));
    }
}
