//! Counters the control channel reports: what the model did, independent of register state.

/// Per-engine activity.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Rising edges of Run.
    pub runs: u64,
    /// Descriptors completed.
    pub descriptors: u64,
    /// Data bytes moved.
    pub bytes: u64,
    /// Transfers that stopped on an error.
    pub errors: u64,
    /// Poll-mode write-backs that reached host memory.
    pub writebacks: u64,
}

/// Everything the model counts; `reset_counters` zeroes it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Indexed by `Dir::index()`: H2C, C2H.
    pub engines: [EngineStats; 2],
    /// MSI messages delivered.
    pub irqs_msi: u64,
    /// INTx assertions delivered (each one is auto-masked by QEMU until UNMASK).
    pub irqs_intx: u64,
    /// C2H (or poll-mode write-back) writes to host memory that no DMA map covers, dropped like a posted
    /// write that goes nowhere; counted once per descriptor (or write-back).
    pub dropped_writes: u64,
    /// Descriptors fetched by a run the bound driver never started (`leave_running`): DMA by an engine
    /// a driver that is gone left running. Zero when probe stops such an engine before enabling bus
    /// mastering.
    pub stray_dma: u64,
    /// Faults applied to transfers (one per fault kind per transfer).
    pub faults_injected: u64,
    /// The host addresses the last transfers started at (IOVAs behind an IOMMU).
    pub host_addrs: crate::host_addrs::HostAddrs,
}
