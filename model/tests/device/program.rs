//! Programming the model through the control channel: link down meanwhile, the new ID block after, golden
//! fallback for a corrupt image or an armed program fault.

use std::sync::Arc;

use picoevb_model::control::handle_line;
use picoevb_model::image::ModelImage;
use picoevb_model::program::{ProgramArgs, apply};
use picoevb_model::{Design, Device, DeviceOptions, FakeGuestMemory, RecordingSink};
use picoevb_regs::idblock;
use picoevb_regs::pci::BAR_USER;
use serde_json::{Value, json};

fn device() -> Arc<Device> {
    Arc::new(Device::new(
        DeviceOptions::default(),
        Arc::new(FakeGuestMemory::new()),
        Arc::new(RecordingSink::new()),
    ))
}

fn image(version: u32, hash: u32) -> ModelImage {
    ModelImage {
        design: Design::Gdr,
        design_version: version,
        build_hash: hash,
        build_time: 7,
    }
}

fn id(dev: &Device) -> (u32, u32) {
    let base = idblock::BASE as u64;
    (
        dev.read32(BAR_USER, base + idblock::REG_DESIGN_VERSION as u64),
        dev.read32(BAR_USER, base + idblock::REG_BUILD_HASH as u64),
    )
}

fn program(dev: &Device, text: &str) -> Value {
    let req = json!({"cmd": "program", "image": text});
    serde_json::from_str(&handle_line(dev, &req.to_string())).unwrap()
}

#[test]
fn start_image_then_program_the_update() {
    let dev = device();
    let golden = image(idblock::version(0, 9, 0), 1);
    apply(
        &dev,
        &ProgramArgs {
            image: Some(golden),
            golden: Some(golden),
        },
    );
    assert_eq!(
        id(&dev),
        (0x0009_0000, 1),
        "--image sets the starting design"
    );

    // While programming the card is off the link: another thread sees all-ones.
    let d2 = dev.clone();
    let watcher = std::thread::spawn(move || {
        let t0 = std::time::Instant::now();
        while t0.elapsed() < std::time::Duration::from_millis(250) {
            if d2.read32(BAR_USER, idblock::BASE as u64) == u32::MAX {
                return true;
            }
        }
        false
    });
    let r = program(
        &dev,
        &image(idblock::version(1, 0, 0), 0x8169_0a8c).render(),
    );
    assert!(
        watcher.join().unwrap(),
        "link never dropped while programming"
    );
    assert_eq!(
        (r["ok"].clone(), r["loaded"].clone()),
        (json!(true), json!("update"))
    );
    assert_eq!(id(&dev), (0x0100_0000, 0x8169_0a8c));
    assert!(!dev.unplugged());
}

#[test]
fn corrupt_image_and_armed_fault_fall_back_to_golden() {
    let dev = device();
    let golden = image(idblock::version(0, 9, 0), 1);
    apply(
        &dev,
        &ProgramArgs {
            image: None,
            golden: Some(golden),
        },
    );
    let mut text = image(idblock::version(1, 0, 0), 2).render();
    text = text.replacen("build_hash 0x0", "build_hash 0x1", 1);
    let r = program(&dev, &text);
    assert_eq!(r["loaded"], json!("golden"));
    assert!(r["reason"].as_str().unwrap().contains("corrupt"), "{r}");
    assert_eq!(id(&dev), (0x0009_0000, 1));

    let ok = image(idblock::version(1, 0, 0), 2).render();
    let armed = handle_line(&dev, r#"{"cmd":"program_fault","corrupt":true}"#);
    assert!(armed.contains("true"));
    assert_eq!(program(&dev, &ok)["loaded"], json!("golden"), "armed fault");
    assert_eq!(
        program(&dev, &ok)["loaded"],
        json!("update"),
        "the fault fires once"
    );
    let st: Value = serde_json::from_str(&handle_line(&dev, r#"{"cmd":"program_state"}"#)).unwrap();
    assert_eq!(st["programs"], json!(3));
    assert_eq!(st["fallbacks"], json!(2));
    assert_eq!(st["running"], json!("update"));
}

#[test]
fn reference_design_has_no_id_block_and_bad_requests_are_refused() {
    let dev = device();
    let mut r = image(0, 0);
    r.design = Design::Reference;
    program(&dev, &r.render());
    assert_ne!(
        dev.read32(BAR_USER, idblock::BASE as u64),
        idblock::MAGIC,
        "the reference design decodes no ID block"
    );
    for bad in [
        r#"{"cmd":"program"}"#,
        r#"{"cmd":"program","image":"x","target":"eeprom"}"#,
        r#"{"cmd":"program_fault"}"#,
    ] {
        let v: Value = serde_json::from_str(&handle_line(&dev, bad)).unwrap();
        assert_eq!(v["ok"], json!(false), "{bad}");
    }
}
