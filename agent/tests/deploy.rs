//! The deployment files: install.list names real files with sane destinations and modes (the appliance
//! and the Yocto recipes install from it), and the hardened unit keeps its `systemd-analyze security`
//! exposure at or below 2.0.

use std::path::Path;
use std::process::Command;

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

#[test]
fn install_list_is_the_truth() {
    let list = std::fs::read_to_string(root().join("agent/deploy/install.list")).unwrap();
    let mut dests = std::collections::HashSet::new();
    let mut n = 0;
    for (i, line) in list.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(f.len(), 3, "line {}: want SOURCE DEST MODE: {line}", i + 1);
        assert!(
            root().join(f[0]).is_file(),
            "line {}: {} does not exist",
            i + 1,
            f[0]
        );
        assert!(
            f[1].starts_with('/') && !f[1].contains(".."),
            "line {}: bad destination",
            i + 1
        );
        assert!(
            dests.insert(f[1]),
            "line {}: {} installed twice",
            i + 1,
            f[1]
        );
        let mode = u32::from_str_radix(f[2], 8).unwrap_or(0o7777);
        assert!(
            f[2].len() == 4 && (mode == 0o644 || mode == 0o755),
            "line {}: mode {}",
            i + 1,
            f[2]
        );
        n += 1;
    }
    // Every file in agent/deploy/ is installed (one copy each, nothing forgotten).
    for e in std::fs::read_dir(root().join("agent/deploy")).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        if name != "install.list" {
            assert!(
                list.contains(&format!("agent/deploy/{name} ")),
                "{name} is not in install.list"
            );
        }
    }
    assert!(n >= 8);
}

#[test]
fn unit_exposure_is_at_most_2() {
    let unit = root().join("agent/deploy/gdr-agent.service");
    let out = match Command::new("systemd-analyze")
        .args(["security", "--offline=true", "--no-pager"])
        .arg(&unit)
        .output()
    {
        Ok(o) => o,
        Err(_) => {
            eprintln!(
                "SKIPPED: systemd-analyze not installed (the appliance test checks the score too)"
            );
            return;
        }
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let Some(score) = text
        .lines()
        .find_map(|l| l.split("exposure level for gdr-agent.service: ").nth(1))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|s| s.parse::<f64>().ok())
    else {
        eprintln!(
            "SKIPPED: this systemd-analyze has no --offline ({})",
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    };
    assert!(score <= 2.0, "exposure {score} > 2.0:\n{text}");
}
