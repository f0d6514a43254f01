//! The dispatcher against fake services: every command with every fallible service failing in turn, what
//! is refused before user memory is touched, the hold around exactly the calls that need it, the undo of a
//! pin whose handle could not be written back, and ABI_INFO's composition.

extern crate std;
use super::*;
use core::cell::Cell;
use std::rc::Rc;
use std::vec::Vec;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ev {
    CopyIn,
    CopyOut,
    Begin,
    End,
    Prefault,
    ConfigId,
    Identity,
    Leds(u32),
    Transfer,
    Pin(Backing),
    Import,
    Unpin(u32),
    RegCache,
    Stream,
    Ram(ram_owner::Op),
    SurfaceLen(u32),
    Load,
    Store,
    Eventfd(i32),
}

impl Ev {
    fn fallible(self) -> bool {
        !matches!(self, Ev::End | Ev::RegCache | Ev::Unpin(_))
    }
}

const ARG: usize = 0x1000;
const HANDLE: u32 = 7;
const DMA_NS: u64 = 4321;

/// Services over one argument buffer at user address `ARG`; the `fail_at`-th fallible call fails (EFAULT
/// for a copy, ENOMEM otherwise). Tracks the hold: a held-only call without it panics.
struct Fake {
    log: Vec<Ev>,
    fallible: usize,
    fail_at: Option<usize>,
    user: Vec<u8>,
    gone: bool,
    facts: Facts,
    features: Features,
    held: bool,
    config_id: u32,
    vanished: bool,
    identity: Option<(u32, u32)>,
    /// How often `features` was asked (it takes a reference to the provider on a real build).
    features_asked: core::cell::Cell<u32>,
    /// The eventfds held now and their signals so far.
    eventfd: Rc<Cell<(u32, u32)>>,
}

/// An eventfd of the fake: counts its signals and whether it is still held.
struct FakeEventfd(Rc<Cell<(u32, u32)>>);

impl Eventfd for FakeEventfd {
    fn signal(&self) {
        let (held, signals) = self.0.get();
        assert!(held > 0);
        self.0.set((held, signals + 1));
    }
}

impl Drop for FakeEventfd {
    fn drop(&mut self) {
        let (held, signals) = self.0.get();
        self.0.set((held - 1, signals));
    }
}

impl Fake {
    fn new(arg: &[u8]) -> Self {
        Fake {
            log: Vec::new(),
            fallible: 0,
            fail_at: None,
            user: arg.to_vec(),
            gone: false,
            facts: Facts {
                card_index: 2,
                ram_size: 65536,
                msi: true,
                id_block: true,
                stream: true,
            },
            features: Features {
                provider: Some(Provider::Jetson),
                reg_cache: true,
                host_surface: true,
                dmabuf: true,
            },
            held: false,
            config_id: 0x1fc3_0006,
            vanished: false,
            identity: Some((0x0102_0003, 0xabcd)),
            features_asked: core::cell::Cell::new(0),
            eventfd: Rc::new(Cell::new((0, 0))),
        }
    }

    fn step(&mut self, ev: Ev, copy: bool) -> Result<(), Errno> {
        self.log.push(ev);
        if ev.fallible() {
            self.fallible += 1;
            if self.fail_at == Some(self.fallible - 1) {
                return Err(if copy { Errno::EFAULT } else { Errno::ENOMEM });
            }
        }
        Ok(())
    }

    fn needs_hold(&self, ev: Ev) {
        assert!(self.held, "{ev:?} without the card held");
    }
}

