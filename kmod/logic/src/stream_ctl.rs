//! IOC_STREAM, written once for both kernels: what the call asks (checked before any register is touched)
//! and how it is carried out on the stream block over the user BAR (`picoevb_regs::stream`). The glue
//! holds the card (its gate) around [`control`] and copies the answer out.

use crate::abi;
use crate::channel::Regs32;
use crate::errno::Errno;
use crate::stream::{self, ConfigError, SourceConfig, Stream};

/// A checked IOC_STREAM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Read only.
    Query,
    /// Set the source's enable and configuration.
    Set { enable: bool, config: SourceConfig },
    /// Clear the source's sequence and counters.
    ClearSource,
    /// Clear the checker's counters.
    ClearSink,
}

/// Checks an IOC_STREAM argument: an unknown op, an `enable` other than 0 or 1, an invalid record size or
/// nonzero `reserved` is EINVAL.
pub fn parse(a: &abi::Stream) -> Result<Op, Errno> {
    if a.reserved != [0; 2] {
        return Err(Errno::EINVAL);
    }
    match a.op {
        abi::STREAM_QUERY => Ok(Op::Query),
        abi::STREAM_SET if a.enable <= 1 && stream::record_bytes_valid(a.record_bytes) => {
            Ok(Op::Set {
                enable: a.enable == 1,
                config: SourceConfig {
                    record_bytes: a.record_bytes,
                    period_ticks: a.period_ticks,
                },
            })
        }
        abi::STREAM_CLEAR_SOURCE => Ok(Op::ClearSource),
        abi::STREAM_CLEAR_SINK => Ok(Op::ClearSink),
        _ => Err(Errno::EINVAL),
    }
}

/// Why [`control`] failed: a request the block cannot take (EINVAL, nothing written), or a register access
/// (the card gone).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused<E> {
    Invalid,
    Access(E),
}

impl<E> From<E> for Refused<E> {
    fn from(e: E) -> Self {
        Refused::Access(e)
    }
}

/// Carries out `op` on the stream block behind `regs` (BAR0), then reads the block into the answer. A
/// record size change while the source stays enabled is refused with nothing written: the source applies
/// it to the records read out after it, so one record could be cut mid-way. A source being disabled stops
/// before its configuration changes; one being enabled starts after.
pub fn control<R: Regs32 + ?Sized>(regs: &R, op: Op) -> Result<abi::Stream, Refused<R::Error>> {
    let s = Stream::new(regs);
    match op {
        Op::Query => {}
        Op::Set { enable, config } => {
            let was_on = s.source_enabled()?;
            if was_on && enable && s.source_config()?.record_bytes != config.record_bytes {
                return Err(Refused::Invalid);
            }
            if !enable {
                s.enable_source(false)?;
            }
            s.set_source(config).map_err(|e| match e {
                ConfigError::RecordBytes(_) => Refused::Invalid,
                ConfigError::Access(e) => Refused::Access(e),
            })?;
            if enable && !was_on {
                s.enable_source(true)?;
            }
        }
        Op::ClearSource => s.clear_source()?,
        Op::ClearSink => s.clear_sink()?,
    }
    Ok(read(&s)?)
}

