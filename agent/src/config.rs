//! `/etc/gdr/agent.toml`: every key, its default, and validation. A bad file is refused as a whole with
//! `FILE:LINE: key: problem`, so a reload either applies completely or not at all.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Where the daemon reads its configuration unless `--config` says otherwise.
pub const DEFAULT_PATH: &str = "/etc/gdr/agent.toml";

/// The whole configuration.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub agent: AgentSection,
    #[serde(default)]
    pub access: Access,
    #[serde(default)]
    pub admin: Admin,
    #[serde(default)]
    pub selftest: SelfTestSection,
    #[serde(default)]
    pub retry: Retry,
    #[serde(default)]
    pub health: Health,
    /// `[[card]]` tables, one per card; the first is card0.
    #[serde(default, rename = "card")]
    pub cards: Vec<CardConfig>,
}

/// `[agent]`: paths.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct AgentSection {
    /// Directory holding `manifest.json` and the images it names.
    pub bitstream_dir: PathBuf,
    /// Self-test history lives here (systemd `StateDirectory=`).
    pub state_dir: PathBuf,
    /// Prometheus text file for node_exporter's textfile collector; written atomically. Empty: none.
    pub metrics_file: PathBuf,
    /// Socket of the privileged helper (PCI remove/rescan, JTAG).
    pub helper_socket: PathBuf,
    /// The self-test program, run as a short-lived child.
    pub selftest_program: PathBuf,
    /// The OpenOCD programming scripts (fpga-bitstream/program/).
    pub program_scripts: PathBuf,
}

impl Default for AgentSection {
    fn default() -> Self {
        Self {
            bitstream_dir: "/usr/share/gdr/bitstream".into(),
            state_dir: "/var/lib/gdr".into(),
            metrics_file: "/var/lib/gdr/metrics/gdr.prom".into(),
            helper_socket: "/run/gdr-helper/helper.sock".into(),
            selftest_program: "/usr/libexec/gdr/gdr-selftest".into(),
            program_scripts: "/usr/share/gdr/program".into(),
        }
    }
}

/// `[access]`: who may `Open` a card (the caller's uid or any of its groups must match).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Access {
    pub users: Vec<String>,
    pub groups: Vec<String>,
}

impl Default for Access {
    fn default() -> Self {
        Self {
            users: vec!["root".into()],
            groups: vec!["gdrusers".into()],
        }
    }
}

/// `[admin]`: who may administer the cards (SelfTest, Bench, SetLeds, Reprogram, Reload). `[access]`
/// alone only opens them and reads their state.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Admin {
    pub users: Vec<String>,
    pub groups: Vec<String>,
    /// A card is reprogrammed at most once per this many seconds by anyone but root (each reprogram
    /// revokes every application's fds); 0 = no limit.
    pub reprogram_interval_s: u64,
}

impl Default for Admin {
    fn default() -> Self {
        Self {
            users: vec!["root".into()],
            groups: vec![],
            reprogram_interval_s: 60,
        }
    }
}

/// Which memory the self-test moves through the card.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Memory {
    /// CUDA when libcuda and a GPU are present, else host memory (the result says which).
    #[default]
    Auto,
    /// CUDA only: no GPU is a failure.
    Cuda,
    /// Host memory only.
    Host,
}

/// `[selftest]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SelfTestSection {
    /// Run the self-test when a card comes up.
    pub on_start: bool,
    /// Bytes per transfer (at most the FPGA RAM, 64 KiB, a multiple of 4).
    pub bytes: u64,
    pub memory: Memory,
    /// Pass only at or above these rates (MB/s, 10^6 bytes per second); 0 = no threshold.
    pub min_h2c_mbps: f64,
    pub min_c2h_mbps: f64,
    /// The child is killed after this long.
    pub timeout_s: u64,
    /// Results kept on disk per card.
    pub history: usize,
}

impl Default for SelfTestSection {
    fn default() -> Self {
        Self {
            on_start: true,
            bytes: 65536,
            memory: Memory::Auto,
            min_h2c_mbps: 0.0,
            min_c2h_mbps: 0.0,
            timeout_s: 60,
            history: 50,
        }
    }
}

/// `[retry]`: every stage that can fail transiently is retried this way.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Retry {
    /// Tries per stage (at least 1).
    pub attempts: u32,
    /// First wait between tries; doubled each time up to `max_backoff_ms`.
    pub backoff_ms: u64,
    pub max_backoff_ms: u64,
    /// How long to wait for the driver to bind after a rescan.
    pub bind_timeout_s: u64,
}

impl Default for Retry {
    fn default() -> Self {
        Self {
            attempts: 3,
            backoff_ms: 500,
            max_backoff_ms: 8000,
            bind_timeout_s: 10,
        }
    }
}

