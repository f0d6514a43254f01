/* SPDX-License-Identifier: GPL-2.0 */

#ifndef PEVB_LOGIC_H
#define PEVB_LOGIC_H

/*
 * Generated from rust/picoevb_logic.rs by cbindgen (cbindgen.toml): do not edit. Probe also compares the
 * structs' sizes with PEVB_LAYOUT (services.h's pevb_layout_ok) and refuses the card on any difference.
 */

#include <linux/types.h>

/**
 * Slots per open file: the largest `max_entries`.
 */
#define PEVB_CACHE_SLOTS 64

/**
 * Event kinds of `pevb_plat_log` (engine.c words them): what the protocol logs.
 */
#define PEVB_EV_VANISHED 0

/**
 * `a`: ms.
 */
#define PEVB_EV_TIMEOUT 1

/**
 * `a`: status.
 */
#define PEVB_EV_FAILED 2

/**
 * `a`: completed, `b`: descriptors.
 */
#define PEVB_EV_SHORT 3

#define PEVB_EV_STILL_BUSY 4

/**
 * `a`: errno.
 */
#define PEVB_EV_RELEASE_FAILED 5

#define PEVB_EV_SOURCE_STOPPED 6

/**
 * Words of a run's opaque state in C.
 */
#define PEVB_RUN_WORDS 6

/**
 * `Life::end_use`: true: wake the callback.
 */
#define PEVB_LIFE_END_USE 0

/**
 * `Life::begin_callback`.
 */
#define PEVB_LIFE_BEGIN_CALLBACK 1

/**
 * `Life::idle`: what the callback waits for.
 */
#define PEVB_LIFE_IDLE 2

/**
 * `Life::end_callback`: true: the callback frees.
 */
#define PEVB_LIFE_END_CALLBACK 3

/**
 * `Life::begin_unpin`: true: unpin through the shim.
 */
#define PEVB_LIFE_BEGIN_UNPIN 4

/**
 * `Life::end_unpin`: true: the unpin frees.
 */
#define PEVB_LIFE_END_UNPIN 5

/**
 * `Life::set_freed`.
 */
#define PEVB_LIFE_SET_FREED 6

/**
 * `Life::is_freed`.
 */
#define PEVB_LIFE_IS_FREED 7

/**
 * `Life::live`.
 */
#define PEVB_LIFE_LIVE 8

/**
 * `Life::dying`.
 */
#define PEVB_LIFE_DYING 9

/**
 * What removal does with a surface (`pevb_life_detach`): unmapped before; unmap now, held like a DMA,
 * then `PEVB_LIFE_END_USE`; or the callback has begun: wait for its free, which unmaps.
 */
#define PEVB_DETACH_DONE 0

#define PEVB_DETACH_UNMAP 1

#define PEVB_DETACH_AWAIT_FREE 2

/**
 * What an ioctl command asks for (`pevb_ioctl_op`).
 */
#define PEVB_OP_LED 1

#define PEVB_OP_CARD_INFO 2

#define PEVB_OP_ABI_INFO 3

#define PEVB_OP_H2C 4

#define PEVB_OP_C2H 5

#define PEVB_OP_H2C2H 6

#define PEVB_OP_PIN_CUDA 7

#define PEVB_OP_UNPIN_CUDA 8

#define PEVB_OP_REG_CACHE 9

#define PEVB_OP_RAM_OWNER 10

#define PEVB_OP_PIN_HOST 11

#define PEVB_OP_STREAM 12

/**
 * Bytes of an XDMA descriptor (`xdma::Descriptor`); C only sizes its tables with it.
 */
#define PEVB_DESC_SIZE 32

/**
 * What `pevb_ram_begin`/`pevb_ram_claim` answer besides a negative errno.
 */
#define PEVB_RAM_GO 0

#define PEVB_RAM_SCRUB_FIRST 1

/**
 * Words of `PevbRamOwner`.
 */
