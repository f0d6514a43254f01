//! vfio-user glue: the `ServerBackend` QEMU's `vfio-user-pci` talks to, and the region and IRQ tables the
//! server advertises.
//!
//! * Regions: BAR0 (4 KiB) and BAR1 (64 KiB) read/write, no mmap (every access is a message, so the model
//!   sees it); config space (region 7, 4 KiB) implemented by the model; everything else absent.
//! * IRQs: INTx (1, eventfd, maskable, auto-masked), MSI (1 vector: the design's MSI capability advertises
//!   one, and QEMU sizes MSI from the capability), no MSI-X, no ERR/REQ.
//! * DMA: `DMA_MAP` fds are mmapped ([`MappedGuestMemory`]).
//!
//! Backend methods return errors only for requests that expect a reply and really failed: an error on a
//! posted (no-reply) write would put an unexpected message on the socket.

use std::fs::File;
use std::io;
use std::mem::size_of;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::sync::Arc;

use log::{debug, info, warn};
use picoevb_regs::pci::{BAR_DMA_SIZE, BAR_USER_SIZE};
use vfio_bindings::bindings::vfio::{
    VFIO_IRQ_INFO_AUTOMASKED, VFIO_IRQ_INFO_EVENTFD, VFIO_IRQ_INFO_MASKABLE,
    VFIO_IRQ_INFO_NORESIZE, VFIO_IRQ_SET_ACTION_MASK, VFIO_IRQ_SET_ACTION_TRIGGER,
    VFIO_IRQ_SET_ACTION_TYPE_MASK, VFIO_IRQ_SET_ACTION_UNMASK, VFIO_IRQ_SET_DATA_EVENTFD,
    VFIO_IRQ_SET_DATA_NONE, VFIO_IRQ_SET_DATA_TYPE_MASK, VFIO_PCI_BAR0_REGION_INDEX,
    VFIO_PCI_BAR1_REGION_INDEX, VFIO_PCI_CONFIG_REGION_INDEX, VFIO_PCI_INTX_IRQ_INDEX,
    VFIO_PCI_MSI_IRQ_INDEX, VFIO_PCI_NUM_IRQS, VFIO_PCI_NUM_REGIONS, VFIO_REGION_INFO_FLAG_READ,
    VFIO_REGION_INFO_FLAG_WRITE, vfio_region_info,
};
use vfio_user::{DmaMapFlags, DmaUnmapFlags, IrqInfo, Server, ServerBackend, ServerRegion};

use crate::config_space;
use crate::device::Device;
use crate::interrupts::{EventfdSink, InterruptSink, IrqLine};
use crate::mapped_memory::MappedGuestMemory;
use crate::options::DeviceOptions;

/// MSI vectors offered (matches the MSI capability's Multiple Message Capable = 1 vector).
pub const MSI_VECTORS: u32 = 1;

/// The regions the server advertises, indexed like VFIO PCI regions.
pub fn regions() -> Vec<ServerRegion> {
    (0..VFIO_PCI_NUM_REGIONS)
        .map(|index| {
            let size = match index {
                VFIO_PCI_BAR0_REGION_INDEX => BAR_USER_SIZE as u64,
                VFIO_PCI_BAR1_REGION_INDEX => BAR_DMA_SIZE as u64,
                VFIO_PCI_CONFIG_REGION_INDEX => config_space::SIZE as u64,
                _ => 0,
            };
            let flags = if size > 0 {
                VFIO_REGION_INFO_FLAG_READ | VFIO_REGION_INFO_FLAG_WRITE
            } else {
                0
            };
            ServerRegion {
                region_info: vfio_region_info {
                    argsz: size_of::<vfio_region_info>() as u32,
                    flags,
                    index,
                    cap_offset: 0,
                    size,
                    offset: 0,
                },
                sparse_areas: Vec::new(),
                mmap_fd: None,
            }
        })
        .collect()
}

