//! Which way GPU memory reaches the card, chosen from what CUDA says the device supports and what the
//! driver says it can pin, and the alignment each way needs (docs/driver.md, "GPU memory paths").
//!
//! * **nv-p2p**: `cuMemAlloc` memory pinned by PIN_CUDA through NVIDIA's nvidia_p2p API. CUDA reports it
//!   with `CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED`; on Tegra only Orin through CUDA 13 has it.
//! * **dma-buf**: `cuMemAlloc` (or dma-buf-capable host) memory exported by
//!   `cuMemGetHandleForAddressRange(..., CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD)` and imported by the driver
//!   (`CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED`; dGPUs with NVIDIA's open kernel modules).
//! * **pinned host**: `cuMemHostAlloc` memory, which the GPU reads and writes over its own link and the
//!   card reaches through the host DMA path. Always possible: what Thor, and Orin after CUDA 14, use. A
//!   driver with `CAP_HOST_SURFACE` pins it as a surface (PIN_HOST: one handle, revoked when the memory
//!   goes, as nv-p2p surfaces are); an older one moves it as plain host memory.

use picoevb_abi::{CAP_CUDA_DGPU, CAP_CUDA_JETSON, CAP_DMABUF, CAP_HOST_SURFACE};

/// `CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED` (CUDA 11.3+).
pub const CU_ATTR_GPU_DIRECT_RDMA_SUPPORTED: i32 = 116;
/// `CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED` (CUDA 11.7+).
pub const CU_ATTR_DMA_BUF_SUPPORTED: i32 = 124;
/// `CU_DEVICE_ATTRIBUTE_HOST_ALLOC_DMA_BUF_SUPPORTED` (CUDA 13).
pub const CU_ATTR_HOST_ALLOC_DMA_BUF_SUPPORTED: i32 = 146;

/// The three attributes, as CUDA reports them for one device (an attribute the driver does not know
/// reads as false).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CudaAttrs {
    pub gpu_direct_rdma: bool,
    pub dma_buf: bool,
    pub host_alloc_dma_buf: bool,
}

/// What the driver can pin, from `AbiInfo::caps` (0 for a driver without ABI_INFO: the reference, which
/// has nv-p2p for Tegra).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DriverPaths {
    pub nv_p2p_tegra: bool,
    pub nv_p2p_dgpu: bool,
    pub dma_buf: bool,
    /// PIN_HOST: pinned host memory as a surface.
    pub host_surface: bool,
}

impl DriverPaths {
    /// From `AbiInfo::caps`.
    pub fn from_caps(caps: u64) -> Self {
        Self {
            nv_p2p_tegra: caps & CAP_CUDA_JETSON != 0,
            nv_p2p_dgpu: caps & CAP_CUDA_DGPU != 0,
            dma_buf: caps & CAP_DMABUF != 0,
            host_surface: caps & CAP_HOST_SURFACE != 0,
        }
    }
}

/// The way GPU memory reaches the card.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GpuPath {
    /// Device memory pinned by PIN_CUDA through nvidia_p2p (Tegra flavour).
    NvP2pTegra,
    /// Device memory pinned by PIN_CUDA through nvidia_p2p (dGPU flavour).
    NvP2pDgpu,
    /// Device memory exported as a dma-buf and imported by the driver.
    DmaBuf,
    /// `cuMemHostAlloc` memory through the host DMA path.
    PinnedHost,
}

impl GpuPath {
    /// The name the self-test and `gdrctl status` print.
    pub fn name(self) -> &'static str {
        match self {
            GpuPath::NvP2pTegra => "nv-p2p",
            GpuPath::NvP2pDgpu => "nv-p2p-dgpu",
            GpuPath::DmaBuf => "dma-buf",
            GpuPath::PinnedHost => "pinned-host",
        }
    }

    /// Alignment of a buffer's start and length on this path, in bytes: the GPU page for Tegra nv-p2p
    /// (4 KiB), NVIDIA's 64 KiB for dGPU nv-p2p (560+ drivers refuse less), the host page for dma-buf
    /// (what CUDA's export and the importer's scatterlist work in), and the DMA engine's 4 bytes for
    /// pinned host memory.
    pub fn alignment(self, host_page: u64) -> u64 {
        match self {
            GpuPath::NvP2pTegra => 4096,
            GpuPath::NvP2pDgpu => 65536,
            GpuPath::DmaBuf => host_page,
            GpuPath::PinnedHost => 4,
        }
    }
}

