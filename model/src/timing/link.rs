//! PCIe Gen2 x1 link arithmetic: how many bytes a DMA puts on each direction of the link, and how long
//! that takes. Pure functions of [`Params`], pinned by host tests.
//!
//! Sources (docs/perf.md has the full table):
//! * line rate: PCIe 2.0, 5 GT/s per lane with 8b/10b coding = 500 MB/s per direction on x1 (PicoEVB
//!   README: "PCIe x1, gen 2 (500MB/s)"), i.e. 2 ns per byte on the wire;
//! * TLP framing on Gen1/2: STP (1 symbol) + sequence number (2) + header + LCRC (4) + END (1): 8 bytes
//!   plus a 12-byte (3DW) or 16-byte (4DW, 64-bit address) header. Memory writes and read requests to
//!   host memory above 4 GiB use 4DW headers (24 bytes of overhead); completions always 3DW (20 bytes);
//! * a DLLP (Ack, UpdateFC) is 8 bytes on the wire (SDP + 6 + END) and travels opposite to the TLPs it
//!   acknowledges, so it costs the other direction, never the data's own;
//! * a TLP never crosses a 4 KiB host address boundary; write TLPs carry at most MPS bytes, read requests
//!   ask for at most MRRS bytes, and the completer splits read data at RCB-aligned boundaries (`cpl_bytes`,
//!   the size of the completions it returns).

use picoevb_regs::xdma::Dir;

/// Wire bytes per TLP beyond the header: STP, sequence number, LCRC, END.
pub const TLP_FRAMING: u64 = 8;
/// 4DW header: memory write and read request with a 64-bit address.
pub const HDR_4DW: u64 = 16;
/// 3DW header: completions.
pub const HDR_3DW: u64 = 12;
/// One DLLP on the wire.
pub const DLLP_BYTES: u64 = 8;
/// A TLP never crosses this host address boundary.
pub const TLP_BOUNDARY: u64 = 4096;

/// The link and host parameters of the timing model. [`Params::default`] is [`Profile::Jetson`]: the PicoEVB
/// (Gen2 x1) behind a Jetson root port, which L4T programs to MPS 256 / MRRS 512. [`Profile::PcieReset`]
/// keeps the PCIe reset values (MPS 128 / MRRS 512) and takes what the OS wrote into the device control
/// register when Run rises, as a generic Linux host leaves them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// Wire time of one byte in picoseconds: 2000 ps = 500 MB/s (5 GT/s, 8b/10b, x1).
    pub ps_per_byte: u64,
    /// Max payload size of a write TLP (bytes).
    pub mps: u64,
    /// Max read request size (bytes).
    pub mrrs: u64,
    /// 1: MPS and MRRS are what the OS wrote into the device control register when Run rose, instead of
    /// `mps`/`mrrs`. 0 in the Jetson profile: the bench's guest cannot program MPS 256 (QEMU's root port
    /// supports 128 only), so the profile stands for what L4T programs.
    pub os_payload: u64,
    /// Payload of each read completion the host returns (its read completion boundary split).
    pub cpl_bytes: u64,
    /// DLLPs (Ack or UpdateFC) the receiver sends back per 1000 TLPs received.
    pub dllps_per_1000_tlps: u64,
    /// Host memory read latency seen by a device read request, request out to first completion back (ns).
    pub read_latency_ns: u64,
    /// Read requests the H2C engine keeps outstanding (tags).
    pub read_tags: u64,
    /// From the MSI leaving the card to the driver's thread running after the wake-up (ns).
    pub irq_latency_ns: u64,
    /// A CPU read of a BAR register: a non-posted round trip over the link (ns).
    pub mmio_read_ns: u64,
    /// A CPU write of a BAR register (posted; ns).
    pub mmio_write_ns: u64,
}

/// The named starting points of [`Params`] (`--timing NAME[,key=value...]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// The default: MPS 256 / MRRS 512 as L4T's root port programs them, whatever the guest wrote.
    Jetson,
    /// The PCIe reset values, MPS 128 / MRRS 512, overridden by what the OS programs (the pessimistic corner).
    PcieReset,
}