/// The interrupt indexes the server advertises (all five VFIO PCI indexes; QEMU queries ERR and REQ too).
pub fn irqs() -> Vec<IrqInfo> {
    (0..VFIO_PCI_NUM_IRQS)
        .map(|index| {
            let (count, flags) = match index {
                VFIO_PCI_INTX_IRQ_INDEX => (
                    1,
                    VFIO_IRQ_INFO_EVENTFD | VFIO_IRQ_INFO_MASKABLE | VFIO_IRQ_INFO_AUTOMASKED,
                ),
                VFIO_PCI_MSI_IRQ_INDEX => {
                    (MSI_VECTORS, VFIO_IRQ_INFO_EVENTFD | VFIO_IRQ_INFO_NORESIZE)
                }
                _ => (0, 0),
            };
            IrqInfo {
                index,
                flags,
                count,
            }
        })
        .collect()
}

/// The model as a vfio-user server backend.
pub struct Backend {
    device: Arc<Device>,
    memory: Arc<MappedGuestMemory>,
    sink: Arc<EventfdSink>,
}

impl Backend {
    /// A device at power-on with no DMA maps and no interrupt eventfds.
    pub fn new(options: DeviceOptions) -> Self {
        let memory = Arc::new(MappedGuestMemory::new());
        let sink = Arc::new(EventfdSink::new());
        let device = Arc::new(Device::new(options, memory.clone(), sink.clone()));
        Self {
            device,
            memory,
            sink,
        }
    }

    /// The device, for the control channel.
    pub fn device(&self) -> &Arc<Device> {
        &self.device
    }

    fn set_intx_irqs(&self, action: u32, data: u32, count: u32, fds: Vec<File>) -> io::Result<()> {
        match action {
            VFIO_IRQ_SET_ACTION_UNMASK if data == VFIO_IRQ_SET_DATA_NONE => {
                self.device.intx_unmask()
            }
            VFIO_IRQ_SET_ACTION_UNMASK => {
                // A resample eventfd only comes with KVM's irqfd; QEMU under TCG unmasks with DATA_NONE.
                warn!(
                    "INTx unmask eventfd not supported; expecting SET_IRQS(UNMASK|DATA_NONE) instead"
                );
            }
            VFIO_IRQ_SET_ACTION_MASK => self.device.intx_mask(),
            VFIO_IRQ_SET_ACTION_TRIGGER if data == VFIO_IRQ_SET_DATA_EVENTFD && count > 0 => {
                let fd = fds.into_iter().next();
                info!(
                    "INTx {}",
                    if fd.is_some() {
                        "eventfd set"
                    } else {
                        "disabled (no eventfd)"
                    }
                );
                let enabled = fd.is_some();
                self.sink.set_intx(fd);
                self.device.set_intx(enabled);
            }
            VFIO_IRQ_SET_ACTION_TRIGGER if count == 0 => {
                info!("INTx disabled");
                self.sink.set_intx(None);
                self.device.set_intx(false);
            }
            VFIO_IRQ_SET_ACTION_TRIGGER => {
                // DATA_NONE with a count: fire the interrupt (VFIO's loopback test).
                self.sink.signal(IrqLine::Intx);
            }
            _ => warn!("unsupported INTx SET_IRQS action {action:#x}"),
        }
        Ok(())
    }

    fn set_msi_irqs(
        &self,
        action: u32,
        data: u32,
        start: u32,
        count: u32,
        fds: Vec<File>,
    ) -> io::Result<()> {
        match action {
            VFIO_IRQ_SET_ACTION_TRIGGER if count == 0 => {
                info!("MSI disabled");
                self.sink.clear_msi();
                self.device.set_msi_vectors(0);
            }
            VFIO_IRQ_SET_ACTION_TRIGGER if data == VFIO_IRQ_SET_DATA_EVENTFD => {
                if start.saturating_add(count) > MSI_VECTORS {
                    warn!(
                        "MSI vectors {start}..{} requested, the function has {MSI_VECTORS}",
                        start + count
                    );
                }
                if start == 0 {
                    self.sink.clear_msi();
                }
                let vectors = self.sink.set_msi(start, fds);
                info!("MSI enabled with {vectors} vector(s)");
                self.device.set_msi_vectors(vectors);
            }
            VFIO_IRQ_SET_ACTION_TRIGGER => {
                for v in start..start.saturating_add(count) {
                    self.sink.signal(IrqLine::Msi(v));
                }
            }
            _ => debug!("MSI SET_IRQS action {action:#x} ignored: no per-vector masking"),
        }
        Ok(())
    }
}

