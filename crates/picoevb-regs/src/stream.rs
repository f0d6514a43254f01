//! The gdr stream block: a record source the C2H engine reads and a checker the H2C engine writes, so
//! streaming can be tested end to end without external I/O.
//!
//! **Data path.** The XDMA is configured AXI memory-mapped, so both ends are a DMA *window*, not an AXI stream:
//! AXI addresses with [`WINDOW_AXI_BIT`] set reach the stream block, every other address the BRAM as before
//! (still wrapping modulo 64 KiB below the window). Inside the window the address is ignored: a C2H read takes
//! the next bytes of the source's record stream, an H2C write feeds the next bytes to the checker. Transfers
//! must be multiples of 8 bytes (one 64-bit AXI beat); records are whole beats.
//!
//! **Registers** sit in BAR0 at [`BASE`] (above the ID block), decode address bits [5:2] and repeat every
//! [`REG_WINDOW`] bytes to the end of BAR0.
//!
//! **Record format** (all little-endian; `len` = [`REG_SRC_RECORD_BYTES`], a multiple of 8):
//!
//! | Offset | Size | Field |
//! |---|---|---|
//! | 0 | 4 | sequence number (0 after CLEAR, +1 per record produced, dropped ones included) |
//! | 4 | 4 | `len`, bytes of the whole record |
//! | 8 | 8 | timestamp: [`TICK_NS`] ticks since CLEAR when the record was produced |
//! | 16 | len-24 | payload: 64-bit word `k` = `sequence << 32 | k` |
//! | len-8 | 4 | CRC-32C (Castagnoli) of bytes 0..len-8 |
//! | len-4 | 4 | [`RECORD_END`] |
//!
//! CRC-32C rather than CRC-32: a larger Hamming distance at record sizes up to 4 KiB, and the ARMv8 cores of
//! every Jetson and x86 (SSE4.2) compute it in one instruction per 8 bytes, so a CPU consumer checks a record
//! at memory speed; a GPU consumer uses a table either way.
//!
//! **Source.** While enabled it produces one record every [`REG_SRC_PERIOD`] ticks into a FIFO of
//! [`FIFO_DEPTH`] records (0: a record whenever the reader wants one, never an overrun). A record produced
//! while the FIFO is full is dropped and counted in [`REG_SRC_OVERRUN`]; its sequence number is used up, so
//! the reader sees exactly as many missing numbers as the counter says. A read with no record ready waits
//! for the next one (back-pressure on the engine); a read while disabled returns zeros at once, so an engine
//! never hangs on a stopped source. A record started is always read out whole.
//!
//! **Checker.** Parses the written bytes as records: a header whose length is not valid counts in
//! [`REG_SINK_BAD_LENGTH`] (the next word is taken as a header); a record whose CRC or end marker does not
//! match counts in [`REG_SINK_CRC_ERRORS`] and is taken as the expected sequence number; a good record counts
//! in [`REG_SINK_GOOD`], and if its sequence number is not the expected one, once in [`REG_SINK_GAPS`] and by
//! the distance in [`REG_SINK_LOST`]. It expects 0 after CLEAR.

use crate::channel::Regs32;
use crate::idblock;

/// Offset of the block in BAR0: right above the ID block.
pub const BASE: usize = idblock::END;
/// The registers repeat every `REG_WINDOW` bytes from [`BASE`] to the end of BAR0.
pub const REG_WINDOW: usize = 0x40;

