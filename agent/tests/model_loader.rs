//! The agent's `model` loader against the real FPGA model's control server (both sides of the `program`
//! command): images from the model's own make-image, the ID block read back from the device.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use gdr_agent::card::ports::Loader;
use gdr_agent::config::Target;
use gdr_agent::loader::model::ModelLoader;
use gdr_agent::manifest::{Image, ImageFile, sha256_hex};
use picoevb_model::control::ControlServer;
use picoevb_model::image::make_image;
use picoevb_model::program::{ProgramArgs, apply};
use picoevb_model::{Device, DeviceOptions, FakeGuestMemory, RecordingSink};
use picoevb_regs::idblock;
use picoevb_regs::pci::BAR_USER;

fn image(dir: &Path, name: &str, args: &str) -> std::path::PathBuf {
    let args: Vec<String> = args.split(' ').map(String::from).collect();
    let p = dir.join(name);
    std::fs::write(&p, make_image(&args).unwrap()).unwrap();
    p
}

/// The image as the agent hands it to a loader: read once, with the sha256 it was checked against.
fn checked(path: &Path) -> Image {
    let bytes = std::fs::read(path).unwrap();
    Image {
        file: ImageFile {
            path: path.to_path_buf(),
            role: "model-update".into(),
            sha256: sha256_hex(&bytes),
        },
        bytes,
    }
}

fn version(dev: &Device) -> u32 {
    dev.read32(
        BAR_USER,
        (idblock::BASE + idblock::REG_DESIGN_VERSION) as u64,
    )
}

#[test]
fn programs_the_model_and_sees_the_golden_fallback() {
    let dir = std::env::temp_dir().join(format!("gdr-model-loader-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let golden = image(
        &dir,
        "golden.img",
        "--version 0.9.0 --build-hash 1 --build-time 5",
    );
    let update = image(
        &dir,
        "update.img",
        "--version 1.0.0 --build-hash 81690a8c --build-time 5",
    );
    let corrupt = image(
        &dir,
        "corrupt.img",
        "--version 1.0.0 --build-hash 81690a8c --build-time 5 --corrupt",
    );

    let dev = Arc::new(Device::new(
        DeviceOptions::default(),
        Arc::new(FakeGuestMemory::new()),
        Arc::new(RecordingSink::new()),
    ));
    let g = picoevb_model::image::ModelImage::parse(&std::fs::read_to_string(&golden).unwrap())
        .unwrap();
    apply(
        &dev,
        &ProgramArgs {
            image: Some(g),
            golden: Some(g),
        },
    );
    assert_eq!(
        version(&dev),
        idblock::version(0, 9, 0),
        "starts with the wrong design"
    );

    let sock = dir.join("control.sock");
    let _server = ControlServer::spawn(&sock, dev.clone()).unwrap();
    let loader = ModelLoader {
        port: sock,
        timeout: Duration::from_secs(10),
    };

    let said = loader.program(&checked(&update), Target::Flash).unwrap();
    assert_eq!(said, "model loaded the update design");
    assert_eq!(version(&dev), idblock::version(1, 0, 0));

    let said = loader.program(&checked(&corrupt), Target::Flash).unwrap();
    assert_eq!(said, "model loaded the golden design");
    assert_eq!(
        version(&dev),
        idblock::version(0, 9, 0),
        "fell back to golden"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
