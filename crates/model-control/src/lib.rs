//! The FPGA model's control channel, typed: one [`Request`] per line, one reply line per request.
//!
//! The wire format is newline-delimited JSON. A request is an object whose `"cmd"` names the command
//! (`{"cmd":"inject","fault":"hang","count":0}`); a reply is `{"ok":true, ...}` with the command's fields
//! or `{"ok":false,"error":"..."}`. The model (`model/src/control.rs`) parses [`Request`] and answers with
//! the reply types below; the bench harness, its guest relay, the guest tests and the agent's model loader
//! build requests and read replies through this crate, so a field renamed on one side fails to compile
//! on the other instead of reading as missing at run time.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// Longest request line the model accepts.
pub const MAX_LINE: usize = 64 * 1024;

/// One DMA engine, by its name on the channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    H2c,
    C2h,
}

/// Where `program` loads an image: the configuration flash (survives a power cycle) or the FPGA's SRAM.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProgramTarget {
    #[default]
    Flash,
    Sram,
}

fn one() -> u64 {
    1
}

fn is_one(n: &u64) -> bool {
    *n == 1
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A request to the model.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// LEDs, GPIO, scratch, interrupt and engine counters, DMA maps, faults: [`StateReply`].
    State {},
    /// Arms `fault` for the next `count` transfers (0: until cleared) after `after` untouched ones.
    /// `delay_ms` applies to the `slow` fault only.
    Inject {
        fault: String,
        #[serde(default = "one", skip_serializing_if = "is_one")]
        count: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        delay_ms: Option<u64>,
        #[serde(default, skip_serializing_if = "is_zero")]
        after: u64,
    },
    /// Disarms all faults.
    Clear {},
    /// Zeroes the counters.
    ResetCounters {},
    /// Surprise removal of the card.
    Unplug {},
    /// Re-insertion after `Unplug`.
    Replug {},
    /// Sets Run on `engine` as a driver that is gone left it; `desc` and `adjacent` default to what the
    /// SGDMA registers hold.
    LeaveRunning {
        engine: Engine,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        desc: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        adjacent: Option<u32>,
    },
    /// Loads a model image as JTAG loads a bitstream (the link is down meanwhile): [`ProgramReply`].
    Program {
        image: String,
        #[serde(default)]
        target: ProgramTarget,
    },
    /// The next `program` treats its image as corrupt (or not).
    ProgramFault { corrupt: bool },
    /// Which design runs: [`ProgramStateReply`].
    ProgramState {},
    /// Timing mode's clock, counters and parameters ([`TimingReply`]); `enable` switches it on (clock and
    /// counters from 0) or off, `params` changes parameters by name.
    Timing {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        enable: Option<bool>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        params: Option<BTreeMap<String, u64>>,
    },
}

impl Request {
    /// Arms `fault` for the next `count` transfers.
    pub fn inject(fault: &str, count: u64) -> Self {
        Request::Inject {
            fault: fault.to_string(),
            count,
            delay_ms: None,
            after: 0,
        }
    }

    /// The request as one line of JSON, without the newline.
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).expect("a Request always serialises")
    }

    /// Parses one request line; the error says what is wrong with it.
    pub fn from_line(line: &str) -> Result<Self, String> {
        let v: serde_json::Value = serde_json::from_str(line.trim())
            .map_err(|e| format!("bad request: not JSON: {}", describe(&e)))?;
        if !v.is_object() {
            return Err(
                r#"bad request: a request is a JSON object such as {"cmd":"state"}"#.into(),
            );
        }
        serde_json::from_value(v).map_err(|e| format!("bad request: {e}"))
    }
}