#define PEVB_RAM_OWNER_WORDS 4

/**
 * The bookkeeping of one file's cache.
 */
struct pevb_policy;

/**
 * A host range as C passes it (`cache_policy::Range`; `mm` is an identity, never dereferenced).
 */
struct pevb_range {
        uint64_t mm;
        uint64_t addr;
        uint64_t len;
};

/**
 * One bus-contiguous range. `repr(C)`: the 5.10 module's C glue hands arrays of them to this logic.
 */
struct pevb_seg {
        /**
         * Bus (DMA) address.
         */
        uint64_t addr;
        /**
         * Length in bytes.
         */
        uint64_t len;
};

/**
 * A started run as C holds it (`struct pevb_run_state`): the bytes its chain moves, its engine's
 * write-back word, and the protocol's [`Run`] as opaque words.
 */
struct pevb_run_state {
        uint64_t bytes;
        uint32_t *wb;
        uint64_t wb_bus;
        uint64_t opaque[PEVB_RUN_WORDS];
};

/**
 * One side of a transfer: user memory at `addr`, or the CUDA surface `handle`.
 */
struct pevb_side {
        uint32_t cuda;
        uint32_t handle;
        uint64_t addr;
};

/**
 * A checked request. H2C: `src` and `fpga`; C2H: `dst` and `fpga`; H2C2H: `src` and `dst`; PIN_CUDA:
 * `src.addr` and `len`; UNPIN_CUDA: `value` (the handle); LED: `value`; RAM_OWNER: `value` (`RAM_QUERY`,
 * `RAM_CLAIM` or `RAM_RELEASE`).
 */
struct pevb_req {
        uint32_t op;
        uint32_t value;
        struct pevb_side src;
        struct pevb_side dst;
        uint64_t fpga;
        uint64_t len;
};

/**
 * One surface's lifecycle state. `repr(C)` and two words: the 5.10 glue stores it as `struct pevb_life`.
 */
struct pevb_life {
        /**
         * DMAs using the surface now (and removal's unmap, held like one).
         */
        uint32_t users;
        /**
         * `DEAD`, `UNPINNING`, ...
         */
        uint32_t flags;
};

/**
 * The surface's state as the debugfs `state` file shows it. `repr(C)`: the 5.10 glue reads it as
 * `struct pevb_life_view`.
 */
struct pevb_life_view {
        uint32_t users;
        bool dead;
        bool unpinning;
        bool detached;
        bool freed;
};

/**
 * What the glue knows about a card, for CARD_INFO and ABI_INFO.
 */
struct pevb_facts {
        uint32_t card_index;
        uint32_t msi;
        uint32_t id_block;
        uint32_t design_version;
        uint32_t build_hash;
        /**
         * A GPU-memory provider (nvidia_p2p, Jetson flavour) is loaded.
         */
        uint32_t provider;
        /**
         * The registration cache works on this kernel (it has mmu notifiers).
         */
        uint32_t reg_cache;
        /**
         * The ID block says the design has the stream block.
         */
        uint32_t stream;
        uint64_t ram_size;
};

/**
 * One chain of a pipeline step (`pipeline::Move`); `len` 0: that engine does not run in the step.
 */
struct pevb_move {
        /**
         * Offset in the source (H2C) or destination (C2H) buffer.
         */
        uint64_t offset;
        uint64_t len;
        /**
         * FPGA RAM address of the half it goes through.
         */
        uint64_t ram;
};

/**
 * What runs at once in a step of the round trip (`pipeline::Step`).
 */
struct pevb_step {
        struct pevb_move h2c;
        struct pevb_move c2h;
};

/**
 * Where a built chain starts and what it covers (`chain::Chain`).
 */
struct pevb_chain {
        uint64_t first;
        uint32_t first_adj;
        uint32_t count;
        uint64_t bytes;
};