/// RW: [`SRC_ENABLE`]; [`SRC_CLEAR`] (write 1, reads 0).
pub const REG_SRC_CTRL: usize = 0x00;
/// RW: bytes per record, reset [`RECORD_BYTES_RESET`]; a write that is not a valid length is ignored
/// ([`record_bytes_valid`]). Applies to records read out after the write: change it while disabled.
pub const REG_SRC_RECORD_BYTES: usize = 0x04;
/// RW: ticks between records, reset 0 (on demand).
pub const REG_SRC_PERIOD: usize = 0x08;
/// RO: sequence number of the next record to be produced.
pub const REG_SRC_SEQ: usize = 0x0c;
/// RO: records read out completely.
pub const REG_SRC_SENT: usize = 0x10;
/// RO: records dropped because the FIFO was full.
pub const REG_SRC_OVERRUN: usize = 0x14;
/// RO: [`FIFO_DEPTH`].
pub const REG_SRC_DEPTH: usize = 0x18;
/// RW: [`SINK_CLEAR`] (write 1, reads 0).
pub const REG_SINK_CTRL: usize = 0x20;
/// RO: records with a good CRC and end marker.
pub const REG_SINK_GOOD: usize = 0x24;
/// RO: good records whose sequence number was not the expected one.
pub const REG_SINK_GAPS: usize = 0x28;
/// RO: sequence numbers skipped, summed over the gaps (modulo 2^32).
pub const REG_SINK_LOST: usize = 0x2c;
/// RO: records whose CRC or end marker did not match.
pub const REG_SINK_CRC_ERRORS: usize = 0x30;
/// RO: headers with an invalid length.
pub const REG_SINK_BAD_LENGTH: usize = 0x34;
/// RO: the sequence number the checker expects next.
pub const REG_SINK_EXPECT: usize = 0x38;
/// Registers 0x1c and 0x3c are reserved and read 0.
pub const REG_SLOTS: usize = REG_WINDOW / 4;

/// [`REG_SRC_CTRL`]: produce records.
pub const SRC_ENABLE: u32 = 1 << 0;
/// [`REG_SRC_CTRL`]: sequence, timestamp clock, counters and FIFO back to 0 (a record being read finishes).
pub const SRC_CLEAR: u32 = 1 << 1;
/// [`REG_SINK_CTRL`]: counters and expected sequence to 0, parser to a record start.
pub const SINK_CLEAR: u32 = 1 << 0;

/// Reset value of [`REG_SRC_RECORD_BYTES`].
pub const RECORD_BYTES_RESET: u32 = 256;
/// Smallest record: header, timestamp and trailer, no payload.
pub const RECORD_BYTES_MIN: u32 = 24;
/// Largest record.
pub const RECORD_BYTES_MAX: u32 = 4096;
/// Records the source holds before it overruns.
pub const FIFO_DEPTH: u32 = 8;
/// One tick of [`REG_SRC_PERIOD`] and of the timestamp: the 125 MHz AXI clock.
pub const TICK_NS: u64 = 8;
/// Last word of every record: "GDRS".
pub const RECORD_END: u32 = 0x4744_5253;
/// AXI address bit that selects the stream window instead of the BRAM.
pub const WINDOW_AXI_BIT: u32 = 32;
/// The first AXI (card) address of the stream window; any address with the bit set is the same port.
pub const WINDOW_AXI_ADDR: u64 = 1 << WINDOW_AXI_BIT;

/// Every register: (name, offset, writable), for generators and tests.
pub const REGISTERS: [(&str, usize, bool); 14] = [
    ("SRC_CTRL", REG_SRC_CTRL, true),
    ("SRC_RECORD_BYTES", REG_SRC_RECORD_BYTES, true),
    ("SRC_PERIOD", REG_SRC_PERIOD, true),
    ("SRC_SEQ", REG_SRC_SEQ, false),
    ("SRC_SENT", REG_SRC_SENT, false),
    ("SRC_OVERRUN", REG_SRC_OVERRUN, false),
    ("SRC_DEPTH", REG_SRC_DEPTH, false),
    ("SINK_CTRL", REG_SINK_CTRL, true),
    ("SINK_GOOD", REG_SINK_GOOD, false),
    ("SINK_GAPS", REG_SINK_GAPS, false),
    ("SINK_LOST", REG_SINK_LOST, false),
    ("SINK_CRC_ERRORS", REG_SINK_CRC_ERRORS, false),
    ("SINK_BAD_LENGTH", REG_SINK_BAD_LENGTH, false),
    ("SINK_EXPECT", REG_SINK_EXPECT, false),
];

/// Whether a BAR0 offset falls in the stream block.
pub const fn contains(bar0_offset: usize) -> bool {
    bar0_offset >= BASE
}

/// Register offset (within [`REG_WINDOW`]) that a BAR0 offset inside the block decodes to.
pub const fn decode(bar0_offset: usize) -> usize {
    bar0_offset & (REG_WINDOW - 1) & !3
}

/// Whether an AXI (card) address is in the stream window.
pub const fn in_window(axi_addr: u64) -> bool {
    axi_addr & WINDOW_AXI_ADDR != 0
}