/// serde's message, without the position (a request is one line).
fn describe(e: &serde_json::Error) -> String {
    let s = e.to_string();
    match s.rfind(" at line ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// `{"ok":false,"error":...}` or `{"ok":true,...}`: the envelope every reply has.
#[derive(Debug, Deserialize)]
struct Envelope {
    ok: bool,
    #[serde(default)]
    error: Option<String>,
}

/// Serialises a successful reply: `body`'s fields with `"ok":true` first.
pub fn ok_line<T: Serialize>(body: &T) -> String {
    let fields = serde_json::to_string(body).expect("a reply always serialises");
    match fields.strip_prefix('{') {
        Some("}") => r#"{"ok":true}"#.to_string(),
        Some(rest) => format!(r#"{{"ok":true,{rest}"#),
        None => panic!("a reply is a JSON object, not {fields}"),
    }
}

/// Serialises a refusal.
pub fn error_line(message: &str) -> String {
    serde_json::json!({ "ok": false, "error": message }).to_string()
}

/// Reads a reply line as `T`; `{"ok":false}` becomes its error text, a reply that is not `T` an error
/// that names what is missing.
pub fn parse_reply<T: DeserializeOwned>(line: &str) -> Result<T, String> {
    let env: Envelope = serde_json::from_str(line.trim())
        .map_err(|e| format!("bad reply {line:?}: {}", describe(&e)))?;
    if !env.ok {
        return Err(env
            .error
            .unwrap_or_else(|| "refused without a reason".into()));
    }
    serde_json::from_str(line.trim()).map_err(|e| format!("bad reply {line:?}: {}", describe(&e)))
}

/// The reply of a command that returns nothing but success.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Done {}

/// One engine's counters in [`StateReply`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineCounters {
    pub runs: u64,
    pub descriptors: u64,
    pub bytes: u64,
    pub errors: u64,
    /// Poll-mode write-backs that reached host memory (one per completed run the driver asked it of).
    #[serde(default)]
    pub writebacks: u64,
    /// The host address of the last descriptor this engine fetched.
    pub host_addr: Option<u64>,
}

/// The reply to [`Request::State`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateReply {
    /// Lit LEDs, one bit per LED.
    pub leds: u32,
    pub gpio_data: u32,
    pub scratch: u32,
    pub msi_enabled: bool,
    pub irqs_msi: u64,
    pub irqs_intx: u64,
    pub h2c: EngineCounters,
    pub c2h: EngineCounters,
    /// DMA maps the model holds.
    pub dma_maps: u64,
    /// Device writes (C2H data, poll-mode write-backs) to host memory no DMA map covers, dropped like a
    /// posted write that goes nowhere; once per descriptor or write-back.
    pub dropped_writes: u64,
    /// Descriptors fetched by an engine left running (`leave_running`) rather than started by the driver.
    pub stray_dma: u64,
    /// Engines holding a memory request until bus mastering is enabled.
    pub bus_waits: Vec<Engine>,
    pub faults_injected: u64,
    /// Names of armed faults.
    pub pending_faults: Vec<String>,
    pub unplugged: bool,
}

impl StateReply {
    /// Interrupts raised, MSI and INTx together.
    pub fn irqs(&self) -> u64 {
        self.irqs_msi + self.irqs_intx
    }
}

/// Which design the card runs after a `program`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Loaded {
    /// The design the card starts with before any `program`.
    Start,
    /// The image just programmed.
    Update,
    /// The golden fallback: the image was rejected.
    Golden,
}

/// The reply to [`Request::Program`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramReply {
    pub loaded: Loaded,
    /// Why the golden design runs; empty after an update.
    pub reason: String,
    pub design: String,
    /// The ID block's version word of the design now running.
    pub design_version: u32,
    pub build_hash: u32,
}

/// The reply to [`Request::ProgramState`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramStateReply {
    pub running: Loaded,
    pub programs: u64,
    pub fallbacks: u64,
    pub golden_version: u32,
    pub program_fault_armed: bool,
}

