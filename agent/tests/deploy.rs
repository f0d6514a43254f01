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

fn deploy(name: &str) -> String {
    std::fs::read_to_string(root().join("agent/deploy").join(name)).unwrap()
}

/// `key=value` settings of a unit file (every occurrence, in order).
fn settings<'a>(unit: &'a str, key: &str) -> Vec<&'a str> {
    unit.lines()
        .filter_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .collect()
}

/// Issue 20 defect 10: the group that opens the card is not the one metrics readers get.
#[test]
fn metrics_readers_cannot_open_the_card() {
    let rules = deploy("70-gdr.rules");
    let card = rules
        .lines()
        .find(|l| l.contains("KERNEL==\"picoevb[0-9]*\""))
        .expect("no rule for the card node");
    let card_group = card
        .split("GROUP=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap();
    let tmpfiles = deploy("gdr.tmpfiles");
    let metrics = tmpfiles
        .lines()
        .find(|l| l.starts_with("d /var/lib/gdr/metrics "))
        .expect("no tmpfiles line for metrics/");
    let f: Vec<&str> = metrics.split_whitespace().collect();
    let (mode, group) = (f[2], f[4]);
    assert_ne!(
        group, card_group,
        "metrics readers get group {group}, which opens the card"
    );
    assert!(
        mode.starts_with('2'),
        "metrics/ is {mode}: not setgid, so the file would be group {card_group}"
    );
    for comment in tmpfiles.lines().filter(|l| l.starts_with('#')) {
        assert!(
            !comment.contains("as group gdr"),
            "the comment still hands node_exporter the card's group: {comment}"
        );
    }
    let sysusers = deploy("gdr.sysusers");
    assert!(
        sysusers
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()[..2] == ["g", group]),
        "sysusers does not declare {group}"
    );
    // The state directory lets the readers through and no further.
    let unit = deploy("gdr-agent.service");
    assert_eq!(settings(&unit, "StateDirectoryMode"), ["0711"]);
    assert!(tmpfiles.contains("d /var/lib/gdr 0711 gdr gdr -"));
}

/// A device-chosen string (the USB serial) reaches a link name only escaped by udev: a raw attribute with a
/// space would add a second link anywhere under /dev.
#[test]
fn udev_links_carry_no_raw_attributes() {
    for (name, text) in [
        ("70-gdr.rules", deploy("70-gdr.rules")),
        (
            "60-picoevb.rules",
            std::fs::read_to_string(root().join("kmod/picoevb/udev/60-picoevb.rules")).unwrap(),
        ),
    ] {
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            for link in line.split("SYMLINK+=\"").skip(1) {
                let value = link.split('"').next().unwrap();
                assert!(
                    !value.contains("$attr{") && !value.contains("%s{"),
                    "{name}: SYMLINK+=\"{value}\" takes a sysfs attribute unescaped"
                );
            }
        }
    }
}

/// The root helper cannot change kernel tunables or module parameters, and keeps its other walls.
#[test]
fn the_root_helper_is_walled_in() {
    let unit = deploy("gdr-helper@.service");
    for (key, want) in [
        ("ProtectKernelTunables", "yes"),
        ("ProtectKernelModules", "yes"),
        ("ProtectProc", "invisible"),
        ("NoNewPrivileges", "yes"),
        ("CapabilityBoundingSet", ""),
        ("DevicePolicy", "closed"),
        ("PrivateTmp", "yes"),
        ("PrivateNetwork", "yes"),
        ("UMask", "0077"),
    ] {
        assert_eq!(settings(&unit, key), [want], "{key}");
    }
    // What it must write, and nothing wider than sysfs's device tree.
    assert_eq!(
        settings(&unit, "ReadWritePaths"),
        ["/sys/bus/pci /sys/devices"]
    );
    assert_eq!(settings(&unit, "DeviceAllow"), ["char-usb_device rw"]);
}

/// Each unit parses (`systemd-analyze verify`; the binaries are not installed here, which it reports and
/// this ignores).
#[test]
fn units_verify() {
    let dir = root().join("agent/deploy");
    let out = match Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .args(
            [
                "gdr-agent.service",
                "gdr-helper@.service",
                "gdr-helper.socket",
            ]
            .map(|u| dir.join(u)),
        )
        .output()
    {
        Ok(o) => o,
        Err(_) => {
            eprintln!("SKIPPED: systemd-analyze not installed");
            return;
        }
    };
    let text = String::from_utf8_lossy(&out.stderr);
    let bad: Vec<&str> = text
        .lines()
        .filter(|l| !l.contains("is not executable") && !l.contains("not found"))
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert!(
        bad.is_empty(),
        "systemd-analyze verify:\n{}",
        bad.join("\n")
    );
}

/// The shipped polkit actions are exactly the agent's administration members' (a missing one would be
/// refused by polkit for everyone but root; a stray one guards nothing).
#[test]
fn polkit_actions_match_the_agent() {
    use gdr_agent::polkit::AdminAction;
    let policy = deploy("org.gdr.agent.policy");
    let mut shipped: Vec<&str> = policy
        .split("<action id=\"")
        .skip(1)
        .filter_map(|r| r.split('"').next())
        .collect();
    shipped.sort();
    let mut wanted: Vec<&str> = AdminAction::ALL.iter().map(|a| a.id()).collect();
    wanted.sort();
    assert_eq!(shipped, wanted);
    assert_eq!(
        policy.matches("<allow_any>no</allow_any>").count(),
        wanted.len(),
        "an action lets anyone in"
    );
    // The agent runs as gdr, not root: polkit answers its CheckAuthorization for other users' subjects
    // only on actions that name it their owner (else NotAuthorized, for every call).
    assert_eq!(
        policy
            .matches(r#"<annotate key="org.freedesktop.policykit.owner">unix-user:gdr</annotate>"#)
            .count(),
        wanted.len(),
        "an action does not let the agent (user gdr) ask about it"
    );
}
