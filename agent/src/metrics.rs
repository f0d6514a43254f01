//! Prometheus text exposition for node_exporter's textfile collector, written atomically.

use std::fmt::Write;

use crate::card::{CardStatus, Stage};

const STAGES: [Stage; 9] = [
    Stage::Pending,
    Stage::Discover,
    Stage::Identify,
    Stage::Program,
    Stage::Relink,
    Stage::Bind,
    Stage::SelfTest,
    Stage::Ready,
    Stage::Failed,
];

/// The whole file for all cards.
pub fn render(cards: &[CardStatus]) -> String {
    let mut o = String::new();
    let mut family = |name: &str, kind: &str, help: &str, rows: &mut dyn FnMut(&mut String)| {
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}");
        rows(&mut o);
    };
    family(
        "gdr_card_stage",
        "gauge",
        "1 for the stage the card is in.",
        &mut |o| {
            for c in cards {
                for s in STAGES {
                    let _ = writeln!(
                        o,
                        "gdr_card_stage{{card=\"{}\",stage=\"{s}\"}} {}",
                        c.index,
                        u8::from(c.stage == s)
                    );
                }
            }
        },
    );
    family(
        "gdr_card_healthy",
        "gauge",
        "1 if the last health check passed.",
        &mut |o| {
            for c in cards {
                let _ = writeln!(
                    o,
                    "gdr_card_healthy{{card=\"{}\"}} {}",
                    c.index,
                    u8::from(c.healthy)
                );
            }
        },
    );
    family(
        "gdr_card_health",
        "gauge",
        "1 for the health the last check gave the card (unknown, ok, degraded, failed).",
        &mut |o| {
            for c in cards {
                let _ = writeln!(
                    o,
                    "gdr_card_health{{card=\"{}\",health=\"{}\"}} 1",
                    c.index,
                    c.health.name()
                );
            }
        },
    );
    family(
        "gdr_card_programmed_total",
        "counter",
        "Times the agent programmed the FPGA.",
        &mut |o| {
            for c in cards {
                let _ = writeln!(
                    o,
                    "gdr_card_programmed_total{{card=\"{}\"}} {}",
                    c.index, c.programmed
                );
            }
        },
    );
    family(
        "gdr_bitstream_info",
        "gauge",
        "Design running on the card.",
        &mut |o| {
            for c in cards {
                let _ = writeln!(
                    o,
                    "gdr_bitstream_info{{card=\"{}\",design=\"{}\",version=\"{:#010x}\",build=\"{:08x}\",golden=\"{}\"}} 1",
                    c.index,
                    c.design.name(),
                    c.design_version,
                    c.build_hash,
                    c.fell_back_to_golden
                );
            }
        },
    );
    family(
        "gdr_selftest_success",
        "gauge",
        "1 if the last self-test passed.",
        &mut |o| {
            for c in cards {
                if let Some(t) = &c.last_selftest {
                    let _ = writeln!(
                        o,
                        "gdr_selftest_success{{card=\"{}\",memory=\"{}\"}} {}",
                        c.index,
                        t.measurement.memory,
                        u8::from(t.passed)
                    );
                }
            }
        },
    );
    family(
        "gdr_selftest_bandwidth_mbps",
        "gauge",
        "Last self-test DMA rate, MB/s.",
        &mut |o| {
            for c in cards {
                if let Some(t) = &c.last_selftest {
                    let m = &t.measurement;
                    let _ = writeln!(
                        o,
                        "gdr_selftest_bandwidth_mbps{{card=\"{}\",direction=\"h2c\"}} {:.3}",
                        c.index, m.h2c_mbps
                    );
                    let _ = writeln!(
                        o,
                        "gdr_selftest_bandwidth_mbps{{card=\"{}\",direction=\"c2h\"}} {:.3}",
                        c.index, m.c2h_mbps
                    );
                }
            }
        },
    );
    family(
        "gdr_selftest_bytes",
        "gauge",
        "Bytes moved per direction by the last self-test.",
        &mut |o| {
            for c in cards {
                if let Some(t) = &c.last_selftest {
                    let _ = writeln!(
                        o,
                        "gdr_selftest_bytes{{card=\"{}\"}} {}",
                        c.index, t.measurement.bytes
                    );
                }
            }
        },
    );
    family(
        "gdr_selftest_mismatches",
        "gauge",
        "Wrong words in the last self-test.",
        &mut |o| {
            for c in cards {
                if let Some(t) = &c.last_selftest {
                    let _ = writeln!(
                        o,
                        "gdr_selftest_mismatches{{card=\"{}\"}} {}",
                        c.index, t.measurement.mismatches
                    );
                }
            }
        },
    );
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_stage_is_set_and_lines_are_well_formed() {
        let mut c = CardStatus::new(0);
        c.stage = Stage::Ready;
        c.design = crate::card::Design::Reference;
        let text = render(&[c]);
        assert!(
            text.contains("gdr_bitstream_info{card=\"0\",design=\"reference\","),
            "{text}"
        );
        assert!(text.contains("gdr_card_stage{card=\"0\",stage=\"ready\"} 1\n"));
        assert!(text.contains("gdr_card_stage{card=\"0\",stage=\"failed\"} 0\n"));
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (name, value) = line.rsplit_once(' ').unwrap();
            assert!(name.starts_with("gdr_") && name.ends_with('}'), "{line}");
            value.parse::<f64>().unwrap();
        }
    }
}