/// Whether `len` is a record length the source accepts and the checker parses.
pub const fn record_bytes_valid(len: u32) -> bool {
    len % 8 == 0 && len >= RECORD_BYTES_MIN && len <= RECORD_BYTES_MAX
}

/// CRC-32C polynomial, bit-reflected.
pub const CRC32C_POLY: u32 = 0x82f6_3b78;

/// Feeds one 64-bit word (its 8 bytes in little-endian order) into a CRC-32C register, bit by bit: the step
/// the RTL does per beat, and the reference for [`crc32c_word`].
pub const fn crc32c_word_bitwise(mut crc: u32, word: u64) -> u32 {
    let mut i = 0;
    while i < 64 {
        let bit = ((word >> i) as u32 ^ crc) & 1;
        crc >>= 1;
        if bit != 0 {
            crc ^= CRC32C_POLY;
        }
        i += 1;
    }
    crc
}

/// CRC-32C register after one byte, for every byte value with a zero register (a byte at a time is 8 times
/// fewer steps than bit by bit: the model checks every record it serves or receives).
const CRC32C_TABLE: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                c >> 1 ^ CRC32C_POLY
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

/// Feeds one 64-bit word (its 8 bytes in little-endian order) into a CRC-32C register. Start from `!0`,
/// end with `!crc`. Same result as [`crc32c_word_bitwise`].
pub const fn crc32c_word(mut crc: u32, word: u64) -> u32 {
    let mut i = 0;
    while i < 8 {
        let b = (word >> (8 * i)) as u8;
        crc = CRC32C_TABLE[((crc ^ b as u32) & 0xff) as usize] ^ crc >> 8;
        i += 1;
    }
    crc
}

/// CRC-32C of `bytes` (whole 64-bit words; a trailing partial word is ignored).
pub fn crc32c(bytes: &[u8]) -> u32 {
    !bytes
        .chunks_exact(8)
        .fold(!0, |crc, w| crc32c_word(crc, word_at(w)))
}

fn word_at(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[..8]);
    u64::from_le_bytes(w)
}

/// The 64-bit word `index` of the record `seq` of length `len` produced at `timestamp`, given the CRC-32C
/// register after the words before it (only the last word uses it).
pub const fn record_word(seq: u32, len: u32, timestamp: u64, index: u32, crc: u32) -> u64 {
    let last = len / 8 - 1;
    if index == 0 {
        (len as u64) << 32 | seq as u64
    } else if index == 1 {
        timestamp
    } else if index < last {
        (seq as u64) << 32 | (index - 2) as u64
    } else {
        (RECORD_END as u64) << 32 | !crc as u64
    }
}

/// Writes record `seq` into `out` (its length is `out.len()`, which must be valid).
pub fn write_record(out: &mut [u8], seq: u32, timestamp: u64) {
    let len = out.len() as u32;
    debug_assert!(record_bytes_valid(len));
    let mut crc = !0;
    for (i, w) in out.chunks_exact_mut(8).enumerate() {
        let word = record_word(seq, len, timestamp, i as u32, crc);
        crc = crc32c_word(crc, word);
        w.copy_from_slice(&word.to_le_bytes());
    }
}

/// What a consumer learns from one record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    /// Sequence number.
    pub seq: u32,
    /// Bytes of the record.
    pub len: u32,
    /// Production time in [`TICK_NS`] ticks.
    pub timestamp: u64,
}

/// Why a record was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordError {
    /// The header's length is invalid or not the buffer's.
    Length(u32),
    /// CRC or end marker mismatch.
    Crc,
}

/// Checks one record in `bytes` (exactly the record) the way the checker does.
pub fn check_record(bytes: &[u8]) -> Result<Record, RecordError> {
    if bytes.len() < 8 {
        return Err(RecordError::Length(bytes.len() as u32));
    }
    let head = word_at(bytes);
    let len = (head >> 32) as u32;
    if !record_bytes_valid(len) || len as usize != bytes.len() {
        return Err(RecordError::Length(len));
    }
    let body = &bytes[..len as usize - 8];
    let tail = word_at(&bytes[len as usize - 8..]);
    if tail != (RECORD_END as u64) << 32 | crc32c(body) as u64 {
        return Err(RecordError::Crc);
    }
    Ok(Record {
        seq: head as u32,
        len,
        timestamp: word_at(&bytes[8..]),
    })
}

