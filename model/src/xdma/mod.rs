//! The XDMA subsystem behind BAR1: one H2C and one C2H AXI-MM channel, the IRQ block, the config block and
//! the SGDMA blocks (PG195; register map in `picoevb_regs::xdma`).

pub mod engine;
pub mod irq;
pub mod regs;
pub mod transfer;

use picoevb_regs::xdma::Dir;

use engine::Engine;
use irq::IrqBlock;

/// XDMA register state.
#[derive(Clone, Debug)]
pub struct Xdma {
    /// Indexed by `Dir::index()`: H2C0, C2H0.
    pub engines: [Engine; 2],
    /// IRQ block.
    pub irq: IrqBlock,
    /// SGDMA common descriptor halt bits.
    halt: u32,
    credit_mode: u32,
    pcie_ctrl: u32,
    flush_timeout: u32,
}

impl Default for Xdma {
    fn default() -> Self {
        Self {
            engines: [Engine::new(Dir::H2c), Engine::new(Dir::C2h)],
            irq: IrqBlock::default(),
            halt: 0,
            credit_mode: 0,
            pcie_ctrl: 1, // relaxed ordering on at reset
            flush_timeout: 0,
        }
    }
}

impl Xdma {
    /// The channel of `dir`.
    pub fn engine(&self, dir: Dir) -> &Engine {
        &self.engines[dir.index()]
    }

    /// The channel of `dir`, mutably.
    pub fn engine_mut(&mut self, dir: Dir) -> &mut Engine {
        &mut self.engines[dir.index()]
    }

    /// Whether descriptor fetching of `dir` is halted through the SGDMA common block.
    pub fn halted(&self, dir: Dir) -> bool {
        self.halt & dir.sgdma_common_bit() != 0
    }

    /// Raw channel interrupt sources, one bit per channel (`Dir::irq_bit`).
    pub fn channel_sources(&self) -> u32 {
        Dir::ALL
            .into_iter()
            .filter(|&d| self.engine(d).irq_source())
            .fold(0, |acc, d| acc | d.irq_bit())
    }

    /// Back to reset values; transfers in flight are abandoned.
    pub fn reset(&mut self) {
        let mut engines = self.engines.clone();
        for e in &mut engines {
            e.reset();
        }
        *self = Self {
            engines,
            ..Self::default()
        };
    }
}
