//! What can differ between runs of the model: which bitstream it imitates and how fast it is.

use std::fmt;
use std::str::FromStr;

use picoevb_regs::idblock;

/// Design version the model's gdr bitstream reports in the ID block.
pub const DESIGN_VERSION: u32 = idblock::version(1, 0, 0);

/// Which bitstream's BAR0 the model presents.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Design {
    /// gdr's own bitstream: AXI GPIO at 0x000..0x7ff, ID block from 0x800.
    #[default]
    Gdr,
    /// NVIDIA's reference bitstream: the GPIO aliases across all of BAR0 and there is no ID block.
    Reference,
}

impl FromStr for Design {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "gdr" => Ok(Design::Gdr),
            "reference" => Ok(Design::Reference),
            other => Err(format!(
                "unknown design '{other}' (expected 'gdr' or 'reference')"
            )),
        }
    }
}

impl fmt::Display for Design {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Design::Gdr => "gdr",
            Design::Reference => "reference",
        })
    }
}

/// Construction-time settings of a [`crate::Device`].
#[derive(Clone, Debug, Default)]
pub struct DeviceOptions {
    /// Bitstream variant.
    pub design: Design,
    /// DMA throughput per engine in MB/s (10^6 bytes per second); `None` = as fast as possible.
    pub bandwidth_mbps: Option<u64>,
    /// Timing mode (a modeled link clock, see `timing`) with these parameters; `None` = off.
    pub timing: Option<crate::timing::Params>,
    /// ID block BUILD_HASH value (first 32 bits of a git commit).
    pub build_hash: u32,
    /// ID block BUILD_TIME value (seconds since the Unix epoch).
    pub build_time: u32,
}