/// One engine's counters in timing mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimingEngine {
    pub runs: u64,
    pub descriptors: u64,
    pub blocks: u64,
    pub bytes: u64,
    pub busy_ns: u64,
    pub irqs: u64,
    pub data_tlps: u64,
    pub request_tlps: u64,
    pub wire_bytes: u64,
    pub reverse_bytes: u64,
}

/// Each direction's modeled ceiling in MB/s.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Ceiling {
    pub h2c: f64,
    pub c2h: f64,
}

/// The reply to [`Request::Timing`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TimingReply {
    pub enabled: bool,
    /// The modeled clock.
    pub clock_ns: u64,
    pub h2c: TimingEngine,
    pub c2h: TimingEngine,
    pub ceiling_mbps: Ceiling,
    /// Every timing parameter by name (docs/perf.md).
    pub params: BTreeMap<String, u64>,
    pub irqs_msi: u64,
    pub irqs_intx: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_read_as_the_channel_writes_them() {
        let cases = [
            (r#"{"cmd":"state"}"#, Request::State {}),
            (
                r#"{"cmd":"inject","fault":"hang"}"#,
                Request::inject("hang", 1),
            ),
            (
                r#"{"cmd":"inject","fault":"slow","count":0,"delay_ms":5,"after":2}"#,
                Request::Inject {
                    fault: "slow".into(),
                    count: 0,
                    delay_ms: Some(5),
                    after: 2,
                },
            ),
            (
                r#"{"cmd":"leave_running","engine":"c2h"}"#,
                Request::LeaveRunning {
                    engine: Engine::C2h,
                    desc: None,
                    adjacent: None,
                },
            ),
            (
                r#"{"cmd":"program","image":"x"}"#,
                Request::Program {
                    image: "x".into(),
                    target: ProgramTarget::Flash,
                },
            ),
            (r#"{"cmd":"reset_counters"}"#, Request::ResetCounters {}),
        ];
        for (line, want) in cases {
            assert_eq!(Request::from_line(line).unwrap(), want, "{line}");
            assert_eq!(Request::from_line(&want.to_line()).unwrap(), want);
        }
    }

    #[test]
    fn bad_requests_say_what_is_wrong() {
        for (line, says) in [
            (r#"{"cmd":"dance"}"#, "unknown variant `dance`"),
            (r#"{"fault":"hang"}"#, "missing field `cmd`"),
            (r#"{"cmd":"inject"}"#, "missing field `fault`"),
            (
                r#"{"cmd":"inject","fault":"hang","count":-1}"#,
                "invalid value",
            ),
            (
                r#"{"cmd":"inject","fault":"hang","cuont":2}"#,
                "unknown field `cuont`",
            ),
            (r#"{"cmd":"state","verbose":1}"#, "unknown field `verbose`"),
            (
                r#"{"cmd":"leave_running","engine":"dma"}"#,
                "unknown variant `dma`",
            ),
            (r#"{"cmd":"timing","enable":"yes"}"#, "invalid type"),
            ("[1]", "a JSON object"),
            ("{", "not JSON"),
        ] {
            let e = Request::from_line(line).unwrap_err();
            assert!(e.contains(says), "{line}: {e}");
        }
    }

    #[test]
    fn replies_carry_ok_and_errors_become_err() {
        let line = ok_line(&ProgramStateReply {
            running: Loaded::Golden,
            programs: 2,
            fallbacks: 1,
            golden_version: 7,
            program_fault_armed: false,
        });
        assert!(line.starts_with(r#"{"ok":true,"#), "{line}");
        let back: ProgramStateReply = parse_reply(&line).unwrap();
        assert_eq!(back.running, Loaded::Golden);
        assert_eq!(parse_reply::<Done>(&ok_line(&Done {})).unwrap(), Done {});
        assert_eq!(
            parse_reply::<Done>(&error_line("no such fault")).unwrap_err(),
            "no such fault"
        );
        let e = parse_reply::<ProgramStateReply>(r#"{"ok":true}"#).unwrap_err();
        assert!(e.contains("missing field `running`"), "{e}");
    }
}