impl Profile {
    /// Every profile with its name on the command line and the control channel.
    pub const ALL: [(&'static str, Profile); 2] = [
        ("jetson", Profile::Jetson),
        ("pcie-reset", Profile::PcieReset),
    ];

    /// The profile called `name`.
    pub fn named(name: &str) -> Option<Profile> {
        Self::ALL.iter().find(|(n, _)| *n == name).map(|(_, p)| *p)
    }

    /// Its parameters.
    pub fn params(self) -> Params {
        let reset = Params {
            ps_per_byte: 2000,
            mps: 128,
            mrrs: 512,
            os_payload: 1,
            cpl_bytes: 64,
            dllps_per_1000_tlps: 500,
            read_latency_ns: 1000,
            read_tags: 32,
            irq_latency_ns: 5000,
            mmio_read_ns: 1000,
            mmio_write_ns: 60,
        };
        match self {
            Profile::PcieReset => reset,
            Profile::Jetson => Params {
                mps: 256,
                os_payload: 0,
                ..reset
            },
        }
    }
}

impl Default for Params {
    fn default() -> Self {
        Profile::Jetson.params()
    }
}

impl Params {
    /// The PCIe reset profile's parameters ([`Profile::PcieReset`]).
    pub fn pcie_reset() -> Self {
        Profile::PcieReset.params()
    }

    /// MPS and MRRS for a run, given what the OS programmed.
    pub fn payload(&self, os_mps: u64, os_mrrs: u64) -> (u64, u64) {
        if self.os_payload != 0 {
            (os_mps, os_mrrs)
        } else {
            (self.mps, self.mrrs)
        }
    }
}

/// What one direction of a DMA puts on the wire.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wire {
    /// Payload bytes.
    pub payload: u64,
    /// TLPs carrying the payload (writes, or read completions).
    pub data_tlps: u64,
    /// TLPs going the other way (read requests); 0 for writes.
    pub request_tlps: u64,
    /// Bytes on the data's direction: payload, headers, framing.
    pub data_bytes: u64,
    /// Bytes on the other direction: read requests and the DLLPs acknowledging the data TLPs.
    pub reverse_bytes: u64,
}

impl Wire {
    /// Adds `other` to this.
    pub fn add(&mut self, other: &Wire) {
        self.payload += other.payload;
        self.data_tlps += other.data_tlps;
        self.request_tlps += other.request_tlps;
        self.data_bytes += other.data_bytes;
        self.reverse_bytes += other.reverse_bytes;
    }
}

/// Pieces `[addr, addr + len)` splits into at multiples of `unit` (a power of two dividing 4 KiB, or a
/// multiple of it, so 4 KiB boundaries are respected too).
pub fn pieces(addr: u64, len: u64, unit: u64) -> u64 {
    if len == 0 {
        return 0;
    }
    let unit = unit.clamp(1, TLP_BOUNDARY);
    let first = addr / unit;
    let last = (addr + len - 1) / unit;
    last - first + 1
}

impl Params {
    /// Checks values a user may pass; zero sizes or rates would divide by zero.
    pub fn validate(&self) -> Result<(), String> {
        for (name, v) in [
            ("ps_per_byte", self.ps_per_byte),
            ("mps", self.mps),
            ("mrrs", self.mrrs),
            ("cpl_bytes", self.cpl_bytes),
            ("read_tags", self.read_tags),
        ] {
            if v == 0 {
                return Err(format!("timing parameter {name} must be > 0"));
            }
        }
        if self.os_payload > 1 {
            return Err(format!(
                "timing parameter os_payload must be 0 or 1, not {}",
                self.os_payload
            ));
        }
        for (name, v) in [
            ("mps", self.mps),
            ("mrrs", self.mrrs),
            ("cpl_bytes", self.cpl_bytes),
        ] {
            if !v.is_power_of_two() || v > TLP_BOUNDARY {
                return Err(format!(
                    "timing parameter {name} must be a power of two up to 4096, not {v}"
                ));
            }
        }
        Ok(())
    }