/// `[health]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Health {
    /// Seconds between health checks of the ready cards.
    pub interval_s: u64,
    /// A card operation (bring-up, self-test, bench) silent for longer than this is hung: the watchdog
    /// is no longer fed. Programming may take as long as its loader asks systemd for; see
    /// [`Config::stall`] for the floor the other settings put under it.
    pub stall_s: u64,
}

impl Default for Health {
    fn default() -> Self {
        Self {
            interval_s: 5,
            stall_s: 300,
        }
    }
}

/// How a card is programmed.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LoaderKind {
    /// The FPGA model's control channel (the bench and the emulated appliance).
    Model,
    /// JTAG through OpenOCD (hardware).
    Openocd,
    /// Never program: the agent serves the design the card carries (gdr's, any version, or NVIDIA's
    /// reference design) and self-tests it; no bitstream manifest is needed. An image built without a
    /// bitstream ships this.
    None,
}

impl LoaderKind {
    /// The name in `agent.toml`.
    pub fn name(self) -> &'static str {
        match self {
            LoaderKind::Model => "model",
            LoaderKind::Openocd => "openocd",
            LoaderKind::None => "none",
        }
    }
}

/// Where an image goes.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Target {
    /// The MultiBoot update slot in flash, verified, then reloaded (survives power-off).
    #[default]
    Flash,
    /// Configuration SRAM only (gone at power-off).
    Sram,
}

/// `[[card]]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CardConfig {
    /// PCI address `DDDD:BB:DD.F`, or `auto`: the Nth PicoEVB in address order for the Nth `[[card]]`.
    #[serde(default = "auto")]
    pub pci: String,
    /// Device node of the card.
    pub device: PathBuf,
    pub loader: LoaderKind,
    /// `model` loader: the model's control port (a virtio-serial port in the appliance).
    pub port: Option<PathBuf>,
    /// `openocd` loader: USB serial of the card's FT230X, when several cards are attached.
    pub jtag_serial: Option<String>,
    #[serde(default)]
    pub target: Target,
}

fn auto() -> String {
    "auto".into()
}

/// A refused configuration: where and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub file: PathBuf,
    /// 1-based; 0 when the problem is not on one line (unreadable file).
    pub line: usize,
    /// Dotted key, e.g. `card[0].loader`; empty when unknown.
    pub key: String,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if self.line > 0 {
            write!(f, ":{}", self.line)?;
        }
        if !self.key.is_empty() {
            write!(f, ": {}", self.key)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    /// Reads and validates `path`.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: path.into(),
            line: 0,
            key: String::new(),
            message: format!("cannot read: {e}"),
        })?;
        Self::parse(path, &text)
    }

    /// Parses and validates `text`, naming `file` in errors.
    pub fn parse(file: &Path, text: &str) -> Result<Self, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|e| {
            let (line, key) = match e.span() {
                Some(span) => locate_span(text, span.start),
                None => (0, String::new()),
            };
            ConfigError {
                file: file.into(),
                line,
                key,
                message: e.message().trim().to_string(),
            }
        })?;
        config.validate().map_err(|(key, message)| ConfigError {
            file: file.into(),
            line: locate_key(text, &key),
            key,
            message,
        })?;
        Ok(config)
    }

    /// How long a card operation may stay silent: `health.stall_s`, but always longer than its longest
    /// single step (a self-test child, a bind wait, a backoff), so raising those never makes a slow
    /// step look hung.
    pub fn stall(&self) -> std::time::Duration {
        let longest_step = self
            .selftest
            .timeout_s
            .max(self.retry.bind_timeout_s)
            .max(self.retry.max_backoff_ms.div_ceil(1000));
        std::time::Duration::from_secs(self.health.stall_s.max(longest_step + 1))
    }

    /// Values serde accepts but the agent cannot work with: (dotted key, why).
    fn validate(&self) -> Result<(), (String, String)> {
        let bad = |k: &str, m: String| Err((k.to_string(), m));
        // Upper bounds keep every derived value (polls, backoff doubling, durations) far from overflow.
        for (k, v, max) in [
            ("retry.attempts", u64::from(self.retry.attempts), 100),
            ("retry.backoff_ms", self.retry.backoff_ms, 600_000),
            ("retry.max_backoff_ms", self.retry.max_backoff_ms, 600_000),
            ("retry.bind_timeout_s", self.retry.bind_timeout_s, 3600),
            ("selftest.timeout_s", self.selftest.timeout_s, 3600),
            ("selftest.history", self.selftest.history as u64, 100_000),
            (
                "admin.reprogram_interval_s",
                self.admin.reprogram_interval_s,
                86_400,
            ),
        ] {
            if v > max {
                return bad(k, format!("{v} is above the limit {max}"));
            }
        }
        if self.retry.attempts == 0 {
            return bad("retry.attempts", "must be at least 1".into());
        }
        if self.retry.backoff_ms > self.retry.max_backoff_ms {
            return bad(
                "retry.backoff_ms",
                format!(
                    "{} is above retry.max_backoff_ms ({})",
                    self.retry.backoff_ms, self.retry.max_backoff_ms
                ),
            );
        }
        if !(1..=3600).contains(&self.health.interval_s) {
            return bad("health.interval_s", "must be 1..=3600 seconds".into());
        }
        if !(1..=86_400).contains(&self.health.stall_s) {
            return bad("health.stall_s", "must be 1..=86400 seconds".into());
        }
        let s = &self.selftest;
        if s.bytes == 0 || !s.bytes.is_multiple_of(4) || s.bytes > picoevb_regs::pci::FPGA_RAM_SIZE
        {
            return bad(
                "selftest.bytes",
                format!(
                    "{} is not a multiple of 4 in 4..={}",
                    s.bytes,
                    picoevb_regs::pci::FPGA_RAM_SIZE
                ),
            );
        }
        for (k, v) in [
            ("selftest.min_h2c_mbps", s.min_h2c_mbps),
            ("selftest.min_c2h_mbps", s.min_c2h_mbps),
        ] {
            if !v.is_finite() || v < 0.0 {
                return bad(k, format!("{v} is not a rate >= 0"));
            }
        }
        if s.timeout_s == 0 {
            return bad("selftest.timeout_s", "must be at least 1".into());
        }
        if s.history == 0 {
            return bad("selftest.history", "must be at least 1".into());
        }
        if self.cards.len() > 8 {
            return bad("card", "at most 8 cards (/dev/picoevb0..7)".into());
        }
        for (i, c) in self.cards.iter().enumerate() {
            let key = |k: &str| format!("card[{i}].{k}");
            if c.pci != "auto" && !valid_bdf(&c.pci) {
                return bad(
                    &key("pci"),
                    format!("'{}' is neither 'auto' nor DDDD:BB:DD.F", c.pci),
                );
            }
            if c.loader == LoaderKind::Model && c.port.is_none() {
                return bad(
                    &key("port"),
                    "the model loader needs its control port".into(),
                );
            }
            if !c.device.is_absolute() {
                return bad(&key("device"), "must be an absolute path".into());
            }
        }
        Ok(())
    }
}

