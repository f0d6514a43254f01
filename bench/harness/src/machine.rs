//! What differs between the guest architectures and IOMMU setups: QEMU binary, machine, console, kernel
//! image name and the IOMMU device the card's DMA goes through.

/// The guest architecture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// q35 with an 8250 console: the fast bench.
    X86_64,
    /// `-M virt` (GICv3 with an ITS for MSI, PL011 console): the Jetson's architecture.
    Arm64,
}

/// The IOMMU in front of the card, if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Iommu {
    None,
    /// virtio-iommu (both architectures): QEMU notifies vfio of every map and unmap.
    Virtio,
    /// intel-iommu with caching mode (x86_64): every map is a notified invalidation.
    Intel,
    /// The virt machine's SMMUv3 (arm64): what a Jetson has.
    Smmuv3,
}

impl Arch {
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "x86_64" => Ok(Arch::X86_64),
            "arm64" | "aarch64" => Ok(Arch::Arm64),
            _ => Err(format!("--arch {s}: expected x86_64 or arm64")),
        }
    }

    pub fn qemu(self) -> &'static str {
        match self {
            Arch::X86_64 => "qemu-system-x86_64",
            Arch::Arm64 => "qemu-system-aarch64",
        }
    }

    /// The kernel's name in the run dir (the image type QEMU loads).
    pub fn kernel_name(self) -> &'static str {
        match self {
            Arch::X86_64 => "bzImage",
            Arch::Arm64 => "Image",
        }
    }

    pub fn console(self) -> &'static str {
        match self {
            Arch::X86_64 => "ttyS0",
            Arch::Arm64 => "ttyAMA0",
        }
    }

    /// Kernel arguments this architecture needs under TCG.
    pub fn kernel_args(self) -> &'static str {
        match self {
            // check_timer() waits a fixed TSC delay for IO-APIC timer ticks; on a loaded host TCG delivers
            // too few in that window and the boot panics "IO-APIC + timer doesn't work" (seen twice at a load
            // of ~18). no_timer_check makes timer_irq_works() trust the timer (io_apic.c).
            Arch::X86_64 => "no_timer_check",
            Arch::Arm64 => "",
        }
    }

    /// `-cpu` for TCG.
    pub fn cpu(self) -> &'static str {
        match self {
            // No 5-level paging: with LA57, an interrupt that lands while identify_cpu() re-detects the CPU
            // features makes KASAN see the 4-level layout for a moment and report a per-CPU read as a "wild
            // access" (seen about once in five boots of 6.18 under TCG). The driver gains nothing from LA57.
            Arch::X86_64 => "max,la57=off",
            // Pointer authentication with QEMU's cheap implementation-defined algorithm: the architected
            // QARMA one makes every function return slow under TCG.
            Arch::Arm64 => "max,pauth-impdef=on",
        }
    }

    /// `-machine` with the shared-RAM backend (and the SMMUv3 where asked).
    pub fn machine(self, iommu: Iommu) -> String {
        match self {
            Arch::X86_64 => "q35,memory-backend=mem".into(),
            Arch::Arm64 => {
                let smmu = if iommu == Iommu::Smmuv3 {
                    ",iommu=smmuv3"
                } else {
                    ""
                };
                format!("virt,gic-version=3,memory-backend=mem{smmu}")
            }
        }
    }
}

impl Iommu {
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "none" => Ok(Iommu::None),
            "virtio" => Ok(Iommu::Virtio),
            "intel" => Ok(Iommu::Intel),
            "smmuv3" => Ok(Iommu::Smmuv3),
            _ => Err(format!(
                "--iommu {s}: expected none, virtio, intel or smmuv3"
            )),
        }
    }

    pub fn check(self, arch: Arch) -> Result<(), String> {
        match (self, arch) {
            (Iommu::Intel, Arch::Arm64) => Err("--iommu intel needs --arch x86_64".into()),
            (Iommu::Smmuv3, Arch::X86_64) => Err("--iommu smmuv3 needs --arch arm64".into()),
            _ => Ok(()),
        }
    }

    /// The `-device` that adds it, before the card (QEMU wants the IOMMU created first).
    pub fn device(self) -> Option<&'static str> {
        match self {
            Iommu::Virtio => Some("virtio-iommu-pci"),
            Iommu::Intel => Some("intel-iommu,caching-mode=on"),
            Iommu::None | Iommu::Smmuv3 => None,
        }
    }

    /// Kernel arguments: unmaps reach the IOMMU (and QEMU, and the model) before the unmap call returns, not
    /// batched later, so a stale address is unmapped the moment the driver lets go of it.
    pub fn append(self) -> &'static str {
        match self {
            Iommu::None => "",
            Iommu::Intel => "intel_iommu=on iommu.strict=1",
            Iommu::Virtio | Iommu::Smmuv3 => "iommu.strict=1",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_refuses_mismatches() {
        assert_eq!(Arch::parse("aarch64"), Ok(Arch::Arm64));
        assert!(Arch::parse("riscv").is_err());
        assert_eq!(Iommu::parse("virtio"), Ok(Iommu::Virtio));
        assert!(Iommu::parse("amd").is_err());
        assert!(Iommu::Intel.check(Arch::Arm64).is_err());
        assert!(Iommu::Smmuv3.check(Arch::X86_64).is_err());
        assert!(Iommu::Virtio.check(Arch::Arm64).is_ok());
        assert_eq!(
            Arch::Arm64.machine(Iommu::Smmuv3),
            "virt,gic-version=3,memory-backend=mem,iommu=smmuv3"
        );
    }
}