/**
 * The card RAM's ownership as C stores it (`struct pevb_ram_owner`): a `ram_owner::RamOwner` in words C
 * never reads.
 */
struct pevb_ram_owner {
        uint64_t opaque[PEVB_RAM_OWNER_WORDS];
};

/**
 * Sizes of the structs above and of the shared ones the glue handles, as Rust lays them out.
 */
struct pevb_layout {
        uint32_t req;
        uint32_t facts;
        uint32_t chain;
        uint32_t segment;
        uint32_t descriptor;
        uint32_t regs;
        uint32_t step;
        uint32_t range;
        /**
         * `cache_policy::Policy`: C allocates this many bytes, aligned to `policy_align`, and never looks inside.
         */
        uint32_t policy;
        uint32_t policy_align;
        /**
         * `cache_policy::CAPACITY`: the slots of the glue's table of cached pins.
         */
        uint32_t cache_slots;
        /**
         * `struct pevb_ram_owner`.
         */
        uint32_t owner;
        uint32_t owner_align;
        /**
         * `surface_life::Life`: `struct pevb_life`.
         */
        uint32_t life;
        /**
         * `surface_life::View`: `struct pevb_life_view`.
         */
        uint32_t life_view;
};

/**
 * Per-engine register offsets and bits (`Dir`'s methods).
 */
struct pevb_engine_regs {
        uint32_t channel;
        uint32_t sgdma;
        uint32_t irq_bit;
        uint32_t halt_bit;
};

/**
 * The register map the glue drives, from the one definition in `crates/picoevb-regs`: the C side names
 * no offset or bit of its own.
 */
struct pevb_regs {
        uint32_t bar_user;
        uint32_t bar_user_size;
        uint32_t bar_dma;
        uint32_t bar_dma_size;
        uint64_t ram_size;
        /**
         * XDMA block offsets of the six targets probe checks, in this order: H2C, C2H, IRQ, config, H2C
         * SGDMA, C2H SGDMA; `targets` holds their target numbers.
         */
        uint32_t blocks[6];
        uint32_t targets[6];
        struct pevb_engine_regs engine[2];
        uint32_t ch_control;
        uint32_t ch_control_w1c;
        uint32_t ch_status;
        uint32_t ch_status_rc;
        uint32_t ch_completed;
        uint32_t ch_int_mask;
        uint32_t sg_desc_lo;
        uint32_t sg_desc_hi;
        uint32_t sg_desc_adj;
        uint32_t sgc_halt_w1s;
        uint32_t sgc_halt_w1c;
        uint32_t irq_chan_en_w1s;
        uint32_t irq_chan_en_w1c;
        uint32_t irq_user_en_w1c;
        uint32_t irq_chan_vec;
        uint32_t irq_chan_req;
        uint32_t ctrl_run;
        /**
         * Control word that starts a chain: Run plus logging of every status bit.
         */
        uint32_t ctrl_start;
        /**
         * Interrupt sources a chain reports: its end and every error.
         */
        uint32_t int_mask;
        uint32_t stat_busy;
        uint32_t desc_len_max;
        uint32_t desc_size;
};

/**
 * `struct pevb_frames` (logic.h): the pages behind a range, a kvmalloc'd array owned by this value.
 */
struct pevb_frames {
        uint64_t *f;
        size_t n;
};



/**
 * Sizes C checks at probe (`PEVB_RUN_LAYOUT`): the run state's.
 */
extern const uint32_t PEVB_RUN_STATE_SIZE;

extern const struct pevb_layout PEVB_LAYOUT;

extern const struct pevb_regs PEVB_REGS;

/**
 * Pins the request range of `call` (regcache.c's `pevb_cache_get`): a use of a cached buffer or a pin
 * for this request only, in the call; 0 or a negative errno.
 *
 * # Safety
 * `call` is a live `struct pevb_cache_call` whose cache and card are live, and whose caller holds no
 * table lock and not the card's pin lock; `r` is the request's range in the caller's address space.
 */