/// The source's configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SourceConfig {
    /// Bytes per record (valid per [`record_bytes_valid`]).
    pub record_bytes: u32,
    /// Ticks between records; 0 = on demand.
    pub period_ticks: u32,
}

/// The source's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SourceStatus {
    /// Next sequence number to be produced.
    pub seq: u32,
    /// Records read out whole.
    pub sent: u32,
    /// Records dropped on a full FIFO.
    pub overrun: u32,
}

/// The checker's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SinkStatus {
    /// Good records.
    pub good: u32,
    /// Good records out of sequence.
    pub gaps: u32,
    /// Sequence numbers skipped.
    pub lost: u32,
    /// CRC or end-marker mismatches.
    pub crc_errors: u32,
    /// Invalid headers.
    pub bad_length: u32,
    /// Next expected sequence number.
    pub expect: u32,
}

/// Why a configuration was refused before anything was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigError<E> {
    /// Not a valid record length.
    RecordBytes(u32),
    /// The register access failed.
    Access(E),
}

/// The block's registers, over BAR0.
pub struct Stream<'a, R: ?Sized> {
    regs: &'a R,
}

impl<'a, R: Regs32 + ?Sized> Stream<'a, R> {
    /// The block behind `regs` (BAR0).
    pub fn new(regs: &'a R) -> Self {
        Self { regs }
    }

    fn read(&self, reg: usize) -> Result<u32, R::Error> {
        self.regs.read32(BASE + reg)
    }

    fn write(&self, reg: usize, value: u32) -> Result<(), R::Error> {
        self.regs.write32(value, BASE + reg)
    }

    /// Stops and clears the source, then sets its configuration (it stays disabled).
    pub fn configure_source(&self, c: SourceConfig) -> Result<(), ConfigError<R::Error>> {
        if !record_bytes_valid(c.record_bytes) {
            return Err(ConfigError::RecordBytes(c.record_bytes));
        }
        let w = |reg, v| self.write(reg, v).map_err(ConfigError::Access);
        w(REG_SRC_CTRL, SRC_CLEAR)?;
        w(REG_SRC_RECORD_BYTES, c.record_bytes)?;
        w(REG_SRC_PERIOD, c.period_ticks)
    }

    /// Starts (`true`) or stops the source; counters and sequence keep their values.
    pub fn enable_source(&self, on: bool) -> Result<(), R::Error> {
        self.write(REG_SRC_CTRL, if on { SRC_ENABLE } else { 0 })
    }

    /// Whether the source produces records now.
    pub fn source_enabled(&self) -> Result<bool, R::Error> {
        Ok(self.read(REG_SRC_CTRL)? & SRC_ENABLE != 0)
    }

    /// The source's configuration now.
    pub fn source_config(&self) -> Result<SourceConfig, R::Error> {
        Ok(SourceConfig {
            record_bytes: self.read(REG_SRC_RECORD_BYTES)?,
            period_ticks: self.read(REG_SRC_PERIOD)?,
        })
    }

    /// Sets the record size (valid per [`record_bytes_valid`]; takes effect for records read out after it)
    /// and the period, leaving enable, counters and sequence alone.
    pub fn set_source(&self, c: SourceConfig) -> Result<(), ConfigError<R::Error>> {
        if !record_bytes_valid(c.record_bytes) {
            return Err(ConfigError::RecordBytes(c.record_bytes));
        }
        let w = |reg, v| self.write(reg, v).map_err(ConfigError::Access);
        w(REG_SRC_RECORD_BYTES, c.record_bytes)?;
        w(REG_SRC_PERIOD, c.period_ticks)
    }

    /// The source's sequence, timestamp clock, counters and FIFO back to 0 (enable kept).
    pub fn clear_source(&self) -> Result<(), R::Error> {
        let on = self.source_enabled()?;
        self.write(REG_SRC_CTRL, SRC_CLEAR | if on { SRC_ENABLE } else { 0 })
    }

    /// Records the source's FIFO holds ([`REG_SRC_DEPTH`]).
    pub fn source_depth(&self) -> Result<u32, R::Error> {
        self.read(REG_SRC_DEPTH)
    }

    /// The source's counters.
    pub fn source_status(&self) -> Result<SourceStatus, R::Error> {
        Ok(SourceStatus {
            seq: self.read(REG_SRC_SEQ)?,
            sent: self.read(REG_SRC_SENT)?,
            overrun: self.read(REG_SRC_OVERRUN)?,
        })
    }

