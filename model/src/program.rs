//! Programming the model as JTAG programs a card: the control channel's `program` command takes a model
//! image (see `image.rs`), the link drops while the "FPGA" reconfigures (the card reads all-ones, as after
//! `unplug`), and the card comes back presenting the new design's ID block. A corrupt image (bad checksum,
//! or a `program_fault` armed by a test) makes the card fall back to its golden design, as 7-series
//! MultiBoot does.
//!
//! Command-line options (taken out of the argument list before `cli::parse`):
//! `--image PATH` starts the model with that design; `--golden PATH` sets the fallback design (default:
//! the design of `--design`/`--build-hash`/`--build-time`).

use std::time::Duration;

use gdr_model_control::{Loaded, ProgramReply, ProgramStateReply, ProgramTarget};
use log::{info, warn};

use crate::device::Device;
use crate::image::ModelImage;
use crate::options::DeviceOptions;

/// How long the link stays down while the model reconfigures.
pub const LINK_DOWN: Duration = Duration::from_millis(300);

/// Usage lines for the options of this file.
pub const USAGE: &str = "\
  --image PATH          start with the design of this model image (fpga-bitstream/model-images.sh)
  --golden PATH         golden (fallback) design for the 'program' control command (default: the design
                        given by --design/--build-hash/--build-time)";

/// The programming side of the device state.
#[derive(Clone, Debug)]
pub struct ProgramState {
    /// What a failed load falls back to.
    pub golden: ModelImage,
    /// The next `program` behaves as if the image were corrupt.
    pub corrupt_next: bool,
    /// Loads so far, and how many fell back.
    pub programs: u64,
    pub fallbacks: u64,
    /// What the card runs now.
    pub running: Loaded,
}

impl ProgramState {
    pub fn new(options: &DeviceOptions) -> Self {
        Self {
            golden: ModelImage::from_options(options),
            corrupt_next: false,
            programs: 0,
            fallbacks: 0,
            running: Loaded::Start,
        }
    }
}

/// `--image`/`--golden` from the command line.
#[derive(Clone, Debug, Default)]
pub struct ProgramArgs {
    pub image: Option<ModelImage>,
    pub golden: Option<ModelImage>,
}

fn read_image(path: &str, what: &str) -> Result<ModelImage, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{what} {path}: {e}"))?;
    ModelImage::parse(&text).map_err(|e| format!("{what} {path}: {e}"))
}

/// Takes `--image` and `--golden` out of `args`; returns the rest for `cli::parse`.
pub fn split_args(args: Vec<String>) -> Result<(Vec<String>, ProgramArgs), String> {
    let mut rest = Vec::new();
    let mut out = ProgramArgs::default();
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f == "--image" || f == "--golden" => {
                (f.to_string(), Some(v.to_string()))
            }
            _ => (a.clone(), None),
        };
        match flag.as_str() {
            "--image" | "--golden" => {
                let v = inline
                    .or_else(|| it.next())
                    .ok_or(format!("{flag} needs a path"))?;
                let img = read_image(&v, &flag)?;
                if flag == "--image" {
                    out.image = Some(img);
                } else {
                    out.golden = Some(img);
                }
            }
            _ => rest.push(a),
        }
    }
    Ok((rest, out))
}

/// Applies `--image`/`--golden` to a new device.
pub fn apply(device: &Device, args: &ProgramArgs) {
    if let Some(g) = args.golden {
        device.with_program(|p| p.golden = g);
    }
    if let Some(img) = &args.image {
        device.load_design(img);
    }
}

/// The `program` control command: loads `text` into `target` as JTAG would.
pub fn handle(device: &Device, text: &str, target: ProgramTarget) -> Result<ProgramReply, String> {
    let parsed = ModelImage::parse(text);
    let injected = device.with_program(|p| std::mem::take(&mut p.corrupt_next));
    Ok(program(device, parsed, injected, target, LINK_DOWN))
}

fn program(
    device: &Device,
    parsed: Result<ModelImage, String>,
    injected: bool,
    target: ProgramTarget,
    link_down: Duration,
) -> ProgramReply {
    info!("control: programming ({target:?}): link down");
    device.set_unplugged(true);
    std::thread::sleep(link_down);
    let (image, loaded, reason) = match parsed {
        Ok(img) if !injected => (img, Loaded::Update, String::new()),
        Ok(_) => (
            golden(device),
            Loaded::Golden,
            "injected program fault".to_string(),
        ),
        Err(e) => (golden(device), Loaded::Golden, e),
    };
    device.load_design(&image);
    device.with_program(|p| {
        p.programs += 1;
        p.fallbacks += u64::from(loaded == Loaded::Golden);
        p.running = loaded;
    });
    device.set_unplugged(false);
    if loaded == Loaded::Golden {
        warn!("control: image rejected ({reason}): fell back to the golden design");
    }
    info!(
        "control: programmed: {loaded:?} design {:#010x}, link up",
        image.design_version
    );
    ProgramReply {
        loaded,
        reason,
        design: image.design.to_string(),
        design_version: image.id_version(),
        build_hash: image.build_hash,
    }
}

fn golden(device: &Device) -> ModelImage {
    device.with_program(|p| p.golden)
}

/// `program_fault`: the next `program` treats its image as corrupt (or not).
pub fn handle_fault(device: &Device, corrupt: bool) {
    device.with_program(|p| p.corrupt_next = corrupt);
}

/// The `program_state` reply.
pub fn state(device: &Device) -> ProgramStateReply {
    device.with_program(|p| ProgramStateReply {
        running: p.running,
        programs: p.programs,
        fallbacks: p.fallbacks,
        golden_version: p.golden.design_version,
        program_fault_armed: p.corrupt_next,
    })
}
