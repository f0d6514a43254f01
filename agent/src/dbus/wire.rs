//! The agent's model on the wire: one `From` per type, from the agent's own (`card::CardStatus`, the
//! stages, `health::Health`, `selftest::SelfTestResult`) to `gdr_client::api`'s, which the D-Bus methods
//! return. The agent keeps its own types (an optional failed stage, the history's nested measurement) and
//! depends on the client's; the client knows nothing of the agent. Every struct is taken apart whole and
//! every enum matched exhaustively, so a field or a variant the wire does not carry is a compile error here.

use gdr_client::api;

use crate::card::{CardStatus, Design, Stage};
use crate::health::Health;
use crate::selftest::{Measurement, Mismatch, SelfTestResult};

impl From<Stage> for api::Stage {
    fn from(s: Stage) -> Self {
        match s {
            Stage::Pending => api::Stage::Pending,
            Stage::Discover => api::Stage::Discover,
            Stage::Identify => api::Stage::Identify,
            Stage::Program => api::Stage::Program,
            Stage::Relink => api::Stage::Relink,
            Stage::Bind => api::Stage::Bind,
            Stage::SelfTest => api::Stage::SelfTest,
            Stage::Ready => api::Stage::Ready,
            Stage::Failed => api::Stage::Failed,
        }
    }
}

impl From<Health> for api::Health {
    fn from(h: Health) -> Self {
        match h {
            Health::Unknown => api::Health::Unknown,
            Health::Ok => api::Health::Ok,
            Health::Degraded => api::Health::Degraded,
            Health::Failed => api::Health::Failed,
        }
    }
}

impl From<Design> for api::Design {
    fn from(d: Design) -> Self {
        match d {
            Design::Unknown => api::Design::Unknown,
            Design::Gdr => api::Design::Gdr,
            Design::Reference => api::Design::Reference,
        }
    }
}

impl From<&SelfTestResult> for api::SelfTest {
    fn from(r: &SelfTestResult) -> Self {
        let SelfTestResult {
            time,
            passed,
            reason,
            measurement:
                Measurement {
                    memory,
                    path,
                    memory_note,
                    bytes,
                    h2c_mbps,
                    c2h_mbps,
                    duration_us,
                    mismatches,
                    first_mismatch,
                },
        } = r;
        // The wire has no option: a test without a wrong word says 0 three times.
        let Mismatch {
            offset,
            expected,
            got,
        } = first_mismatch.unwrap_or(Mismatch {
            offset: 0,
            expected: 0,
            got: 0,
        });
        api::SelfTest {
            time: *time,
            passed: *passed,
            reason: reason.clone(),
            memory: memory.clone(),
            path: path.clone(),
            memory_note: memory_note.clone(),
            bytes: *bytes,
            h2c_mbps: *h2c_mbps,
            c2h_mbps: *c2h_mbps,
            duration_us: *duration_us,
            mismatches: *mismatches,
            first_mismatch_offset: offset,
            first_mismatch_expected: expected,
            first_mismatch_got: got,
        }
    }
}