impl ServerBackend for Backend {
    fn region_read(&mut self, region: u32, offset: u64, data: &mut [u8]) -> io::Result<()> {
        match region {
            VFIO_PCI_CONFIG_REGION_INDEX => self.device.config_read(offset, data),
            VFIO_PCI_BAR0_REGION_INDEX | VFIO_PCI_BAR1_REGION_INDEX => {
                self.device.bar_read(region, offset, data)
            }
            _ => {
                debug!("read from absent region {region}");
                data.fill(0xff);
            }
        }
        Ok(())
    }

    fn region_write(&mut self, region: u32, offset: u64, data: &[u8]) -> io::Result<()> {
        match region {
            VFIO_PCI_CONFIG_REGION_INDEX => self.device.config_write(offset, data),
            VFIO_PCI_BAR0_REGION_INDEX | VFIO_PCI_BAR1_REGION_INDEX => {
                self.device.bar_write(region, offset, data)
            }
            _ => debug!("write to absent region {region} ignored"),
        }
        Ok(())
    }

    fn dma_map(
        &mut self,
        flags: DmaMapFlags,
        offset: u64,
        address: u64,
        size: u64,
        fd: Option<File>,
    ) -> io::Result<()> {
        let (r, w) = (
            flags.contains(DmaMapFlags::READ),
            flags.contains(DmaMapFlags::WRITE),
        );
        self.memory
            .map(address, size, offset, r, w, fd)
            .inspect_err(|e| {
                warn!("DMA_MAP iova={address:#x} size={size:#x} offset={offset:#x} failed: {e}");
            })
    }

    fn dma_unmap(&mut self, flags: DmaUnmapFlags, address: u64, size: u64) -> io::Result<()> {
        if flags.contains(DmaUnmapFlags::UNMAP_ALL) {
            let n = self.memory.unmap_all();
            debug!("DMA_UNMAP all: {n} map(s)");
        } else {
            self.memory.unmap(address, size);
        }
        Ok(())
    }

    fn reset(&mut self) -> io::Result<()> {
        info!("device reset");
        self.device.reset();
        Ok(())
    }

    fn set_irqs(
        &mut self,
        index: u32,
        flags: u32,
        start: u32,
        count: u32,
        fds: Vec<File>,
    ) -> io::Result<()> {
        let (action, data) = (
            flags & VFIO_IRQ_SET_ACTION_TYPE_MASK,
            flags & VFIO_IRQ_SET_DATA_TYPE_MASK,
        );
        debug!(
            "SET_IRQS index={index} flags={flags:#x} start={start} count={count} fds={}",
            fds.len()
        );
        match index {
            VFIO_PCI_INTX_IRQ_INDEX => self.set_intx_irqs(action, data, count, fds),
            VFIO_PCI_MSI_IRQ_INDEX => self.set_msi_irqs(action, data, start, count, fds),
            _ if count == 0 => Ok(()),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("interrupt index {index} has no vectors"),
            )),
        }
    }
}

/// Removes a stale socket left by an earlier run; refuses to touch anything that is not a socket.
pub fn remove_stale_socket(path: &Path) -> Result<(), String> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => std::fs::remove_file(path)
            .map_err(|e| format!("cannot remove stale socket {}: {e}", path.display())),
        Ok(_) => Err(format!(
            "{} exists and is not a socket; not replacing it",
            path.display()
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("cannot inspect {}: {e}", path.display())),
    }
}

/// Binds the vfio-user socket, serves one client until it disconnects, then returns.
pub fn serve(socket: &Path, backend: &mut Backend) -> Result<(), String> {
    remove_stale_socket(socket)?;
    let server = Server::new(socket, true, irqs(), regions())
        .map_err(|e| format!("cannot listen on {}: {e}", socket.display()))?;
    info!("vfio-user server listening on {}", socket.display());
    server
        .run(backend)
        .map_err(|e| format!("vfio-user session failed: {e}"))?;
    info!("client disconnected");
    Ok(())
}