int pevb_cache_pin(void *call, const struct pevb_range *r);

/**
 * The work item's sweep of cache `c`: drops its buffers whose memory changed.
 *
 * # Safety
 * As for `locked`.
 */
void pevb_cache_sweep(void *c);

/**
 * PIN_CUDA of pages `*r`, frames `frames[..n]` (sorted): drops cache `c`'s buffers on them.
 *
 * # Safety
 * As for `locked`; `r` is readable, `frames` readable for `n` values.
 */
void pevb_cache_evict(void *c, const struct pevb_range *r, const uint64_t *frames, size_t n);

/**
 * Whether a buffer of cache `c` holds any of pages `frames[..n]`, not counting, when `own`, the buffers
 * `*replacing` takes the place of.
 *
 * # Safety
 * As for `pevb_cache_evict`.
 */
bool pevb_cache_holds(void *c,
                      const uint64_t *frames,
                      size_t n,
                      bool own,
                      const struct pevb_range *replacing);

/**
 * REG_CACHE on the bytes the glue copied in (`len`, checked by `pevb_ioctl_check`): does the operation
 * and writes the cache's state back into `buf`. 0 or a negative errno (nothing done).
 *
 * # Safety
 * As for `locked`; `buf` is valid for reading and writing `len` bytes.
 */
int pevb_cache_control(void *c, void *buf, size_t len);

/**
 * Close or card removal: drops every buffer of cache `c`, which caches nothing more.
 *
 * # Safety
 * As for `locked`.
 */
void pevb_cache_shut(void *c);

/**
 * Starts a chain of up to `len` bytes of `segs` (from byte `host_off`) to or from FPGA RAM at `fpga` on
 * engine `idx`, its descriptors in the table `descs` at bus address `base`; polled (`poll`) or woken by
 * its interrupt. On 0, `*out` is a run that must end through `pevb_engine_finish` or `_cancel`.
 *
 * # Safety
 * `card` is a live `struct pevb_card` whose engine `idx` lock the caller holds; `segs` is valid for
 * reading `nsegs` segments, `descs` for writing `ndescs` descriptors (the engine's table, not read by the
 * engine now: every earlier run ended), `out` for writing.
 */
int pevb_engine_start(void *card,
                      uint32_t idx,
                      const struct pevb_seg *segs,
                      size_t nsegs,
                      uint64_t host_off,
                      uint64_t fpga,
                      uint64_t len,
                      void *descs,
                      size_t ndescs,
                      uint64_t base,
                      bool poll,
                      struct pevb_run_state *out);

/**
 * Waits until the run ended, its timeout passed, removal woke the waiter or a fatal signal came.
 *
 * # Safety
 * As `pevb_engine_start`'s `card`; `r` holds a run started on engine `idx` and not yet ended.
 */
void pevb_engine_wait(void *card, uint32_t idx, struct pevb_run_state *r);

/**
 * Judges the run and ends it: 0 (`r->bytes` moved) or a negative errno; the engine was shown idle or the
 * card is wedged.
 *
 * # Safety
 * As `pevb_engine_wait`; the run is ended afterwards (`r` must not be used again).
 */
int pevb_engine_finish(void *card, uint32_t idx, struct pevb_run_state *r);

/**
 * Stops a run nobody judges: 0 if shown idle, else the card is wedged and the errno says so.
 *
 * # Safety
 * As `pevb_engine_finish`.
 */
int pevb_engine_cancel(void *card, uint32_t idx, struct pevb_run_state *r);

/**
 * Stops engine `idx` (PG195's stop); whether it was shown idle.
 *
 * # Safety
 * `card` is a live `struct pevb_card` whose DMA BAR is mapped.
 */
bool pevb_engine_stop(void *card, uint32_t idx);

