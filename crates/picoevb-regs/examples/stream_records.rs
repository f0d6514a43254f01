//! Checks records read back from the RTL against `stream.rs`: every record in the file must pass
//! [`check_record`] and be byte for byte what [`write_record`] makes for its sequence number and timestamp.
//!
//! ```text
//! cargo run -q -p picoevb-regs --example stream_records -- FILE RECORD_BYTES
//! ```
//!
//! FILE holds one 64-bit beat per line in hex (the first byte of the stream is the beat's low byte), as
//! `fpga-bitstream/sim/tb/tb_stream.v` dumps them. Exit status 0 and "N records match" when all match.

use picoevb_regs::stream::{check_record, record_bytes_valid, write_record};

fn run(path: &str, len: &str) -> Result<usize, String> {
    let len: u32 = len
        .parse()
        .map_err(|e| format!("bad record length '{len}': {e}"))?;
    if !record_bytes_valid(len) {
        return Err(format!("{len} is not a valid record length"));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let mut bytes = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let beat = u64::from_str_radix(line.trim(), 16)
            .map_err(|e| format!("{path}:{}: '{line}': {e}", n + 1))?;
        bytes.extend_from_slice(&beat.to_le_bytes());
    }
    if bytes.is_empty() || bytes.len() % len as usize != 0 {
        return Err(format!(
            "{} bytes is not a whole number of {len}-byte records",
            bytes.len()
        ));
    }
    let mut want = vec![0u8; len as usize];
    for (i, have) in bytes.chunks_exact(len as usize).enumerate() {
        let r = check_record(have).map_err(|e| format!("record {i}: {e:?}"))?;
        write_record(&mut want, r.seq, r.timestamp);
        if have != want.as_slice() {
            return Err(format!("record {i} (seq {}) differs from stream.rs", r.seq));
        }
    }
    Ok(bytes.len() / len as usize)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [path, len] = &args[..] else {
        eprintln!("usage: stream_records FILE RECORD_BYTES");
        std::process::exit(1);
    };
    match run(path, len) {
        Ok(n) => println!("{n} records match"),
        Err(e) => {
            eprintln!("stream_records: {e}");
            std::process::exit(1);
        }
    }
}
