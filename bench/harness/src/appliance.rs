//! The emulated appliance's QEMU pieces: the disks (the cached base image as a throwaway snapshot, the per-run
//! layer), the kernel command line that hands PID 1 to base/layer-init and names the test scenario, and one
//! virtio-serial port per card wired to that card's model control socket: the appliance's JTAG cable.

use crate::cli::Appliance;

/// init= of the appliance: copies the layer in, then execs systemd (bench/appliance/base/layer-init).
pub const LAYER_INIT: &str = "/usr/lib/gdr-appliance/layer-init";

/// The kernel command line after the bench's `console=ttyS0 panic=-1 loglevel=6`. A debug kernel under TCG
/// on a busy machine runs one to two orders of magnitude slower than a box: systemd's default start timeout
/// (90 s) killed journald in such a boot, so units get 15 minutes; the harness's --timeout bounds the whole.
pub fn cmdline(ap: &Appliance) -> String {
    format!(
        "root=/dev/vda rw rootfstype=ext4 init={LAYER_INIT} systemd.show_status=error \
         systemd.firstboot=off systemd.default_timeout_start_sec=900 gdr.scenario={}",
        ap.scenario
    )
}

/// The virtio-serial port name of card `i`'s model control socket (CONTRACT.md).
pub fn port_name(i: u32) -> String {
    format!("org.gdr.model.card{i}")
}

/// QEMU arguments for the disks and ports. `base`, `layer` and `ctl(i)` are paths as QEMU sees them. Fixed
/// PCI addresses keep the root disk `vda` and the layer `vdb` whatever else is plugged in.
pub fn qemu_args(base: &str, layer: &str, ctl: impl Fn(u32) -> String, cards: u32) -> Vec<String> {
    let mut v: Vec<String> = vec![
        "-drive".into(),
        format!("file={base},format=raw,if=none,id=root,snapshot=on,cache=unsafe"),
        "-device".into(),
        "virtio-blk-pci,drive=root,addr=0x10".into(),
        "-drive".into(),
        format!("file={layer},format=raw,if=none,id=layer,readonly=on"),
        "-device".into(),
        "virtio-blk-pci,drive=layer,addr=0x11".into(),
        "-device".into(),
        "virtio-serial-pci,id=vser,addr=0x12".into(),
    ];
    for i in 0..cards {
        // The model listens; QEMU connects, and reconnects should the model drop the connection.
        v.push("-chardev".into());
        v.push(format!(
            "socket,id=model{i},path={},reconnect-ms=500",
            ctl(i)
        ));
        v.push("-device".into());
        v.push(format!(
            "virtserialport,bus=vser.0,chardev=model{i},name={}",
            port_name(i)
        ));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disks_ports_and_cmdline() {
        let ap = Appliance {
            base: "/c/base.img".into(),
            layer: "/c/layer.img".into(),
            scenario: "tests".into(),
        };
        assert!(cmdline(&ap).contains("root=/dev/vda rw"));
        assert!(cmdline(&ap).ends_with("gdr.scenario=tests"));
        let v = qemu_args(
            "/r/base.img",
            "/r/layer.img",
            |i| format!("/r/ctl{i}.sock"),
            2,
        )
        .join(" ");
        assert!(v.contains("file=/r/base.img,format=raw,if=none,id=root,snapshot=on"));
        assert!(v.contains("file=/r/layer.img,format=raw,if=none,id=layer,readonly=on"));
        assert!(v.contains("socket,id=model1,path=/r/ctl1.sock"));
        assert!(v.contains("chardev=model1,name=org.gdr.model.card1"));
        assert!(v.find("id=root").unwrap() < v.find("id=layer").unwrap());
    }
}