    /// Clears the checker.
    pub fn clear_sink(&self) -> Result<(), R::Error> {
        self.write(REG_SINK_CTRL, SINK_CLEAR)
    }

    /// The checker's counters.
    pub fn sink_status(&self) -> Result<SinkStatus, R::Error> {
        Ok(SinkStatus {
            good: self.read(REG_SINK_GOOD)?,
            gaps: self.read(REG_SINK_GAPS)?,
            lost: self.read(REG_SINK_LOST)?,
            crc_errors: self.read(REG_SINK_CRC_ERRORS)?,
            bad_length: self.read(REG_SINK_BAD_LENGTH)?,
            expect: self.read(REG_SINK_EXPECT)?,
        })
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::channel::fake::Fake;
    use std::vec;

    #[test]
    fn crc32c_known_answer() {
        // RFC 3720 B.4: 32 bytes of zeros -> 0x8a9136aa; 32 bytes of 0xff -> 0x62a8ab43.
        assert_eq!(crc32c(&[0; 32]), 0x8a91_36aa);
        assert_eq!(crc32c(&[0xff; 32]), 0x62a8_ab43);
        let inc: vec::Vec<u8> = (0..32).collect();
        assert_eq!(crc32c(&inc), 0x46dd_794e);
    }

    #[test]
    fn table_step_equals_the_bitwise_step_of_the_rtl() {
        let mut x = 0x0123_4567_89ab_cdefu64;
        let mut crc = !0;
        for _ in 0..10_000 {
            assert_eq!(
                crc32c_word(crc, x),
                crc32c_word_bitwise(crc, x),
                "{crc:#x} {x:#x}"
            );
            crc = crc32c_word(crc, x);
            x = x.rotate_left(13) ^ x.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    #[test]
    fn a_written_record_checks_and_any_flipped_bit_is_caught() {
        let mut r = vec![0u8; 64];
        write_record(&mut r, 7, 0x1234);
        assert_eq!(
            check_record(&r),
            Ok(Record {
                seq: 7,
                len: 64,
                timestamp: 0x1234
            })
        );
        assert_eq!(&r[16..24], &(7u64 << 32).to_le_bytes(), "payload word 0");
        for bit in 0..(64 - 8) * 8 {
            let mut bad = r.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            assert!(check_record(&bad).is_err(), "bit {bit} flipped unnoticed");
        }
    }

    #[test]
    fn lengths() {
        assert!(record_bytes_valid(24) && record_bytes_valid(4096));
        assert!(!record_bytes_valid(16) && !record_bytes_valid(4104) && !record_bytes_valid(260));
        let mut r = vec![0u8; 32];
        write_record(&mut r, 1, 0);
        assert_eq!(check_record(&r[..24]), Err(RecordError::Length(32)));
    }

    #[test]
    fn configure_clears_then_writes_and_refuses_bad_lengths() {
        let f = Fake::default();
        let s = Stream::new(&f);
        assert_eq!(
            s.configure_source(SourceConfig {
                record_bytes: 100,
                period_ticks: 1
            }),
            Err(ConfigError::RecordBytes(100))
        );
        assert!(
            f.log.borrow().is_empty(),
            "nothing written for a bad length"
        );
        s.configure_source(SourceConfig {
            record_bytes: 512,
            period_ticks: 125,
        })
        .unwrap();
        let log: vec::Vec<(usize, u32)> = f
            .log
            .borrow()
            .iter()
            .filter(|a| a.0 == 'w')
            .map(|a| (a.1, a.2))
            .collect();
        assert_eq!(
            log,
            [(0xc00, SRC_CLEAR), (0xc04, 512), (0xc08, 125)],
            "clear first, then length and period"
        );
    }

    #[test]
    fn register_table_is_sound() {
        let mut seen = 0u32;
        for (name, offset, _) in REGISTERS {
            assert!(offset < REG_WINDOW && offset % 4 == 0, "{name}");
            assert_eq!(seen & 1 << (offset / 4), 0, "{name} overlaps");
            seen |= 1 << (offset / 4);
        }
        const { assert!(BASE % REG_WINDOW == 0 && BASE > idblock::BASE) };
        assert_eq!(decode(0xc44), REG_SRC_RECORD_BYTES);
    }
}