impl Services for Fake {
    fn gone(&self) -> bool {
        self.gone
    }
    fn copy_in(&mut self, arg: usize, buf: &mut [u8]) -> Result<(), Errno> {
        assert_eq!(arg, ARG);
        self.step(Ev::CopyIn, true)?;
        buf.copy_from_slice(&self.user[..buf.len()]);
        Ok(())
    }
    fn copy_out(&mut self, arg: usize, buf: &[u8]) -> Result<(), Errno> {
        assert_eq!(arg, ARG);
        self.step(Ev::CopyOut, true)?;
        self.user[..buf.len()].copy_from_slice(buf);
        Ok(())
    }
    fn begin(&mut self) -> Result<(), Errno> {
        assert!(!self.held, "nested hold");
        self.step(Ev::Begin, false)?;
        self.held = true;
        Ok(())
    }
    fn end(&mut self) {
        assert!(self.held, "end without begin");
        self.log.push(Ev::End);
        self.held = false;
    }
    fn facts(&self) -> Facts {
        self.facts
    }
    fn features(&self) -> Features {
        self.features_asked.set(self.features_asked.get() + 1);
        self.features
    }
    fn prefault(&mut self, _addr: u64, _len: u64, _device_writes: bool) -> Result<(), Errno> {
        assert!(!self.held, "prefault while holding the card");
        self.step(Ev::Prefault, false)
    }
    fn config_id(&mut self) -> Result<u32, Errno> {
        self.needs_hold(Ev::ConfigId);
        self.step(Ev::ConfigId, false)?;
        Ok(self.config_id)
    }
    fn vanished(&self) -> bool {
        self.vanished
    }
    fn identity(&mut self) -> Result<Option<(u32, u32)>, Errno> {
        self.needs_hold(Ev::Identity);
        self.step(Ev::Identity, false)?;
        Ok(self.identity)
    }
    fn set_leds(&mut self, value: u32) -> Result<(), Errno> {
        self.needs_hold(Ev::Leds(value));
        self.step(Ev::Leds(value), false)
    }
    fn transfer(&mut self, _req: &gate::Request) -> Result<u64, Errno> {
        assert!(!self.held, "the gate takes its own hold");
        self.step(Ev::Transfer, false)?;
        Ok(DMA_NS)
    }
    fn pin(&mut self, backing: Backing, _va: u64, _len: u64) -> Result<u32, Errno> {
        self.needs_hold(Ev::Pin(backing));
        self.step(Ev::Pin(backing), false)?;
        Ok(HANDLE)
    }
    fn import_dmabuf(&mut self, _fd: i32, _offset: u64, _len: u64) -> Result<(u32, u32), Errno> {
        self.needs_hold(Ev::Import);
        self.step(Ev::Import, false)?;
        Ok((HANDLE, abi::DMABUF_SYSTEM))
    }
    fn unpin(&mut self, handle: u32) -> Result<(), Errno> {
        self.log.push(Ev::Unpin(handle));
        Ok(())
    }
    fn reg_cache(&mut self, _op: cache_policy::Op) -> abi::RegCache {
        self.log.push(Ev::RegCache);
        abi::RegCache {
            entries: 3,
            ..Default::default()
        }
    }
    fn stream(&mut self, _op: stream_ctl::Op) -> Result<abi::Stream, Errno> {
        self.needs_hold(Ev::Stream);
        self.step(Ev::Stream, false)?;
        Ok(abi::Stream {
            source_seq: 99,
            ..Default::default()
        })
    }
    fn ram_owner(&mut self, op: ram_owner::Op) -> Result<u32, Errno> {
        if op == ram_owner::Op::Claim {
            self.needs_hold(Ev::Ram(op));
        }
        self.step(Ev::Ram(op), false)?;
        Ok(abi::RAM_MINE)
    }
    fn surface_len(&mut self, handle: u32) -> Result<u64, Errno> {
        self.step(Ev::SurfaceLen(handle), false)?;
        Ok(1 << 20)
    }
    fn load_user(&mut self, addr: u64) -> Result<u64, Errno> {
        assert!(!self.held, "a user access while holding the card");
        assert!((CONTROL..CONTROL + 40).contains(&addr));
        self.step(Ev::Load, true)?;
        Ok(0)
    }
    fn store_user(&mut self, addr: u64, _v: u64) -> Result<(), Errno> {
        assert!(!self.held, "a user access while holding the card");
        assert!((CONTROL..CONTROL + 40).contains(&addr));
        self.step(Ev::Store, true)
    }
    fn interrupted(&self) -> bool {
        false
    }
    fn sleep_us(&mut self, _us: u32) {
        panic!("a ring with room never waits");
    }
    type Eventfd = FakeEventfd;
    fn eventfd(&mut self, fd: i32) -> Result<FakeEventfd, Errno> {
        assert!(!self.held, "an eventfd looked up while holding the card");
        self.step(Ev::Eventfd(fd), false)?;
        let (held, signals) = self.eventfd.get();
        self.eventfd.set((held + 1, signals));
        Ok(FakeEventfd(self.eventfd.clone()))
    }
}