    fn dllp_bytes(&self, tlps: u64) -> u64 {
        (tlps * self.dllps_per_1000_tlps).div_ceil(1000) * DLLP_BYTES
    }

    /// The wire traffic of moving `len` bytes at host address `host` in direction `dir`.
    pub fn wire(&self, dir: Dir, host: u64, len: u64) -> Wire {
        match dir {
            // Posted memory writes of at most MPS bytes.
            Dir::C2h => {
                let tlps = pieces(host, len, self.mps);
                Wire {
                    payload: len,
                    data_tlps: tlps,
                    request_tlps: 0,
                    data_bytes: len + tlps * (HDR_4DW + TLP_FRAMING),
                    reverse_bytes: self.dllp_bytes(tlps),
                }
            }
            // Read requests of at most MRRS go up; completions of `cpl_bytes` come down.
            Dir::H2c => {
                let requests = pieces(host, len, self.mrrs);
                let cpls = pieces(host, len, self.cpl_bytes.min(self.mps));
                Wire {
                    payload: len,
                    data_tlps: cpls,
                    request_tlps: requests,
                    data_bytes: len + cpls * (HDR_3DW + TLP_FRAMING),
                    reverse_bytes: requests * (HDR_4DW + TLP_FRAMING) + self.dllp_bytes(cpls),
                }
            }
        }
    }

    /// Nanoseconds `bytes` take on one direction of the link (rounded up).
    pub fn wire_ns(&self, bytes: u64) -> u64 {
        (bytes * self.ps_per_byte).div_ceil(1000)
    }

    /// The time the data phase of `w` takes in direction `dir`, alone on the link: its wire time, or for
    /// H2C the outstanding-read bound (tags × MRRS per read latency) if that is slower. Both directions
    /// are independent (full duplex), so the other engine's traffic does not slow this one down; the
    /// reverse bytes it causes are counted but not charged (docs/perf.md says how small they are).
    pub fn data_ns(&self, dir: Dir, w: &Wire) -> u64 {
        let wire = self.wire_ns(w.data_bytes);
        match dir {
            Dir::C2h => wire,
            Dir::H2c => {
                let window = self.read_tags * self.mrrs;
                let latency_bound = (w.payload * self.read_latency_ns).div_ceil(window);
                wire.max(latency_bound)
            }
        }
    }

    /// Fetching a block of `count` adjacent descriptors (32 bytes each): one read request, its latency,
    /// and the completions' wire time.
    pub fn fetch_ns(&self, count: u64) -> u64 {
        let bytes = count * 32;
        let cpls = pieces(0, bytes, self.cpl_bytes.min(self.mps));
        self.read_latency_ns + self.wire_ns(bytes + cpls * (HDR_3DW + TLP_FRAMING))
    }

    /// A 4-byte posted write from the card (poll-mode write-back, MSI message).
    pub fn small_write_ns(&self) -> u64 {
        self.wire_ns(4 + HDR_4DW + TLP_FRAMING)
    }

