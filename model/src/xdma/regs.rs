//! BAR1 address decoding: `offset[15:12]` target block, `[11:8]` channel, `[7:0]` register. Blocks and
//! channels that do not exist read 0 and ignore writes.

use log::debug;
use picoevb_regs::xdma::{self, Dir};

use super::Xdma;
use super::engine::ControlEdge;

/// Channel bits of the SGDMA common halt and credit registers (4 H2C, 4 C2H).
const SGC_CHANNEL_BITS: u32 = 0x000f_000f;

/// A max payload / read request code (0 = 128 B .. 5 = 4096 B) as the config block reports it.
fn size_code(code: u32) -> u32 {
    code.min(5)
}

/// The identifier of a block that exists (channel 0).
fn id(target: usize) -> u32 {
    xdma::identifier(target, 0)
}

/// State outside the XDMA that some BAR1 registers reflect.
#[derive(Clone, Copy, Debug, Default)]
pub struct Context {
    /// MSI enabled by the OS (config block 0x14 bit 0).
    pub msi_enabled: bool,
    /// PCIe max payload code from the PCIe device control register.
    pub max_payload: u32,
    /// PCIe max read request code.
    pub max_read: u32,
    /// Raw user interrupt sources (`usr_irq_req`).
    pub user_sources: u32,
}

/// What an access changed that the device must act on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Effects {
    /// Interrupt sources, masks or enables may have changed.
    pub irq: bool,
    /// Run rose on this engine: post a job.
    pub started: Option<Dir>,
    /// Something a waiting worker depends on changed (Run cleared, halt bits).
    pub wake: bool,
}

impl Xdma {
    /// Reads the DWORD at BAR1 `offset`.
    pub fn read(&mut self, offset: usize, ctx: &Context) -> (u32, Effects) {
        let (target, channel, reg) = (
            xdma::target_of(offset),
            xdma::channel_of(offset),
            xdma::reg_of(offset),
        );
        let mut fx = Effects::default();
        if channel >= xdma::CHANNELS {
            return (0, fx);
        }
        let v = match target {
            xdma::TARGET_H2C | xdma::TARGET_C2H => {
                let dir = if target == xdma::TARGET_H2C {
                    Dir::H2c
                } else {
                    Dir::C2h
                };
                fx.irq = reg == xdma::CH_STATUS_RC;
                self.engine_mut(dir).read_channel(reg)
            }
            xdma::TARGET_H2C_SGDMA => self.engine(Dir::H2c).read_sgdma(reg),
            xdma::TARGET_C2H_SGDMA => self.engine(Dir::C2h).read_sgdma(reg),
            xdma::TARGET_IRQ => self.irq.read(reg, self.channel_sources(), ctx.user_sources),
            xdma::TARGET_CONFIG => self.read_config(reg, ctx),
            xdma::TARGET_SGDMA_COMMON => match reg {
                0x00 => id(xdma::TARGET_SGDMA_COMMON),
                xdma::SGC_DESC_CTRL | xdma::SGC_DESC_CTRL_W1S | xdma::SGC_DESC_CTRL_W1C => {
                    self.halt
                }
                xdma::SGC_CREDIT_MODE | xdma::SGC_CREDIT_MODE_W1S | xdma::SGC_CREDIT_MODE_W1C => {
                    self.credit_mode
                }
                _ => 0,
            },
            _ => 0, // no MSI-X table, no stream channels
        };
        (v, fx)
    }

    fn read_config(&self, reg: usize, ctx: &Context) -> u32 {
        match reg {
            0x00 => id(xdma::TARGET_CONFIG),
            // The core does not know the bus/device number QEMU assigned; 0 is what an unconfigured core reads.
            xdma::CFG_BUSDEV => 0,
            xdma::CFG_MAX_PAYLOAD | xdma::CFG_AXI_MAX_PAYLOAD => size_code(ctx.max_payload),
            xdma::CFG_MAX_READ | xdma::CFG_AXI_MAX_READ => size_code(ctx.max_read),
            xdma::CFG_SYSTEM_ID => xdma::SYSTEM_ID,
            xdma::CFG_MSI_ENABLE => u32::from(ctx.msi_enabled),
            xdma::CFG_DATA_WIDTH => 0, // 64-bit
            xdma::CFG_PCIE_CTRL => self.pcie_ctrl,
            xdma::CFG_WRITE_FLUSH_TIMEOUT => self.flush_timeout,
            _ => 0,
        }
    }

    /// Writes the DWORD at BAR1 `offset`.
    pub fn write(&mut self, offset: usize, v: u32) -> Effects {
        let (target, channel, reg) = (
            xdma::target_of(offset),
            xdma::channel_of(offset),
            xdma::reg_of(offset),
        );
        let mut fx = Effects::default();
        if channel >= xdma::CHANNELS {
            debug!("BAR1 write to absent channel {offset:#06x} = {v:#x}");
            return fx;
        }
        match target {
            xdma::TARGET_H2C | xdma::TARGET_C2H => {
                let dir = if target == xdma::TARGET_H2C {
                    Dir::H2c
                } else {
                    Dir::C2h
                };
                match self.engine_mut(dir).write_channel(reg, v) {
                    ControlEdge::Started => fx.started = Some(dir),
                    ControlEdge::Stopped => fx.wake = true,
                    ControlEdge::None => {}
                }
                fx.irq = true;
            }
            xdma::TARGET_H2C_SGDMA => self.engine_mut(Dir::H2c).write_sgdma(reg, v),
            xdma::TARGET_C2H_SGDMA => self.engine_mut(Dir::C2h).write_sgdma(reg, v),
            xdma::TARGET_IRQ => {
                self.irq.write(reg, v);
                fx.irq = true;
            }
            xdma::TARGET_CONFIG => match reg {
                xdma::CFG_PCIE_CTRL => self.pcie_ctrl = v & 1,
                xdma::CFG_WRITE_FLUSH_TIMEOUT => self.flush_timeout = v & 0x1f,
                _ => debug!("config block: write to read-only register {reg:#04x} = {v:#x}"),
            },
            xdma::TARGET_SGDMA_COMMON => {
                match reg {
                    xdma::SGC_DESC_CTRL => self.halt = v & SGC_CHANNEL_BITS,
                    xdma::SGC_DESC_CTRL_W1S => self.halt |= v & SGC_CHANNEL_BITS,
                    xdma::SGC_DESC_CTRL_W1C => self.halt &= !v,
                    xdma::SGC_CREDIT_MODE => self.credit_mode = v & SGC_CHANNEL_BITS,
                    xdma::SGC_CREDIT_MODE_W1S => self.credit_mode |= v & SGC_CHANNEL_BITS,
                    xdma::SGC_CREDIT_MODE_W1C => self.credit_mode &= !v,
                    _ => debug!("SGDMA common: write to unknown register {reg:#04x} = {v:#x}"),
                }
                fx.wake = true;
            }
            _ => debug!("BAR1 write to absent block {offset:#06x} = {v:#x}"),
        }
        fx
    }
}