/**
 * Moves `len` bytes between `segs` (from byte `host_off`) and FPGA RAM at `fpga` on engine `idx`, as few
 * chains as the table allows, each waited for (polled if small, else by interrupt) and ended before the
 * next.
 *
 * # Safety
 * As `pevb_engine_start`.
 */
int pevb_engine_transfer(void *card,
                         uint32_t idx,
                         const struct pevb_seg *segs,
                         size_t nsegs,
                         uint64_t host_off,
                         uint64_t fpga,
                         uint64_t len,
                         void *descs,
                         size_t ndescs,
                         uint64_t base);

/**
 * Runs the checked transfer `r` (H2C, C2H or H2C2H from `pevb_ioctl_check`) through the gate on `x`;
 * 0 with the DMA time in `*ns`, or a negative errno.
 *
 * # Safety
 * `x` is a live `struct pevb_xfer` only this call uses, `r` a request `pevb_ioctl_check` produced, `ns`
 * writable.
 */
int pevb_gate_transfer(void *x, const struct pevb_req *r, uint64_t *ns);

/**
 * `Life::new`.
 *
 * # Safety
 * `l` is valid for writing a `struct pevb_life`.
 */
void pevb_life_init(struct pevb_life *l);

/**
 * `Life::begin_use`: 0, -EINVAL (the memory is going away) or -ENODEV (the card is gone).
 *
 * # Safety
 * As `life`.
 */
int pevb_life_begin_use(struct pevb_life *l);

/**
 * Takes the lifecycle step `step` (`PEVB_LIFE_*`) and answers it. One entry point, not one per step:
 * cbindgen declares it for C, as it could not a macro's functions.
 *
 * # Safety
 * As `life`.
 */
bool pevb_life_step(struct pevb_life *l, uint32_t step);

/**
 * `Life::detach`: `PEVB_DETACH_*`.
 *
 * # Safety
 * As `life`.
 */
uint32_t pevb_life_detach(struct pevb_life *l);

/**
 * `Life::view` into `out`.
 *
 * # Safety
 * As `life`; `out` is valid for writing a `struct pevb_life_view`.
 */
void pevb_life_view(struct pevb_life *l, struct pevb_life_view *out);

/**
 * Runs PIN_CUDA's sequence for `call`: the new handle, or a negative errno.
 *
 * # Safety
 * `call` is a live `struct pevb_cuda_pin_call` (cuda.c) whose caller has faulted the range in, holds the
 * device and a provider reference, and does not hold the card's pin lock.
 */
int pevb_cuda_pin(void *call);

/**
 * The ioctl's operation, or -ENOTTY: decided before any user memory is touched.
 */
int pevb_ioctl_op(uint32_t cmd);

/**
 * Checks the arguments of operation `op` on the card `facts` describes: `arg` is the ioctl's argument,
 * `buf`/`len` the bytes copied in from it (if the command writes). Fills `out`; returns 0 or a negative
 * errno.
 *
 * # Safety
 * `buf` is valid for `len` bytes (or null with `len` 0); `facts` is valid for reading; `out` is valid for
 * writing.
 */
int pevb_ioctl_check(int op,
                     size_t arg,
                     const void *buf,
                     size_t len,
                     const struct pevb_facts *facts,
                     struct pevb_req *out);

/**
 * Writes a finished request's results into the copy-out buffer: the DMA time of a transfer, the handle of
 * a PIN_CUDA, the state after a RAM_OWNER (in `handle`).
 *
 * # Safety
 * `buf` is valid for reading and writing `len` bytes.
 */
int pevb_ioctl_done(int op, void *buf, size_t len, uint64_t dma_time_ns, uint32_t handle);

/**
 * Fills CARD_INFO or ABI_INFO's answer from what the glue knows about the card.
 *
 * # Safety
 * `buf` is valid for writing `len` bytes; `facts` is valid for reading.
 */
int pevb_ioctl_info(int op, void *buf, size_t len, const struct pevb_facts *facts);