/// A stream ring's control block.
const CONTROL: u64 = 0x6000_0000;

fn ring(flags: u32, ring: u64) -> abi::StreamRing {
    abi::StreamRing {
        ring,
        control: CONTROL,
        slot_bytes: 4096,
        total: 2,
        slots: 8,
        flags,
        ..Default::default()
    }
}

fn bytes<T: Arg>(v: &T) -> Vec<u8> {
    let mut b = std::vec![0u8; size_of::<T>()];
    v.encode(&mut b);
    b
}

/// A valid argument for every command, and its `arg` (LED's is the value itself).
fn commands() -> Vec<(u32, usize, Vec<u8>)> {
    let host = 0x7000_0000;
    std::vec![
        (abi::IOC_LED, 5, Vec::new()),
        (abi::IOC_CARD_INFO, ARG, bytes(&abi::CardInfo::default())),
        (abi::IOC_ABI_INFO, ARG, bytes(&abi::AbiInfo::default())),
        (
            abi::IOC_H2C_DMA,
            ARG,
            bytes(&abi::H2cDma {
                src: host,
                dst: 0,
                len: 4096,
                ..Default::default()
            })
        ),
        (
            abi::IOC_C2H_DMA,
            ARG,
            bytes(&abi::C2hDma {
                dst: host,
                src: 0,
                len: 4096,
                ..Default::default()
            })
        ),
        (
            abi::IOC_H2C2H_DMA,
            ARG,
            bytes(&abi::H2c2hDma {
                src: host,
                dst: host,
                len: 8192,
                ..Default::default()
            })
        ),
        (
            abi::IOC_PIN_CUDA,
            ARG,
            bytes(&abi::PinCuda {
                va: host,
                size: 1 << 20,
                ..Default::default()
            })
        ),
        (
            abi::IOC_PIN_HOST,
            ARG,
            bytes(&abi::PinCuda {
                va: host,
                size: 1 << 20,
                ..Default::default()
            })
        ),
        (
            abi::IOC_IMPORT_DMABUF,
            ARG,
            bytes(&abi::ImportDmabuf {
                fd: 3,
                size: 4096,
                ..Default::default()
            })
        ),
        (
            abi::IOC_UNPIN_CUDA,
            ARG,
            bytes(&abi::UnpinCuda { handle: HANDLE })
        ),
        (abi::IOC_REG_CACHE, ARG, bytes(&abi::RegCache::default())),
        (abi::IOC_STREAM, ARG, bytes(&abi::Stream::default())),
        (abi::IOC_STREAM_RING, ARG, bytes(&ring(0, host))),
        (
            abi::IOC_STREAM_RING,
            ARG,
            bytes(&ring(abi::RING_CUDA, HANDLE.into()))
        ),
        (
            abi::IOC_STREAM_RING,
            ARG,
            bytes(&abi::StreamRing {
                eventfd: 9,
                ..ring(abi::RING_EVENTFD, host)
            })
        ),
        (
            abi::IOC_RAM_OWNER,
            ARG,
            bytes(&abi::RamOwner {
                op: abi::RAM_CLAIM,
                ..Default::default()
            })
        ),
        (
            abi::IOC_RAM_OWNER,
            ARG,
            bytes(&abi::RamOwner {
                op: abi::RAM_QUERY,
                ..Default::default()
            })
        ),
    ]
}