/// Whether `s` is a full PCI address `DDDD:BB:DD.F` (lowercase hex; device < 0x20, function < 8).
pub fn valid_bdf(s: &str) -> bool {
    let b = s.as_bytes();
    let hex = |r: std::ops::Range<usize>| {
        b[r].iter()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
    };
    b.len() == 12
        && b[4] == b':'
        && b[7] == b':'
        && b[10] == b'.'
        && hex(0..4)
        && hex(5..7)
        && hex(8..10)
        && u8::from_str_radix(&s[8..10], 16).is_ok_and(|d| d < 0x20)
        && (b'0'..=b'7').contains(&b[11])
}

/// Line of byte offset `pos` and the dotted key written there (`section.key`, from the line's `key =` and
/// the table header above it).
fn locate_span(text: &str, pos: usize) -> (usize, String) {
    let pos = pos.min(text.len());
    let line_no = text[..pos].matches('\n').count() + 1;
    let mut section = String::new();
    let mut cards = 0usize;
    let mut key = String::new();
    for (n, line) in text.lines().enumerate() {
        let t = line.trim();
        if n + 1 > line_no {
            break;
        }
        if let Some(h) = header(t) {
            section = if h == "card" {
                cards += 1;
                format!("card[{}]", cards - 1)
            } else {
                h.to_string()
            };
            key.clear();
        }
        if n + 1 == line_no {
            if let Some((k, _)) = t.split_once('=') {
                let k = k.trim().trim_matches('"');
                key = if section.is_empty() {
                    k.to_string()
                } else {
                    format!("{section}.{k}")
                };
            } else {
                key = section.clone();
            }
        }
    }
    (line_no, key)
}

/// The table name of a `[name]` or `[[name]]` header line.
fn header(t: &str) -> Option<&str> {
    let t = t.split('#').next()?.trim();
    let inner = t.strip_prefix("[[").and_then(|t| t.strip_suffix("]]"));
    inner
        .or_else(|| t.strip_prefix('[').and_then(|t| t.strip_suffix(']')))
        .map(str::trim)
}

