//! PCI as sysfs shows it (read-only for the agent) and remove/rescan through the privileged helper.

use std::path::{Path, PathBuf};

use picoevb_regs::pci::{DEVICE_ID, SUBSYSTEM_ID_PICOEVB, SUBSYSTEM_VENDOR_ID, VENDOR_ID};

use super::helper::Helper;
use super::request::Request;
use crate::card::ports::{Aer, Pci, PciError};

fn hex_attr(dev: &Path, attr: &str) -> Option<u32> {
    let s = std::fs::read_to_string(dev.join(attr)).ok()?;
    u32::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok()
}

/// Whether the sysfs PCI function at `dev` is a PicoEVB, judged as the driver's probe judges it: vendor and
/// device 10de:0001 alone also match NVIDIA's HTG-K800 design, so the subsystem IDs must match too. The
/// agent's discovery and the root helper's `remove` both ask this.
pub fn is_picoevb(dev: &Path) -> bool {
    hex_attr(dev, "vendor") == Some(VENDOR_ID.into())
        && hex_attr(dev, "device") == Some(DEVICE_ID.into())
        && hex_attr(dev, "subsystem_vendor") == Some(SUBSYSTEM_VENDOR_ID.into())
        && hex_attr(dev, "subsystem_device") == Some(SUBSYSTEM_ID_PICOEVB.into())
}

/// sysfs under `root` (normally `/sys`).
pub struct SysfsPci {
    pub root: PathBuf,
    pub helper: Helper,
}

impl SysfsPci {
    fn dev(&self, bdf: &str) -> PathBuf {
        self.root.join("bus/pci/devices").join(bdf)
    }

    fn read(&self, bdf: &str, attr: &str) -> Option<String> {
        std::fs::read_to_string(self.dev(bdf).join(attr))
            .ok()
            .map(|s| s.trim().to_string())
    }
}

impl Pci for SysfsPci {
    fn list(&self) -> Result<Vec<String>, PciError> {
        let dir = self.root.join("bus/pci/devices");
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(source) => return Err(PciError::List { dir, source }),
        };
        let mut found: Vec<String> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|bdf| is_picoevb(&self.dev(bdf)))
            .collect();
        found.sort();
        Ok(found)
    }

    fn driver(&self, bdf: &str) -> Option<String> {
        let link = std::fs::read_link(self.dev(bdf).join("driver")).ok()?;
        Some(link.file_name()?.to_string_lossy().into_owned())
    }

    fn remove(&self, bdf: &str) -> Result<(), PciError> {
        if !self.dev(bdf).exists() {
            return Ok(()); // already gone (the link dropped)
        }
        self.helper
            .call(&Request::Remove(bdf.to_string()))
            .map(|_| ())
            .map_err(|e| PciError::Privileged(e.into()))
    }

    fn rescan(&self) -> Result<(), PciError> {
        self.helper
            .call(&Request::Rescan)
            .map(|_| ())
            .map_err(|e| PciError::Privileged(e.into()))
    }

    fn link(&self, bdf: &str) -> Option<(String, u32)> {
        let speed = self.read(bdf, "current_link_speed")?;
        let width = self.read(bdf, "current_link_width")?.parse().ok()?;
        Some((speed, width))
    }

    fn aer_errors(&self, bdf: &str) -> Option<Aer> {
        let total = |f: &str| -> Option<u64> {
            let text = self.read(bdf, f)?;
            Some(
                text.lines()
                    .filter_map(|l| l.strip_prefix("TOTAL_ERR_"))
                    .filter_map(|r| r.split_whitespace().nth(1)?.parse::<u64>().ok())
                    .sum(),
            )
        };
        Some(Aer {
            correctable: total("aer_dev_correctable")?,
            uncorrectable: total("aer_dev_nonfatal")? + total("aer_dev_fatal")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_fake_sysfs() {
        let root = std::env::temp_dir().join(format!("gdr-sysfs-{}", std::process::id()));
        let card = root.join("bus/pci/devices/0000:01:00.0");
        let other = root.join("bus/pci/devices/0000:00:00.0");
        // NVIDIA's HTG-K800 design: the PicoEVB's vendor and device IDs, another subsystem ID.
        let htg = root.join("bus/pci/devices/0000:02:00.0");
        std::fs::create_dir_all(root.join("bus/pci/drivers/picoevb")).unwrap();
        for (d, v, dev, sub) in [
            (&card, "0x10de", "0x0001", "0x0001"),
            (&other, "0x8086", "0x1237", "0x0000"),
            (&htg, "0x10de", "0x0001", "0x0002"),
        ] {
            std::fs::create_dir_all(d).unwrap();
            std::fs::write(d.join("vendor"), format!("{v}\n")).unwrap();
            std::fs::write(d.join("device"), format!("{dev}\n")).unwrap();
            std::fs::write(d.join("subsystem_vendor"), "0x10de\n").unwrap();
            std::fs::write(d.join("subsystem_device"), format!("{sub}\n")).unwrap();
        }
        std::fs::write(card.join("current_link_speed"), "5.0 GT/s PCIe\n").unwrap();
        std::fs::write(card.join("current_link_width"), "1\n").unwrap();
        std::fs::write(
            card.join("aer_dev_correctable"),
            "RxErr 0\nTOTAL_ERR_COR 2\n",
        )
        .unwrap();
        std::fs::write(card.join("aer_dev_nonfatal"), "TOTAL_ERR_NONFATAL 1\n").unwrap();
        std::fs::write(card.join("aer_dev_fatal"), "TOTAL_ERR_FATAL 0\n").unwrap();
        std::os::unix::fs::symlink("../../../../bus/pci/drivers/picoevb", card.join("driver"))
            .unwrap();
        let pci = SysfsPci {
            root: root.clone(),
            helper: Helper {
                socket: "/nonexistent".into(),
                timeout: std::time::Duration::from_secs(1),
            },
        };
        assert_eq!(
            pci.list().unwrap(),
            ["0000:01:00.0"],
            "the HTG-K800 is no PicoEVB"
        );
        assert_eq!(pci.driver("0000:01:00.0").as_deref(), Some("picoevb"));
        assert_eq!(pci.driver("0000:00:00.0"), None);
        assert_eq!(pci.link("0000:01:00.0"), Some(("5.0 GT/s PCIe".into(), 1)));
        assert_eq!(
            pci.aer_errors("0000:01:00.0"),
            Some(Aer {
                correctable: 2,
                uncorrectable: 1
            })
        );
        let e = pci.rescan().unwrap_err().to_string();
        assert!(e.contains("privileged helper at /nonexistent"), "{e}");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