#[test]
fn every_command_with_every_failure_keeps_the_hold_balanced_and_leaves_no_unknown_handle() {
    for (cmd, arg, user) in commands() {
        let mut clean = Fake::new(&user);
        run(&mut clean, cmd, arg).unwrap_or_else(|e| panic!("{cmd:#x}: {e:?}"));
        assert!(!clean.held);
        for fail_at in 0..clean.fallible {
            let mut f = Fake::new(&user);
            f.fail_at = Some(fail_at);
            let r = run(&mut f, cmd, arg);
            assert!(
                r.is_err(),
                "{cmd:#x}: failure {fail_at} not reported: {:?}",
                f.log
            );
            assert!(
                !f.held,
                "{cmd:#x}: failure {fail_at} left the card held: {:?}",
                f.log
            );
            assert_eq!(
                f.eventfd.get().0,
                0,
                "{cmd:#x}: failure {fail_at} kept an eventfd"
            );
            // The call that failed, and whether a surface was made before it (then only the write-back
            // can have failed, and the caller never learnt the handle).
            let failed = *f.log.iter().filter(|e| e.fallible()).nth(fail_at).unwrap();
            let made = f.log.iter().any(|e| matches!(e, Ev::Pin(_) | Ev::Import))
                && !matches!(failed, Ev::Pin(_) | Ev::Import);
            if made {
                assert_eq!((failed, r), (Ev::CopyOut, Err(Errno::EFAULT)), "{cmd:#x}");
            }
            if cmd != abi::IOC_UNPIN_CUDA {
                assert_eq!(
                    made,
                    f.log.contains(&Ev::Unpin(HANDLE)),
                    "{cmd:#x}: failure {fail_at}: {:?}",
                    f.log
                );
            }
        }
    }
}

#[test]
fn pin_whose_handle_cannot_be_written_back_is_unpinned() {
    let (_, _, user) = commands().remove(6);
    let mut f = Fake::new(&user);
    // CopyIn, Prefault, Begin, Pin, CopyOut: the fifth fallible call.
    f.fail_at = Some(4);
    assert_eq!(run(&mut f, abi::IOC_PIN_CUDA, ARG), Err(Errno::EFAULT));
    assert_eq!(
        f.log,
        [
            Ev::CopyIn,
            Ev::Prefault,
            Ev::Begin,
            Ev::Pin(Backing::Provider),
            Ev::End,
            Ev::CopyOut,
            Ev::Unpin(HANDLE)
        ]
    );
}

#[test]
fn after_removal_only_unpin_runs() {
    for (cmd, arg, user) in commands() {
        let mut f = Fake::new(&user);
        f.gone = true;
        let r = run(&mut f, cmd, arg);
        if cmd == abi::IOC_UNPIN_CUDA {
            assert_eq!(r, Ok(()));
            assert_eq!(f.log, [Ev::CopyIn, Ev::Unpin(HANDLE)]);
        } else {
            assert_eq!(r, Err(Errno::ENODEV), "{cmd:#x}");
            assert!(f.log.is_empty(), "{cmd:#x}: {:?}", f.log);
        }
    }
}

