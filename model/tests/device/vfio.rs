//! The vfio-user glue end to end, through the `vfio_user` crate's own client over a real socket: region and
//! IRQ tables, config space, DMA through memfd-backed maps that QEMU would send, eventfd interrupts (MSI, and
//! INTx with UNMASK), a dma_unmap covering several maps, and the server exiting when the client leaves.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

use picoevb_model::vfio::{self, Backend};
use picoevb_model::{Device, DeviceOptions};
use picoevb_regs::xdma::{self, Dir};
use vfio_bindings::bindings::vfio::{
    VFIO_IRQ_INFO_AUTOMASKED, VFIO_IRQ_INFO_EVENTFD, VFIO_IRQ_INFO_MASKABLE,
    VFIO_IRQ_SET_ACTION_TRIGGER, VFIO_IRQ_SET_ACTION_UNMASK, VFIO_IRQ_SET_DATA_EVENTFD,
    VFIO_IRQ_SET_DATA_NONE, VFIO_PCI_CONFIG_REGION_INDEX, VFIO_PCI_INTX_IRQ_INDEX,
    VFIO_PCI_MSI_IRQ_INDEX, VFIO_PCI_MSIX_IRQ_INDEX,
};
use vfio_user::Client;

use crate::common::{CTRL_ALL, DONE, last, pattern};

const IOVA: u64 = 0x1000_0000;
const MAP: u64 = 1 << 20;

fn memfd(len: u64) -> File {
    // SAFETY: memfd_create with a valid NUL-terminated name; the File owns the new fd.
    let fd = unsafe { libc::memfd_create(c"picoevb-guest-ram".as_ptr(), 0) };
    assert!(fd >= 0, "memfd_create: {}", io::Error::last_os_error());
    // SAFETY: fd is fresh and owned by nobody else.
    let f = unsafe { File::from_raw_fd(fd) };
    f.set_len(len).unwrap();
    f
}

fn eventfd() -> File {
    // SAFETY: plain eventfd creation; the File owns the new fd.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK) };
    assert!(fd >= 0, "eventfd: {}", io::Error::last_os_error());
    // SAFETY: fd is fresh and owned by nobody else.
    unsafe { File::from_raw_fd(fd) }
}

/// Events counted on an eventfd since the last call (0 if none).
fn events(f: &File) -> u64 {
    let mut b = [0u8; 8];
    match (&*f).read(&mut b) {
        Ok(8) => u64::from_ne_bytes(b),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
        other => panic!("eventfd read: {other:?}"),
    }
}

struct Session {
    client: Client,
    device: std::sync::Arc<Device>,
}

impl Session {
    fn read32(&mut self, region: u32, offset: u64) -> u32 {
        let mut b = [0u8; 4];
        self.client.region_read(region, offset, &mut b).unwrap();
        u32::from_le_bytes(b)
    }

    fn write32(&mut self, region: u32, offset: u64, v: u32) {
        self.client
            .region_write(region, offset, &v.to_le_bytes())
            .unwrap();
    }

