// SPDX-License-Identifier: GPL-2.0

//! The round trip (H2C2H) on this card's engines: the sequence is the shared logic's
//! (`kmod/logic/src/round_trip.rs`, its schedule `pipeline.rs`); this gives it each engine's side.

use crate::engine::{Engine, Run, Table};
use crate::errno::Errno;
use crate::errors::{errno, kerr};
use crate::pipeline::Wake;
use crate::port::Port;
use crate::round_trip::{self, Side, Started};
use crate::segments::Cursor;
use kernel::prelude::*;

/// The card as the pipeline sees it: both engines, the port they run on, the RAM they move through.
#[derive(Clone, Copy)]
pub(crate) struct Engines<'a> {
    pub(crate) h2c: &'a Engine,
    pub(crate) c2h: &'a Engine,
    pub(crate) port: &'a Port,
    pub(crate) ram_size: u64,
}

/// One engine with its table and host buffer.
struct EngineSide<'a, 'c, 'b> {
    engine: &'a Engine,
    port: &'a Port,
    table: &'a mut Table,
    host: &'c mut Cursor<'b>,
}

impl Side for EngineSide<'_, '_, '_> {
    type Run<'r>
        = Run<'r>
    where
        Self: 'r;

    /// `_host_off` is where `host` stands: each side's chains follow each other, and the cursor advances
    /// by what each one took.
    fn start(&mut self, _host_off: u64, ram: u64, len: u64, wake: Wake) -> Result<Run<'_>, Errno> {
        self.engine
            .start(self.port, self.table, self.host, ram, len, wake)
            .map_err(errno)
    }
}

impl Started for Run<'_> {
    fn wait(&mut self) {
        Run::wait(self);
    }
    fn finish(self) -> Result<u64, Errno> {
        Run::finish(self).map_err(errno)
    }
    fn cancel(self) {
        // Wedges the card if the engine cannot be stopped; the error that ended the request is reported.
        let _ = Run::cancel(self);
    }
}

/// Copies `len` bytes from `src` through the card RAM to `dst`. The caller holds both engines' tables
/// (H2C first, the lock order of every path).
pub(crate) fn round_trip(
    e: Engines<'_>,
    h2c: &mut Table,
    c2h: &mut Table,
    src: &mut Cursor<'_>,
    dst: &mut Cursor<'_>,
    len: u64,
) -> Result {
    let mut h = EngineSide {
        engine: e.h2c,
        port: e.port,
        table: h2c,
        host: src,
    };
    let mut c = EngineSide {
        engine: e.c2h,
        port: e.port,
        table: c2h,
        host: dst,
    };
    round_trip::run(&mut h, &mut c, len, e.ram_size).map_err(kerr)
}