#[test]
fn refusals_touch_no_user_memory() {
    let mut f = Fake::new(&[]);
    assert_eq!(run(&mut f, abi::ioc(3, 0x77, 8), ARG), Err(Errno::ENOTTY));
    f.features.dmabuf = false;
    assert_eq!(run(&mut f, abi::IOC_IMPORT_DMABUF, ARG), Err(Errno::ENOTTY));
    f.features.reg_cache = false;
    assert_eq!(run(&mut f, abi::IOC_REG_CACHE, ARG), Err(Errno::ENOTTY));
    // Linux 4.x: no watched pins, so no host surface; PIN_CUDA is not affected.
    f.features.host_surface = false;
    assert_eq!(run(&mut f, abi::IOC_PIN_HOST, ARG), Err(Errno::EOPNOTSUPP));
    assert_eq!(
        abi_info(&f.facts, None, &f.features).caps & abi::CAP_HOST_SURFACE,
        0
    );
    f.facts.stream = false;
    assert_eq!(run(&mut f, abi::IOC_STREAM, ARG), Err(Errno::EOPNOTSUPP));
    assert_eq!(
        run(&mut f, abi::IOC_STREAM_RING, ARG),
        Err(Errno::EOPNOTSUPP)
    );
    assert_eq!(run(&mut f, abi::IOC_LED, 1 << 32), Err(Errno::EINVAL));
    assert!(f.log.is_empty(), "{:?}", f.log);
}

#[test]
fn bad_arguments_run_nothing() {
    let bad = [
        (
            abi::IOC_H2C_DMA,
            bytes(&abi::H2cDma {
                src: 1,
                len: 0,
                ..Default::default()
            }),
        ),
        (
            abi::IOC_C2H_DMA,
            bytes(&abi::C2hDma {
                dst: 1,
                src: 65536,
                len: 8,
                ..Default::default()
            }),
        ),
        (
            abi::IOC_PIN_CUDA,
            bytes(&abi::PinCuda {
                va: 1,
                size: 0,
                ..Default::default()
            }),
        ),
        (
            abi::IOC_IMPORT_DMABUF,
            bytes(&abi::ImportDmabuf {
                fd: 3,
                flags: 1,
                size: 4096,
                ..Default::default()
            }),
        ),
        (
            abi::IOC_REG_CACHE,
            bytes(&abi::RegCache {
                op: 99,
                ..Default::default()
            }),
        ),
        (
            abi::IOC_STREAM,
            bytes(&abi::Stream {
                op: 99,
                ..Default::default()
            }),
        ),
        (
            abi::IOC_RAM_OWNER,
            bytes(&abi::RamOwner {
                op: 99,
                ..Default::default()
            }),
        ),
        (abi::IOC_STREAM_RING, bytes(&ring(1 << 9, 0x7000_0000))),
    ];
    for (cmd, user) in bad {
        let mut f = Fake::new(&user);
        assert_eq!(run(&mut f, cmd, ARG), Err(Errno::EINVAL), "{cmd:#x}");
        assert_eq!(f.log, [Ev::CopyIn], "{cmd:#x}");
    }
}

#[test]
fn holds_exactly_what_needs_the_card() {
    let held_calls = |cmd: u32, arg: usize, user: &[u8]| {
        let mut f = Fake::new(user);
        run(&mut f, cmd, arg).unwrap();
        f.log.iter().filter(|e| **e == Ev::Begin).count()
    };
    for (cmd, arg, user) in commands() {
        let ram_query = cmd == abi::IOC_RAM_OWNER && user[0] == abi::RAM_QUERY as u8;
        let expect = match cmd {
            abi::IOC_LED | abi::IOC_ABI_INFO | abi::IOC_PIN_CUDA | abi::IOC_PIN_HOST => 1,
            abi::IOC_IMPORT_DMABUF | abi::IOC_STREAM => 1,
            abi::IOC_RAM_OWNER if !ram_query => 1,
            _ => 0,
        };
        assert_eq!(held_calls(cmd, arg, &user), expect, "{cmd:#x}");
    }
}

#[test]
fn only_the_commands_that_depend_on_the_build_ask_for_its_features() {
    for (cmd, arg, user) in commands() {
        let mut f = Fake::new(&user);
        run(&mut f, cmd, arg).unwrap();
        let asks = matches!(
            cmd,
            abi::IOC_ABI_INFO | abi::IOC_IMPORT_DMABUF | abi::IOC_REG_CACHE | abi::IOC_PIN_HOST
        );
        assert_eq!(f.features_asked.get(), u32::from(asks), "{cmd:#x}");
    }
}