/// Line where dotted `key` (as [`Config::validate`] names it) is set, or its table header, or 0.
fn locate_key(text: &str, key: &str) -> usize {
    let (section, name) = key.rsplit_once('.').unwrap_or(("", key));
    let mut current = String::new();
    let mut cards = 0usize;
    let mut header_line = 0;
    for (n, line) in text.lines().enumerate() {
        let t = line.trim();
        if let Some(h) = header(t) {
            current = if h == "card" {
                cards += 1;
                format!("card[{}]", cards - 1)
            } else {
                h.to_string()
            };
            if current == section || (section.is_empty() && current == name) {
                header_line = n + 1;
            }
            continue;
        }
        if current == section
            && t.split_once('=')
                .is_some_and(|(k, _)| k.trim().trim_matches('"') == name)
        {
            return n + 1;
        }
    }
    header_line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(Path::new("/etc/gdr/agent.toml"), text)
    }

    const GOOD: &str = r#"
[agent]
state_dir = "/tmp/gdr"

[retry]
attempts = 2

[[card]]
device = "/dev/picoevb0"
loader = "model"
port = "/dev/virtio-ports/org.gdr.model.card0"
"#;

    #[test]
    fn defaults_and_a_card() {
        let c = parse(GOOD).unwrap();
        assert_eq!(c.agent.state_dir, PathBuf::from("/tmp/gdr"));
        assert_eq!(c.retry.attempts, 2);
        assert_eq!(c.retry.backoff_ms, 500, "unset keys keep their defaults");
        assert_eq!(c.cards.len(), 1);
        assert_eq!(c.cards[0].pci, "auto");
        assert_eq!(c.cards[0].loader, LoaderKind::Model);
        assert_eq!(c.cards[0].target, Target::Flash);
        assert_eq!(parse("").unwrap(), Config::default());
    }

    #[test]
    fn the_shipped_file_is_valid() {
        let text = include_str!("../deploy/agent.toml");
        let c = parse(text).unwrap();
        assert_eq!(c.cards.len(), 1);
    }

    #[test]
    fn unknown_key_names_file_line_and_key() {
        let e = parse("[retry]\nattempts = 2\nbackof_ms = 3\n").unwrap_err();
        assert_eq!(e.line, 3);
        assert_eq!(e.key, "retry.backof_ms");
        assert!(e.message.contains("unknown field"), "{e}");
        assert!(
            e.to_string()
                .starts_with("/etc/gdr/agent.toml:3: retry.backof_ms: ")
        );
    }

    #[test]
    fn wrong_type_names_the_key() {
        let e = parse(&GOOD.replace("attempts = 2", "attempts = \"two\"")).unwrap_err();
        assert_eq!((e.line, e.key.as_str()), (6, "retry.attempts"), "{e}");
        let e = parse(&GOOD.replace("\"model\"", "\"jtag\"")).unwrap_err();
        assert_eq!((e.line, e.key.as_str()), (10, "card[0].loader"), "{e}");
    }

    #[test]
    fn impossible_values_are_refused_with_their_line() {
        let e = parse(&GOOD.replace("attempts = 2", "attempts = 0")).unwrap_err();
        assert_eq!((e.line, e.key.as_str()), (6, "retry.attempts"), "{e}");
        let e = parse("[selftest]\nbytes = 70000\n").unwrap_err();
        assert_eq!((e.line, e.key.as_str()), (2, "selftest.bytes"), "{e}");
        let e = parse(&GOOD.replace("port = ", "# port = ")).unwrap_err();
        assert_eq!((e.line, e.key.as_str()), (8, "card[0].port"), "{e}");
        let e = parse(&format!("{GOOD}pci = \"01:00.0\"\n")).unwrap_err();
        assert_eq!((e.line, e.key.as_str()), (12, "card[0].pci"), "{e}");
    }

    #[test]
    fn values_past_their_limits_are_refused_not_wrapped() {
        let e = parse("[retry]\nbind_timeout_s = 1844674407370955162\n").unwrap_err();
        assert_eq!((e.line, e.key.as_str()), (2, "retry.bind_timeout_s"), "{e}");
        assert!(e.message.contains("limit 3600"), "{e}");
        let e = parse("[retry]\nattempts = 4000000000\n").unwrap_err();
        assert_eq!(e.key, "retry.attempts", "{e}");
        let e = parse("[selftest]\ntimeout_s = 99999\n").unwrap_err();
        assert_eq!(e.key, "selftest.timeout_s", "{e}");
        assert!(parse("[retry]\nbind_timeout_s = 3600\n").is_ok());
    }

    #[test]
    fn bdf_syntax() {
        assert!(valid_bdf("0000:01:00.0"));
        assert!(valid_bdf("0001:0a:1f.7"));
        for bad in [
            "0000:01:00.8",
            "0000:01:20.0",
            "0000:01:00",
            "../../../x00.0",
            "0000:01:00.0\n",
            "0000:0A:00.0",
        ] {
            assert!(!valid_bdf(bad), "{bad:?}");
        }
    }
}
