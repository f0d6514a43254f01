//! A register window for host tests: reads what it was given (else 0, or all ones), fails at one offset, and logs
//! every access that succeeded.

extern crate std;
use crate::channel::Regs32;
use core::cell::RefCell;
use std::vec::Vec;

#[derive(Default)]
pub(crate) struct Fake {
    values: Vec<(usize, u32)>,
    /// What any other offset reads.
    rest: u32,
    fail_at: Option<usize>,
    log: RefCell<Vec<(char, usize, u32)>>,
}

impl Fake {
    /// Reads `values` (offset, value).
    pub(crate) fn with(values: &[(usize, u32)]) -> Self {
        Fake {
            values: values.to_vec(),
            ..Fake::default()
        }
    }

    /// Every access at `offset` fails.
    pub(crate) fn failing(offset: usize) -> Self {
        Fake {
            fail_at: Some(offset),
            ..Fake::default()
        }
    }

    /// Every offset not given reads all ones (a card that left the bus).
    pub(crate) fn set_all_ones(&mut self) {
        self.rest = u32::MAX;
    }

    pub(crate) fn set(&mut self, offset: usize, value: u32) {
        self.values.retain(|v| v.0 != offset);
        self.values.push((offset, value));
    }

    /// ('r' or 'w', offset, value) of every access that succeeded, in order.
    pub(crate) fn log(&self) -> Vec<(char, usize, u32)> {
        self.log.borrow().clone()
    }
}

impl Regs32 for Fake {
    type Error = crate::errno::Errno;
    fn read32(&self, offset: usize) -> Result<u32, Self::Error> {
        if self.fail_at == Some(offset) {
            return Err(crate::errno::Errno::EIO);
        }
        let v = self
            .values
            .iter()
            .find(|(o, _)| *o == offset)
            .map_or(self.rest, |&(_, v)| v);
        self.log.borrow_mut().push(('r', offset, v));
        Ok(v)
    }
    fn write32(&self, value: u32, offset: usize) -> Result<(), Self::Error> {
        if self.fail_at == Some(offset) {
            return Err(crate::errno::Errno::EIO);
        }
        self.log.borrow_mut().push(('w', offset, value));
        Ok(())
    }
}