    fn run(&mut self, dir: Dir, desc: u64) -> u32 {
        let sg = dir.sgdma_base() as u64;
        self.write32(1, sg + xdma::SG_DESC_LO as u64, desc as u32);
        self.write32(1, sg + xdma::SG_DESC_HI as u64, (desc >> 32) as u32);
        self.write32(1, sg + xdma::SG_DESC_ADJ as u64, 0);
        self.write32(1, (dir.channel_base() + xdma::CH_CONTROL) as u64, CTRL_ALL);
        let t = Instant::now();
        loop {
            let status = self.read32(1, (dir.channel_base() + xdma::CH_STATUS) as u64);
            if status & xdma::STAT_BUSY == 0 {
                self.write32(
                    1,
                    (dir.channel_base() + xdma::CH_CONTROL_W1C) as u64,
                    xdma::CTRL_RUN,
                );
                return status;
            }
            assert!(t.elapsed() < Duration::from_secs(5), "{dir:?} stuck");
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

fn connect(path: &Path) -> Client {
    let t = Instant::now();
    loop {
        match Client::new(path) {
            Ok(c) => return c,
            Err(e) if t.elapsed() < Duration::from_secs(5) => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("cannot connect: {e}"),
        }
    }
}

#[test]
fn vfio_user_session_end_to_end() {
    let dir = std::env::temp_dir().join(format!("picoevb-model-vfio-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("vfio.sock");
    let mut backend = Backend::new(DeviceOptions::default());
    let device = backend.device().clone();
    let server_path = path.clone();
    let server = std::thread::spawn(move || vfio::serve(&server_path, &mut backend));
    let client = connect(&path);
    let mut s = Session { client, device };

    // Region and IRQ tables.
    let cfg = s
        .client
        .region(VFIO_PCI_CONFIG_REGION_INDEX)
        .expect("config region");
    assert_eq!(cfg.size, 4096);
    assert_eq!(
        s.client.region(0).map(|r| (r.size, r.flags)),
        Some((4096, 3))
    );
    assert_eq!(
        s.client.region(1).map(|r| (r.size, r.flags)),
        Some((65536, 3))
    );
    assert_eq!(s.client.region(2).map(|r| r.size), Some(0));
    let intx = s.client.get_irq_info(VFIO_PCI_INTX_IRQ_INDEX).unwrap();
    assert_eq!(
        (intx.count, intx.flags),
        (
            1,
            VFIO_IRQ_INFO_EVENTFD | VFIO_IRQ_INFO_MASKABLE | VFIO_IRQ_INFO_AUTOMASKED
        )
    );
    assert_eq!(
        s.client.get_irq_info(VFIO_PCI_MSI_IRQ_INDEX).unwrap().count,
        vfio::MSI_VECTORS
    );
    assert_eq!(
        s.client
            .get_irq_info(VFIO_PCI_MSIX_IRQ_INDEX)
            .unwrap()
            .count,
        0
    );
    assert_eq!(s.read32(VFIO_PCI_CONFIG_REGION_INDEX, 0), 0x0001_10de);
    let mut byte = [0u8; 1];
    s.client
        .region_read(VFIO_PCI_CONFIG_REGION_INDEX, 0x0a, &mut byte)
        .unwrap();
    assert_eq!(byte, [0x80], "sub-DWORD config read");

    // Guest RAM: one memfd, two maps, like QEMU's split RAM.
    let ram = memfd(2 * MAP);
    s.client.dma_map(0, IOVA, MAP, ram.as_raw_fd()).unwrap();
    s.client
        .dma_map(MAP, IOVA + MAP, MAP, ram.as_raw_fd())
        .unwrap();
    assert_eq!(s.device.snapshot().dma_maps, 2);

    // MSI through an eventfd.
    let msi = eventfd();
    s.client
        .set_irqs(
            VFIO_PCI_MSI_IRQ_INDEX,
            VFIO_IRQ_SET_ACTION_TRIGGER | VFIO_IRQ_SET_DATA_EVENTFD,
            0,
            1,
            &[msi.as_raw_fd()],
        )
        .unwrap();
    assert_eq!(
        s.read32(1, (xdma::CONFIG_BLOCK + xdma::CFG_MSI_ENABLE) as u64),
        1
    );
    s.write32(1, (xdma::IRQ_BLOCK + xdma::IRQ_CHAN_EN_W1S) as u64, 0b11);
    for d in Dir::ALL {
        s.write32(
            1,
            (d.channel_base() + xdma::CH_INT_MASK) as u64,
            0x00ff_fffe,
        );
    }

    // Bus mastering on (the DMA below is refused without it), then H2C from a buffer that straddles the two
    // maps, and C2H back elsewhere.
    s.client
        .region_write(VFIO_PCI_CONFIG_REGION_INDEX, 4, &0x0006u16.to_le_bytes())
        .unwrap();
    let data = pattern(4096, 0x77);
    let src = IOVA + MAP - 2048;
    ram.write_all_at(&data, src - IOVA).unwrap();
    ram.write_all_at(&last(4096, src, 0x400).to_le_bytes(), 0)
        .unwrap();
    assert_eq!(s.run(Dir::H2c, IOVA), DONE);
    assert_eq!(events(&msi), 1);
    let dst = IOVA + MAP + 0x8000;
    ram.write_all_at(&last(4096, 0x400, dst).to_le_bytes(), 0x1000)
        .unwrap();
    assert_eq!(s.run(Dir::C2h, IOVA + 0x1000), DONE);
    assert_eq!(events(&msi), 1);
    let mut back = vec![0u8; 4096];
    ram.read_exact_at(&mut back, dst - IOVA).unwrap();
    assert_eq!(back, data);

    // Switch to INTx: level-triggered, re-asserted on UNMASK while pending.
    s.client
        .set_irqs(
            VFIO_PCI_MSI_IRQ_INDEX,
            VFIO_IRQ_SET_ACTION_TRIGGER | VFIO_IRQ_SET_DATA_NONE,
            0,
            0,
            &[],
        )
        .unwrap();
    let intx = eventfd();
    s.client
        .set_irqs(
            VFIO_PCI_INTX_IRQ_INDEX,
            VFIO_IRQ_SET_ACTION_TRIGGER | VFIO_IRQ_SET_DATA_EVENTFD,
            0,
            1,
            &[intx.as_raw_fd()],
        )
        .unwrap();
    assert_eq!(
        events(&intx),
        1,
        "both channels' requests are still pending: asserted at once"
    );
    let unmask = VFIO_IRQ_SET_ACTION_UNMASK | VFIO_IRQ_SET_DATA_NONE;
    s.client
        .set_irqs(VFIO_PCI_INTX_IRQ_INDEX, unmask, 0, 1, &[])
        .unwrap();
    assert_eq!(events(&intx), 1, "still pending after EOI");
    for d in Dir::ALL {
        s.read32(1, (d.channel_base() + xdma::CH_STATUS_RC) as u64);
    }
    s.client
        .set_irqs(VFIO_PCI_INTX_IRQ_INDEX, unmask, 0, 1, &[])
        .unwrap();
    assert_eq!(events(&intx), 0, "serviced: no re-assert");
    assert_eq!(s.run(Dir::H2c, IOVA), DONE);
    assert_eq!(events(&intx), 1);

    // One unmap covering both maps; DMA there now fails.
    s.client.dma_unmap(IOVA, 2 * MAP).unwrap();
    assert_eq!(s.device.snapshot().dma_maps, 0);
    assert_eq!(s.run(Dir::H2c, IOVA), xdma::STAT_DESC_ERROR_UR);

    // Reset over the socket, then the client leaves and the server returns.
    s.write32(1, (xdma::CONFIG_BLOCK + xdma::CFG_PCIE_CTRL) as u64, 0);
    s.client.reset().unwrap();
    assert_eq!(
        s.read32(1, (xdma::CONFIG_BLOCK + xdma::CFG_PCIE_CTRL) as u64),
        1
    );
    let snapshot = s.device.snapshot();
    assert_eq!((snapshot.stats.irqs_msi, snapshot.stats.irqs_intx), (2, 3));
    s.client.shutdown().unwrap();
    drop(s);
    assert_eq!(server.join().unwrap(), Ok(()));
    assert!(!path.exists(), "socket removed when the server ends");
    let _ = std::fs::remove_dir(&dir);
}