/**
 * Merges bus-contiguous neighbours of `segs[..n]` in place; returns how many remain.
 *
 * # Safety
 * `segs` is valid for reading and writing `n` segments.
 */
size_t pevb_segments_coalesce(struct pevb_seg *segs, size_t n);

/**
 * Step `s` of the full-duplex round trip of `len` bytes through `ram` bytes of card RAM in `align`-byte
 * chunks (`pipeline::Pipeline`): 0 and `*out`, 1 when `s` is past the last step, or a negative errno.
 *
 * # Safety
 * `out` is valid for writing.
 */
int pevb_pipeline_step(uint64_t len, uint64_t ram, uint64_t align, uint64_t s, struct pevb_step *out);

/**
 * How an H2C run of `h2c` bytes and a C2H run of `c2h` bytes started together (0: that engine does not
 * run) learn they ended (`pipeline::wakes`): bit 0 set if H2C is polled, bit 1 if C2H is; a clear bit
 * means its interrupt is armed.
 */
uint32_t pevb_pipeline_polled(uint64_t h2c, uint64_t c2h);

/**
 * Whether a status read says the run is over (`channel::Status::ended`): idle, or an error bit.
 */
bool pevb_status_ended(uint32_t st);

/**
 * Whether the sorted page-frame lists `a[..na]` and `b[..nb]` share a frame (the overlap rule of GPU
 * surfaces: one memory pinned under two addresses is one surface). Either may be empty.
 *
 * # Safety
 * `a` is valid for reading `na` frames and `b` for `nb` (either may be null when its length is 0).
 */
bool pevb_share_page_frames(const uint64_t *a, size_t na, const uint64_t *b, size_t nb);

/**
 * Builds one chain into `descs[..ndescs]` (at bus address `base`) for up to `len` bytes of the host buffer
 * `segs[..nsegs]` from its byte `host_off`, and FPGA RAM from `fpga`. `out.bytes` says how far it got (the
 * table may fill first). Returns 0 or a negative errno.
 *
 * # Safety
 * `segs` is valid for reading `nsegs` segments, `descs` for writing `ndescs` descriptors (not read by the
 * device meanwhile), `out` for writing.
 */
int pevb_chain_build(bool c2h,
                     const struct pevb_seg *segs,
                     size_t nsegs,
                     uint64_t host_off,
                     uint64_t fpga,
                     uint64_t len,
                     void *descs,
                     size_t ndescs,
                     uint64_t base,
                     struct pevb_chain *out);

/**
 * 0 if an engine's status word says its chain ended cleanly, else a negative errno.
 */
int pevb_status_outcome(uint32_t st);

/**
 * A short name of the first error bit of `st` (not NUL-terminated: `*len` bytes).
 *
 * # Safety
 * `len` is valid for writing.
 */
const char *pevb_status_describe(uint32_t st, size_t *len);

/**
 * Whether the identifier register `id` of XDMA block `target` is an XDMA's.
 */
bool pevb_identifier_ok(uint32_t id, uint32_t target);

/**
 * Whether PCI IDs are the PicoEVB design's (10de:0001 is also NVIDIA's HTG-K800 design, which this driver
 * does not support: the subsystem tells them apart).
 */
bool pevb_ids_ok(uint16_t vendor, uint16_t device, uint16_t subvendor, uint16_t subdevice);

/**
 * Makes `p` an empty cache with the default limits, for `page`-byte pages (a power of two).
 *
 * # Safety
 * `p` is valid for writing `PEVB_LAYOUT.policy` bytes and aligned to `PEVB_LAYOUT.policy_align`. The
 * policy owns nothing: C frees the bytes without a destructor.
 */
void pevb_policy_init(struct pevb_policy *p, uint64_t page);

/**
 * Buffers cached now (the debugfs state file).
 *
 * # Safety
 * As for `policy`.
 */
uint32_t pevb_policy_entries(struct pevb_policy *p);