fn read<R: Regs32 + ?Sized>(s: &Stream<'_, R>) -> Result<abi::Stream, R::Error> {
    let c = s.source_config()?;
    let src = s.source_status()?;
    let sink = s.sink_status()?;
    Ok(abi::Stream {
        op: 0,
        enable: s.source_enabled()? as u32,
        record_bytes: c.record_bytes,
        period_ticks: c.period_ticks,
        source_seq: src.seq,
        source_sent: src.sent,
        source_overruns: src.overrun,
        source_depth: s.source_depth()?,
        sink_good: sink.good,
        sink_gaps: sink.gaps,
        sink_lost: sink.lost,
        sink_crc_errors: sink.crc_errors,
        sink_bad_length: sink.bad_length,
        sink_expect: sink.expect,
        reserved: [0; 2],
    })
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::stream::{
        BASE, REG_SRC_CTRL, REG_SRC_PERIOD, REG_SRC_RECORD_BYTES, SINK_CLEAR, SRC_CLEAR, SRC_ENABLE,
    };
    use core::cell::RefCell;
    use std::collections::BTreeMap;
    use std::vec::Vec;

    /// The block's registers as plain storage, with every write logged (offsets relative to the block).
    #[derive(Default)]
    struct Regs {
        values: RefCell<BTreeMap<usize, u32>>,
        writes: RefCell<Vec<(usize, u32)>>,
    }

    impl Regs32 for Regs {
        type Error = Errno;
        fn read32(&self, offset: usize) -> Result<u32, Errno> {
            Ok(*self.values.borrow().get(&(offset - BASE)).unwrap_or(&0))
        }
        fn write32(&self, value: u32, offset: usize) -> Result<(), Errno> {
            self.writes.borrow_mut().push((offset - BASE, value));
            let v = value & !SRC_CLEAR;
            self.values.borrow_mut().insert(offset - BASE, v);
            Ok(())
        }
    }

    fn arg(op: u32, enable: u32, record_bytes: u32, period_ticks: u32) -> abi::Stream {
        abi::Stream {
            op,
            enable,
            record_bytes,
            period_ticks,
            ..abi::Stream::default()
        }
    }

    fn set(enable: bool, record_bytes: u32, period_ticks: u32) -> Op {
        Op::Set {
            enable,
            config: SourceConfig {
                record_bytes,
                period_ticks,
            },
        }
    }

    #[test]
    fn parse_refuses_what_the_block_cannot_take() {
        assert_eq!(
            parse(&arg(abi::STREAM_SET, 1, 256, 10)),
            Ok(set(true, 256, 10))
        );
        assert_eq!(parse(&arg(abi::STREAM_QUERY, 7, 3, 0)), Ok(Op::Query));
        for bad in [
            arg(abi::STREAM_SET, 2, 256, 0),
            arg(abi::STREAM_SET, 1, 100, 0),
            arg(abi::STREAM_SET, 1, 16, 0),
            arg(abi::STREAM_SET, 1, 8192, 0),
            arg(4, 0, 0, 0),
            abi::Stream {
                reserved: [0, 1],
                ..abi::Stream::default()
            },
        ] {
            assert_eq!(parse(&bad), Err(Errno::EINVAL), "{bad:?}");
        }
    }

    #[test]
    fn enabling_configures_first_and_disabling_stops_first() {
        let r = Regs::default();
        let a = control(&r, set(true, 512, 100)).unwrap();
        assert_eq!(
            *r.writes.borrow(),
            [
                (REG_SRC_RECORD_BYTES, 512),
                (REG_SRC_PERIOD, 100),
                (REG_SRC_CTRL, SRC_ENABLE)
            ]
        );
        assert_eq!((a.enable, a.record_bytes, a.period_ticks), (1, 512, 100));
        r.writes.borrow_mut().clear();
        control(&r, set(false, 1024, 0)).unwrap();
        assert_eq!(
            *r.writes.borrow(),
            [
                (REG_SRC_CTRL, 0),
                (REG_SRC_RECORD_BYTES, 1024),
                (REG_SRC_PERIOD, 0)
            ]
        );
    }

    #[test]
    fn a_record_size_change_under_a_running_source_is_refused_untouched() {
        let r = Regs::default();
        control(&r, set(true, 512, 0)).unwrap();
        r.writes.borrow_mut().clear();
        assert_eq!(control(&r, set(true, 256, 0)), Err(Refused::Invalid));
        assert!(r.writes.borrow().is_empty());
        // The same size with another period is fine, and does not restart the source.
        control(&r, set(true, 512, 9)).unwrap();
        assert_eq!(
            *r.writes.borrow(),
            [(REG_SRC_RECORD_BYTES, 512), (REG_SRC_PERIOD, 9)]
        );
    }

    #[test]
    fn clears_keep_the_source_running() {
        let r = Regs::default();
        control(&r, set(true, 256, 0)).unwrap();
        r.writes.borrow_mut().clear();
        control(&r, Op::ClearSource).unwrap();
        control(&r, Op::ClearSink).unwrap();
        assert_eq!(
            *r.writes.borrow(),
            [
                (REG_SRC_CTRL, SRC_CLEAR | SRC_ENABLE),
                (crate::stream::REG_SINK_CTRL, SINK_CLEAR)
            ]
        );
    }
}
