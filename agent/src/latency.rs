//! `gdrctl latency`: how long one small transfer takes, as distributions (P50, P99, P99.9, max) per size
//! and operation, from host memory through an fd from the agent, as an application moves data. Wall time
//! on this machine; the emulated card's modeled clock is the performance report's (`bench/perf.sh`).
//! Only measuring: nothing here is judged (`gdrctl validate` judges a median).

use serde::Serialize;

use crate::validate::dma::{self, Direction, Dma};
use crate::validate::judge::percentile;

/// The sizes `gdrctl latency` measures by default: 64 B to 64 KiB (the card RAM), by fours.
pub const DEFAULT_SIZES: [usize; 6] = [64, 256, 1024, 4096, 16384, 65536];

/// An operation, as the command line and the JSON name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    H2c,
    C2h,
    H2c2h,
}

impl Op {
    fn direction(self) -> Direction {
        match self {
            Op::H2c => Direction::H2c,
            Op::C2h => Direction::C2h,
            Op::H2c2h => Direction::RoundTrip,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Op::H2c => "h2c",
            Op::C2h => "c2h",
            Op::H2c2h => "h2c2h",
        }
    }
}

/// One size and operation's distribution, microseconds (nearest rank).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    pub op: Op,
    pub bytes: usize,
    pub samples: usize,
    pub min_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    /// P50 of the card's own time for the same transfers (the DMA engine busy with the data): one-way
    /// requests with a driver that times by the card's clock (ABI 1.8), else none. The wall P50 minus
    /// this is what the CPU, the driver and the interrupt or poll add.
    pub card_p50_us: Option<f64>,
}

impl Row {
    /// The distribution of `samples_ns` (wall), and `card_ns`'s median where the card timed them.
    pub fn of(op: Op, bytes: usize, mut samples_ns: Vec<u64>, mut card_ns: Vec<u64>) -> Row {
        samples_ns.sort_unstable();
        card_ns.sort_unstable();
        let us = |p: f64| percentile(&samples_ns, p) as f64 / 1000.0;
        Row {
            op,
            bytes,
            samples: samples_ns.len(),
            min_us: us(0.0),
            p50_us: us(50.0),
            p99_us: us(99.0),
            p999_us: us(99.9),
            max_us: us(100.0),
            card_p50_us: (!card_ns.is_empty()).then(|| percentile(&card_ns, 50.0) as f64 / 1000.0),
        }
    }
}

/// Why a size or operation could not be measured.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{bytes} bytes is more than the card RAM ({ram} bytes)")]
    TooLarge { bytes: usize, ram: usize },
    #[error("{op} of {bytes} bytes: {source}")]
    Transfer {
        op: &'static str,
        bytes: usize,
        source: gdr_client::Error,
    },
}

/// Measures every operation at every size, `samples` transfers each after two warm-ups; sizes above
/// `ram` are refused before anything runs.
pub fn measure(
    dev: &impl Dma,
    ram: usize,
    ops: &[Op],
    sizes: &[usize],
    samples: u32,
) -> Result<Vec<Row>, Error> {
    if let Some(&bytes) = sizes.iter().find(|&&b| b > ram) {
        return Err(Error::TooLarge { bytes, ram });
    }
    let mut rows = Vec::new();
    for &op in ops {
        for &bytes in sizes {
            let v = dma::latency(dev, op.direction(), bytes, samples).map_err(|source| {
                Error::Transfer {
                    op: op.name(),
                    bytes,
                    source,
                }
            })?;
            rows.push(Row::of(op, bytes, v.wall_ns, v.card_ns));
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::dma::tests::FakeCard;

    #[test]
    fn quantiles_are_nearest_rank_in_microseconds() {
        // 1000 samples of 1..=1000 us: p99.9 is the 999th, max the 1000th.
        let v: Vec<u64> = (1..=1000).rev().map(|u| u * 1000).collect();
        let r = Row::of(Op::H2c2h, 4096, v, vec![]);
        assert_eq!(
            (r.samples, r.min_us, r.p50_us, r.p99_us, r.p999_us, r.max_us),
            (1000, 1.0, 500.0, 990.0, 999.0, 1000.0)
        );
        assert_eq!(r.card_p50_us, None);
        let r = Row::of(Op::C2h, 4096, vec![9000; 3], vec![7000, 3000, 5000]);
        assert_eq!(r.card_p50_us, Some(5.0));
    }

    #[test]
    fn every_op_and_size_is_measured_and_oversize_is_refused_first() {
        let card = FakeCard::new(65536);
        let rows = measure(&card, 65536, &[Op::H2c, Op::H2c2h], &[64, 4096], 5).unwrap();
        let got: Vec<_> = rows.iter().map(|r| (r.op, r.bytes, r.samples)).collect();
        assert_eq!(
            got,
            [
                (Op::H2c, 64, 5),
                (Op::H2c, 4096, 5),
                (Op::H2c2h, 64, 5),
                (Op::H2c2h, 4096, 5)
            ]
        );
        let calls = card.calls.get();
        let e = measure(&card, 65536, &[Op::C2h], &[64, 131072], 5).unwrap_err();
        assert_eq!(
            e.to_string(),
            "131072 bytes is more than the card RAM (65536 bytes)"
        );
        assert_eq!(card.calls.get(), calls, "nothing ran");
    }
}