/**
 * The segments of bytes `[offset, offset + len)` of the buffer `segs[..n]` (`segments::window`) into
 * `out[..nout]`: how many, or a negative errno (-EINVAL past the buffer, or where `out` is short).
 *
 * # Safety
 * `segs` is valid for reading `n` segments, `out` for writing `nout`.
 */
ptrdiff_t pevb_segments_window(const struct pevb_seg *segs,
                               size_t n,
                               uint64_t offset,
                               uint64_t len,
                               struct pevb_seg *out,
                               size_t nout);

/**
 * Makes `o` free and dirty (`RamOwner::new`).
 *
 * # Safety
 * `o` is valid for writing.
 */
void pevb_ram_init(struct pevb_ram_owner *o);

/**
 * `RamOwner::begin` by process `pid`: `PEVB_RAM_GO`, `PEVB_RAM_SCRUB_FIRST` or -EBUSY.
 *
 * # Safety
 * As `owner`.
 */
int pevb_ram_begin(struct pevb_ram_owner *o, uint64_t *m, uint32_t pid);

/**
 * `RamOwner::end`.
 *
 * # Safety
 * As `owner`.
 */
void pevb_ram_end(struct pevb_ram_owner *o);

/**
 * `RamOwner::claim`: as `pevb_ram_begin`, without a request to end.
 *
 * # Safety
 * As `owner`.
 */
int pevb_ram_claim(struct pevb_ram_owner *o, uint64_t *m, uint32_t pid);

/**
 * `RamOwner::scrubbed`.
 *
 * # Safety
 * As `owner`.
 */
void pevb_ram_scrubbed(struct pevb_ram_owner *o, bool ok);

/**
 * `RamOwner::release`: 0 or -EBUSY.
 *
 * # Safety
 * As `owner`.
 */
int pevb_ram_release(struct pevb_ram_owner *o, uint64_t *m, uint32_t pid);

/**
 * `RamOwner::close`.
 *
 * # Safety
 * As `owner`.
 */
void pevb_ram_close(struct pevb_ram_owner *o, uint64_t *m);

/**
 * `RamOwner::state`: `RAM_FREE`, `RAM_MINE` or `RAM_OTHER`.
 *
 * # Safety
 * As `owner`.
 */
uint32_t pevb_ram_state(struct pevb_ram_owner *o, uint64_t *m, uint32_t pid);

/**
 * LED: writes `value` to the GPIO data register and reads it back (the write is posted); 0 or a negative
 * errno.
 *
 * # Safety
 * `card` is a live `struct pevb_card` with its BARs mapped.
 */
int pevb_user_set_leds(void *card, uint32_t value);

/**
 * Reads the gdr ID block: 1 with `*design_version`, `*build_hash` and `*stream` (the design has the stream
 * block) set, 0 where the bitstream has none (NVIDIA's reference design), or a negative errno.
 *
 * # Safety
 * `card` as for `pevb_user_set_leds`; `design_version`, `build_hash` and `stream` writable.
 */
int pevb_user_identity(void *card, uint32_t *design_version, uint32_t *build_hash, uint32_t *stream);

/**
 * IOC_STREAM on the card's stream block: reads the argument from `buf` (`len` bytes, checked before by
 * `pevb_ioctl_check`), carries it out (`stream_ctl::control`) and writes the answer back into `buf`; 0 or a
 * negative errno.
 *
 * # Safety
 * `card` as for `pevb_user_set_leds`, held (the gate) by the caller; `buf` valid for reading and writing
 * `len` bytes.
 */
int pevb_user_stream(void *card, void *buf, size_t len);

/**
 * Disables the stream source (a stopping C2H blocked on it then ends: engine.c's `pevb_plat_unblock`); 0
 * or a negative errno.
 *
 * # Safety
 * `card` as for `pevb_user_set_leds`, whose design has the stream block.
 */
int pevb_user_stream_off(void *card);

#endif  /* PEVB_LOGIC_H */