/// nv-p2p where CUDA says GPUDirect RDMA works and the driver has the matching flavour; dma-buf where
/// CUDA can export device memory and the driver imports it; pinned host memory otherwise.
pub fn choose(cuda: CudaAttrs, driver: DriverPaths) -> GpuPath {
    if cuda.gpu_direct_rdma && driver.nv_p2p_tegra {
        GpuPath::NvP2pTegra
    } else if cuda.gpu_direct_rdma && driver.nv_p2p_dgpu {
        GpuPath::NvP2pDgpu
    } else if cuda.dma_buf && driver.dma_buf {
        GpuPath::DmaBuf
    } else {
        GpuPath::PinnedHost
    }
}

/// Whether `addr`/`len` meet `path`'s alignment (a zero length never does).
pub fn aligned(path: GpuPath, host_page: u64, addr: u64, len: u64) -> bool {
    let a = path.alignment(host_page);
    len > 0 && addr.is_multiple_of(a) && len.is_multiple_of(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [bool; 2] = [false, true];

    /// Every combination of the three attributes and three driver paths: the table the docs state.
    #[test]
    fn decision_table() {
        for rdma in ALL {
            for dmabuf in ALL {
                for host_dmabuf in ALL {
                    for tegra in ALL {
                        for dgpu in ALL {
                            for (imp, host) in
                                [(false, false), (false, true), (true, false), (true, true)]
                            {
                                let c = CudaAttrs {
                                    gpu_direct_rdma: rdma,
                                    dma_buf: dmabuf,
                                    host_alloc_dma_buf: host_dmabuf,
                                };
                                // PIN_HOST changes how pinned host memory is moved, never the choice.
                                let d = DriverPaths {
                                    nv_p2p_tegra: tegra,
                                    nv_p2p_dgpu: dgpu,
                                    dma_buf: imp,
                                    host_surface: host,
                                };
                                let want = if rdma && tegra {
                                    GpuPath::NvP2pTegra
                                } else if rdma && dgpu {
                                    GpuPath::NvP2pDgpu
                                } else if dmabuf && imp {
                                    GpuPath::DmaBuf
                                } else {
                                    GpuPath::PinnedHost
                                };
                                assert_eq!(choose(c, d), want, "{c:?} {d:?}");
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn platforms() {
        let orin_cuda13 = CudaAttrs {
            gpu_direct_rdma: true,
            ..Default::default()
        };
        let jetson = DriverPaths::from_caps(CAP_CUDA_JETSON);
        assert_eq!(choose(orin_cuda13, jetson), GpuPath::NvP2pTegra);
        // Thor, or Orin with CUDA 14: no GPUDirect RDMA attribute, no provider in the driver.
        let thor = CudaAttrs::default();
        assert_eq!(choose(thor, DriverPaths::from_caps(0)), GpuPath::PinnedHost);
        // Orin after CUDA 14 keeps the provider loaded, but CUDA no longer vouches for it.
        assert_eq!(choose(thor, jetson), GpuPath::PinnedHost);
        // An H100 with the open modules and a dGPU build.
        let h100 = CudaAttrs {
            gpu_direct_rdma: true,
            dma_buf: true,
            host_alloc_dma_buf: false,
        };
        assert_eq!(
            choose(h100, DriverPaths::from_caps(CAP_CUDA_DGPU)),
            GpuPath::NvP2pDgpu
        );
        assert_eq!(
            choose(
                h100,
                DriverPaths {
                    dma_buf: true,
                    ..Default::default()
                }
            ),
            GpuPath::DmaBuf
        );
    }

    #[test]
    fn alignment_contract() {
        assert!(aligned(GpuPath::NvP2pTegra, 4096, 0x1000, 0x1000));
        assert!(!aligned(GpuPath::NvP2pTegra, 4096, 0x1004, 0x1000));
        assert!(!aligned(GpuPath::NvP2pDgpu, 4096, 0x1000, 0x1000));
        assert!(aligned(GpuPath::NvP2pDgpu, 4096, 0x10000, 0x20000));
        assert!(aligned(GpuPath::DmaBuf, 16384, 0x4000, 0x4000));
        assert!(!aligned(GpuPath::DmaBuf, 16384, 0x1000, 0x4000));
        assert!(aligned(GpuPath::PinnedHost, 4096, 0x104, 8));
        assert!(!aligned(GpuPath::PinnedHost, 4096, 0x104, 0));
    }
}