    /// The payload rate a long, aligned stream reaches in `dir` alone: the ceiling the report compares
    /// against, in bytes per microsecond (= MB/s).
    pub fn ceiling_mbps(&self, dir: Dir) -> f64 {
        // A long aligned stream: a whole number of 4 KiB pages.
        let len = 1 << 20;
        let w = self.wire(dir, 0, len);
        len as f64 * 1000.0 / self.data_ns(dir, &w) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_split_at_aligned_boundaries() {
        assert_eq!(pieces(0, 0, 128), 0);
        assert_eq!(pieces(0, 1, 128), 1);
        assert_eq!(pieces(0, 128, 128), 1);
        assert_eq!(pieces(0, 129, 128), 2);
        assert_eq!(pieces(127, 2, 128), 2, "crosses one boundary");
        assert_eq!(pieces(64, 128, 128), 2);
        assert_eq!(pieces(0, 65536, 128), 512);
        // A read request of MRRS 4096 still never crosses a 4 KiB boundary.
        assert_eq!(pieces(2048, 4096, 4096), 2);
        assert_eq!(pieces(2048, 4096, 8192), 2, "unit is capped at 4 KiB");
    }

    #[test]
    fn c2h_64k_at_mps_128_takes_what_the_formula_says() {
        let p = Params::pcie_reset();
        let w = p.wire(Dir::C2h, 0x1000, 65536);
        // 512 write TLPs of 128 bytes, each with a 16-byte header and 8 bytes of framing.
        assert_eq!(w.data_tlps, 512);
        assert_eq!(w.data_bytes, 65536 + 512 * 24);
        // 500 DLLPs per 1000 TLPs, 8 bytes each, on the other direction.
        assert_eq!(w.reverse_bytes, 256 * 8);
        // 77824 bytes at 2 ns each.
        assert_eq!(p.data_ns(Dir::C2h, &w), 155_648);
        // 65536 / 155.648 us = 421.05 MB/s = 500 * 128 / 152.
        let ceiling = p.ceiling_mbps(Dir::C2h);
        assert!((ceiling - 500.0 * 128.0 / 152.0).abs() < 0.01, "{ceiling}");
    }

    #[test]
    fn c2h_at_mps_256_is_faster() {
        let p = Params {
            mps: 256,
            ..Params::pcie_reset()
        };
        let w = p.wire(Dir::C2h, 0, 65536);
        assert_eq!(w.data_tlps, 256);
        assert_eq!(p.data_ns(Dir::C2h, &w), (65536 + 256 * 24) * 2);
    }

    #[test]
    fn h2c_64k_counts_requests_and_completions() {
        let p = Params::pcie_reset();
        let w = p.wire(Dir::H2c, 0, 65536);
        assert_eq!(w.request_tlps, 128, "MRRS 512");
        assert_eq!(w.data_tlps, 1024, "64-byte completions");
        assert_eq!(w.data_bytes, 65536 + 1024 * 20);
        assert_eq!(w.reverse_bytes, 128 * 24 + 512 * 8);
        assert_eq!(p.data_ns(Dir::H2c, &w), 172_032);
        let ceiling = p.ceiling_mbps(Dir::H2c);
        assert!((ceiling - 500.0 * 64.0 / 84.0).abs() < 0.01, "{ceiling}");
    }

    #[test]
    fn h2c_is_latency_bound_with_few_tags() {
        // 2 tags x 512 bytes per 10 us: 102.4 MB/s, slower than the wire.
        let p = Params {
            read_tags: 2,
            read_latency_ns: 10_000,
            ..Params::pcie_reset()
        };
        let w = p.wire(Dir::H2c, 0, 65536);
        assert_eq!(p.data_ns(Dir::H2c, &w), 640_000);
    }

    #[test]
    fn unaligned_host_addresses_cost_extra_tlps() {
        let p = Params::pcie_reset();
        assert_eq!(p.wire(Dir::C2h, 0x1040, 4096).data_tlps, 33);
        assert_eq!(p.wire(Dir::C2h, 0x1000, 4096).data_tlps, 32);
    }

    #[test]
    fn fetch_and_small_writes() {
        let p = Params::pcie_reset();
        // One descriptor: 1 us latency + (32 + 20) bytes.
        assert_eq!(p.fetch_ns(1), 1000 + 104);
        // 64 descriptors: 2048 bytes in 32 completions.
        assert_eq!(p.fetch_ns(64), 1000 + (2048 + 32 * 20) * 2);
        assert_eq!(p.small_write_ns(), 56);
    }

    #[test]
    fn bad_parameters_are_refused() {
        assert!(Params::pcie_reset().validate().is_ok());
        let zero = Params {
            mps: 0,
            ..Params::pcie_reset()
        };
        assert!(zero.validate().unwrap_err().contains("mps must be > 0"));
        let odd = Params {
            mrrs: 384,
            ..Params::pcie_reset()
        };
        assert!(odd.validate().unwrap_err().contains("power of two"));
    }
}