#[test]
fn a_surface_ring_must_fit_its_surface_and_nothing_runs_otherwise() {
    let mut a = ring(abi::RING_CUDA, HANDLE.into());
    a.slots = 257; // 1 MiB + 4 KiB; the fake's surfaces hold 1 MiB
    let mut f = Fake::new(&bytes(&a));
    assert_eq!(run(&mut f, abi::IOC_STREAM_RING, ARG), Err(Errno::EINVAL));
    assert_eq!(f.log, [Ev::CopyIn, Ev::SurfaceLen(HANDLE)]);
    a.slots = 256;
    let mut f = Fake::new(&bytes(&a));
    run(&mut f, abi::IOC_STREAM_RING, ARG).unwrap();
    let got = abi::StreamRing::decode(&f.user);
    assert_eq!((got.produced, got.chains, got.waits), (2, 1, 0));
    assert_eq!(
        abi::StreamRing {
            produced: 0,
            chains: 0,
            ..got
        },
        a,
        "the rest as it was"
    );
}

#[test]
fn transfers_write_back_their_time_and_keep_the_rest() {
    let a = abi::H2c2hDma {
        src: 0x7000_0000,
        dst: 0x7100_0000,
        len: 8192,
        flags: 0,
        dma_time_ns: 0,
    };
    let mut f = Fake::new(&bytes(&a));
    run(&mut f, abi::IOC_H2C2H_DMA, ARG).unwrap();
    assert_eq!(
        abi::H2c2hDma::decode(&f.user),
        abi::H2c2hDma {
            dma_time_ns: DMA_NS,
            ..a
        }
    );
}

#[test]
fn abi_info_composes_caps_from_card_and_build() {
    let mut f = Fake::new(&bytes(&abi::AbiInfo::default()));
    run(&mut f, abi::IOC_ABI_INFO, ARG).unwrap();
    let info = abi::AbiInfo::decode(&f.user);
    assert_eq!(info.abi_version, abi::ABI_VERSION);
    assert_eq!((info.card_index, info.fpga_ram_size), (2, 65536));
    assert_eq!(
        (info.design_version, info.build_hash),
        (0x0102_0003, 0xabcd)
    );
    let all = abi::CAP_RAM_OWNER
        | abi::CAP_HOST_SURFACE
        | abi::CAP_MSI
        | abi::CAP_ID_BLOCK
        | abi::CAP_STREAM
        | abi::CAP_REG_CACHE
        | abi::CAP_DMABUF
        | abi::CAP_CUDA_JETSON;
    assert_eq!(info.caps, all);

    // The reference design on a dGPU build without the cache or dma-buf: no ID block read.
    let facts = Facts {
        card_index: 0,
        ram_size: 65536,
        msi: false,
        id_block: false,
        stream: false,
    };
    let features = Features {
        provider: Some(Provider::Dgpu),
        reg_cache: false,
        host_surface: true,
        dmabuf: false,
    };
    let info = abi_info(&facts, None, &features);
    assert_eq!(
        info.caps,
        abi::CAP_RAM_OWNER | abi::CAP_HOST_SURFACE | abi::CAP_CUDA_DGPU
    );
    assert_eq!((info.design_version, info.build_hash), (0, 0));
    let mut f = Fake::new(&bytes(&abi::AbiInfo::default()));
    f.facts = facts;
    run(&mut f, abi::IOC_ABI_INFO, ARG).unwrap();
    assert!(!f.log.contains(&Ev::Identity));
    assert_eq!(
        abi_info(&facts, None, &Features::default()).caps & abi::CAP_CUDA_DGPU,
        0
    );
}