impl From<&CardStatus> for api::CardStatus {
    fn from(s: &CardStatus) -> Self {
        let CardStatus {
            index,
            stage,
            failed_stage,
            message,
            pci,
            design,
            loader,
            design_version,
            build_hash,
            expected_version,
            expected_hash,
            fell_back_to_golden,
            abi_version,
            link_speed,
            link_width,
            programmed,
            last_selftest,
            healthy,
            health,
        } = s;
        api::CardStatus {
            index: u32::try_from(*index).expect("card indexes come from a u32 count"),
            stage: (*stage).into(),
            // The wire has no option: the stage itself when none failed.
            failed_stage: failed_stage.unwrap_or(*stage).into(),
            message: message.clone(),
            pci: pci.clone(),
            design: (*design).into(),
            loader: loader.clone(),
            design_version: *design_version,
            build_hash: *build_hash,
            expected_version: *expected_version,
            expected_hash: *expected_hash,
            fell_back_to_golden: *fell_back_to_golden,
            abi_version: *abi_version,
            link_speed: link_speed.clone(),
            link_width: *link_width,
            programmed: *programmed,
            last_selftest: last_selftest.iter().map(api::SelfTest::from).collect(),
            healthy: *healthy,
            health: (*health).into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wire names are the agent's own (the properties use the agent's, GetStatus the wire enums').
    #[test]
    fn wire_names_are_the_agents() {
        use Stage::*;
        for s in [
            Pending, Discover, Identify, Program, Relink, Bind, SelfTest, Ready, Failed,
        ] {
            assert_eq!(api::Stage::from(s).name(), s.name());
            assert_eq!(serde_json::to_value(api::Stage::from(s)).unwrap(), s.name());
        }
        for h in [
            Health::Unknown,
            Health::Ok,
            Health::Degraded,
            Health::Failed,
        ] {
            assert_eq!(api::Health::from(h).name(), h.name());
            assert_eq!(
                serde_json::to_value(api::Health::from(h)).unwrap(),
                h.name()
            );
        }
        for d in [Design::Unknown, Design::Gdr, Design::Reference] {
            assert_eq!(api::Design::from(d).name(), d.name());
            assert_eq!(
                serde_json::to_value(api::Design::from(d)).unwrap(),
                d.name()
            );
        }
    }

    /// Every field reaches its own wire field: each carries a value no other field has.
    #[test]
    fn a_status_crosses_field_by_field() {
        let test = SelfTestResult {
            time: 1,
            passed: false,
            reason: "2 word(s) differ".into(),
            measurement: Measurement {
                memory: "cuda".into(),
                path: "nv-p2p".into(),
                memory_note: "Orin".into(),
                bytes: 4096,
                h2c_mbps: 3.5,
                c2h_mbps: 4.5,
                duration_us: 5,
                mismatches: 2,
                first_mismatch: Some(Mismatch {
                    offset: 6,
                    expected: 7,
                    got: 8,
                }),
            },
        };
        let s = CardStatus {
            index: 3,
            stage: Stage::Failed,
            failed_stage: Some(Stage::SelfTest),
            message: "why".into(),
            pci: "0000:01:00.0".into(),
            design: Design::Gdr,
            loader: "model".into(),
            design_version: 10,
            build_hash: 11,
            expected_version: 12,
            expected_hash: 13,
            fell_back_to_golden: true,
            abi_version: 14,
            link_speed: "5.0 GT/s PCIe".into(),
            link_width: 15,
            programmed: 16,
            last_selftest: Some(test),
            healthy: true,
            health: Health::Degraded,
        };
        let wire = api::CardStatus {
            index: 3,
            stage: api::Stage::Failed,
            failed_stage: api::Stage::SelfTest,
            message: "why".into(),
            pci: "0000:01:00.0".into(),
            design: api::Design::Gdr,
            loader: "model".into(),
            design_version: 10,
            build_hash: 11,
            expected_version: 12,
            expected_hash: 13,
            fell_back_to_golden: true,
            abi_version: 14,
            link_speed: "5.0 GT/s PCIe".into(),
            link_width: 15,
            programmed: 16,
            last_selftest: vec![api::SelfTest {
                time: 1,
                passed: false,
                reason: "2 word(s) differ".into(),
                memory: "cuda".into(),
                path: "nv-p2p".into(),
                memory_note: "Orin".into(),
                bytes: 4096,
                h2c_mbps: 3.5,
                c2h_mbps: 4.5,
                duration_us: 5,
                mismatches: 2,
                first_mismatch_offset: 6,
                first_mismatch_expected: 7,
                first_mismatch_got: 8,
            }],
            healthy: true,
            health: api::Health::Degraded,
        };
        assert_eq!(api::CardStatus::from(&s), wire);
        // Nothing failed, nothing tested: the stage stands for the failed one, no test is an empty list.
        let fresh = api::CardStatus::from(&CardStatus::new(0));
        assert_eq!(fresh.failed_stage, api::Stage::Pending);
        assert_eq!(fresh.failed_at(), None);
        assert!(fresh.last_selftest.is_empty());
    }
}