#[test]
fn abi_info_sees_a_card_that_stopped_answering() {
    let arg = bytes(&abi::AbiInfo::default());
    let mut f = Fake::new(&arg);
    f.config_id = u32::MAX;
    assert_eq!(run(&mut f, abi::IOC_ABI_INFO, ARG), Err(Errno::EIO));
    f.vanished = true;
    assert_eq!(run(&mut f, abi::IOC_ABI_INFO, ARG), Err(Errno::ENODEV));
    let mut f = Fake::new(&arg);
    f.identity = None;
    assert_eq!(run(&mut f, abi::IOC_ABI_INFO, ARG), Err(Errno::EIO));
    assert!(!f.held);
}

/// The bytes `Arg` reads and writes are the struct's own memory image, field for field.
#[test]
fn arguments_move_as_c_lays_them_out() {
    fn image<T: Copy>(v: &T) -> Vec<u8> {
        // SAFETY: `v` is a live `T` of `size_of::<T>()` bytes; the ABI structs have no padding (their
        // sizes are asserted in `abi.rs`), so every byte is initialised.
        unsafe { core::slice::from_raw_parts((v as *const T).cast::<u8>(), size_of::<T>()) }
            .to_vec()
    }
    let s = abi::Stream {
        op: 1,
        enable: 2,
        record_bytes: 3,
        period_ticks: 4,
        source_seq: 5,
        source_sent: 6,
        source_overruns: 7,
        source_depth: 8,
        sink_good: 9,
        sink_gaps: 10,
        sink_lost: 11,
        sink_crc_errors: 12,
        sink_bad_length: 13,
        sink_expect: 14,
        reserved: [15, 16],
    };
    assert_eq!(bytes(&s), image(&s));
    assert_eq!(abi::Stream::decode(&image(&s)), s);
    let d = abi::ImportDmabuf {
        fd: -3,
        flags: 1,
        offset: 2,
        size: 3,
        handle: 4,
        placement: 5,
        reserved: [6, 7],
    };
    assert_eq!(bytes(&d), image(&d));
    assert_eq!(abi::ImportDmabuf::decode(&image(&d)), d);
    let r = abi::RamOwner {
        op: 1,
        state: 2,
        reserved: [3, 4, 5],
    };
    assert_eq!(bytes(&r), image(&r));
}

#[test]
fn a_ring_holds_its_eventfd_for_the_call_and_signals_each_chain_and_its_end() {
    let a = abi::StreamRing {
        eventfd: 9,
        total: 8,
        chain_slots: 2,
        ..ring(abi::RING_EVENTFD | abi::RING_DROP_OLDEST, 0x7000_0000)
    };
    let mut f = Fake::new(&bytes(&a));
    run(&mut f, abi::IOC_STREAM_RING, ARG).unwrap();
    // Looked up after the argument's checks, before the ring's first word is written.
    assert_eq!(&f.log[..3], [Ev::CopyIn, Ev::Eventfd(9), Ev::Store]);
    assert_eq!(f.eventfd.get(), (0, 5), "4 chains and the end; let go of");
    // Refused arguments never look one up; without the flag none is.
    for (flags, fd) in [
        (abi::RING_EVENTFD | abi::RING_H2C | abi::RING_DROP_OLDEST, 9),
        (0, 9),
    ] {
        let mut f = Fake::new(&bytes(&abi::StreamRing {
            eventfd: fd,
            ..ring(flags, 0x7000_0000)
        }));
        assert_eq!(run(&mut f, abi::IOC_STREAM_RING, ARG), Err(Errno::EINVAL));
        assert_eq!(f.log, [Ev::CopyIn]);
    }
    let mut f = Fake::new(&bytes(&ring(0, 0x7000_0000)));
    run(&mut f, abi::IOC_STREAM_RING, ARG).unwrap();
    assert!(!f.log.iter().any(|e| matches!(e, Ev::Eventfd(_))));
}
