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
 * The first and the longest wait for the other side (a back-pressure consumer, or a producer the driver
 * empties), in µs: short enough that a side that keeps up loses no records in the source's FIFO, long
 * enough that a stalled one costs no CPU.
 */
#define NAP_MIN_US 20

#define NAP_MAX_US 1000

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
 * What `pevb_life_is` asks: `Life::live` (the surface counts for the overlap checks).
 */
#define PEVB_LIFE_LIVE 0

/**
 * `Life::dying`: the callback has begun and the pin is not freed yet.
 */
#define PEVB_LIFE_DYING 1

/**
 * `Life::reached(Until::Idle)`: no use is left (what the callback and an unpin wait for).
 */
#define PEVB_LIFE_IDLE 2

/**
 * `Life::reached(Until::Freed)`: the pin is freed (what removal and PIN_CUDA wait for).
 */
#define PEVB_LIFE_FREED 3

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
        uint32_t facts;
        uint32_t segment;
        uint32_t descriptor;
        uint32_t regs;
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
 * What probe needs of the register map, from the one definition in `crates/picoevb-regs`: which BARs
 * to map and how long they must be, the card RAM's size and the longest descriptor. The C side names no
 * offset or bit at all: every register access is the shared logic's.
 */
struct pevb_regs {
        uint32_t bar_user;
        uint32_t bar_user_size;
        uint32_t bar_dma;
        uint32_t bar_dma_size;
        uint64_t ram_size;
        uint32_t desc_len_max;
};

/**
 * `struct pevb_frames` (logic.h): the pages behind a range, a kvmalloc'd array owned by this value.
 */
struct pevb_frames {
        uint64_t *f;
        size_t n;
};

/**
 * What probe learnt of a card (`ioctl::Facts`; the ID block's values for probe's log line).
 */
struct pevb_facts {
        uint32_t card_index;
        uint32_t msi;
        uint32_t id_block;
        uint32_t design_version;
        uint32_t build_hash;
        /**
         * The ID block says the design has the stream block.
         */
        uint32_t stream;
        uint64_t ram_size;
};



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
 * Close or card removal: drops every buffer of cache `c`, which caches nothing more.
 *
 * # Safety
 * As for `locked`.
 */
void pevb_cache_shut(void *c);

/**
 * Stops both engines and resets the IRQ block: 0, -EIO if an engine was not shown idle, or the errno of
 * a failed register access.
 *
 * # Safety
 * `card` is a live `struct pevb_card` whose DMA BAR is mapped, and no request runs on it.
 */
int pevb_probe_quiesce(void *card);

/**
 * Checks every XDMA block's identifier: 0; -ENODEV with the block's name (`*name`, `*name_len` bytes, not
 * NUL-terminated) and what it answered (`*id`) for the log; or the errno of a failed register access.
 *
 * # Safety
 * `card` as for `pevb_probe_quiesce`; `name`, `name_len` and `id` writable.
 */
int pevb_probe_identify(void *card, const char **name, size_t *name_len, uint32_t *id);

/**
 * One interrupt: a bit per engine that raised it (bit 0 H2C, bit 1 C2H), its run's status in
 * `status[idx]`; 0: not this card's.
 *
 * # Safety
 * `card` as for `pevb_probe_quiesce` (the handler is freed before the BARs are unmapped); `status` is
 * writable for two values.
 */
uint32_t pevb_irq_service(void *card, uint32_t *status);

/**
 * Hot removal or unbind of `card`, while its BARs are still mapped (`kmod/logic/src/removal.rs`).
 *
 * # Safety
 * `card` is a live, probed `struct pevb_card` being removed, from the PCI remove callback only.
 */
void pevb_card_remove(void *card);

/**
 * Copies `len` bytes from `src[..nsrc]` (from byte `src_at`) through the card RAM to `dst[..ndst]` (from
 * byte `dst_at`) as `kmod/logic/src/round_trip.rs` runs it: 0 or a negative errno.
 *
 * # Safety
 * `card` is a live `struct pevb_card` whose DMA BAR is mapped and both of whose engine locks the caller
 * holds (H2C first); `src` and `dst` are valid for reading their segments, which stay mapped for the
 * call.
 */
int pevb_round_trip(void *card,
                    const struct pevb_seg *src,
                    size_t nsrc,
                    uint64_t src_at,
                    const struct pevb_seg *dst,
                    size_t ndst,
                    uint64_t dst_at,
                    uint64_t len);

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
 * next. With `card_time`, stores the engine's run time by the card's clock in `*card_ns` (else 0), unless
 * it is NULL.
 *
 * # Safety
 * `card` is a live `struct pevb_card` whose engine `idx` lock the caller holds; `segs` is valid for
 * reading `nsegs` segments, `descs` for writing `ndescs` descriptors (the engine's table, not read by the
 * engine now: every earlier run ended); `card_ns` NULL or writable.
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
                         uint64_t base,
                         bool card_time,
                         uint64_t *card_ns);

/**
 * Runs the checked transfer `req` (a `gate::Request` the dispatcher made, `ioctl_glue.rs`, passed back
 * through `file.c`'s `pevb_file_transfer`) through the gate on `x`; 0 with the DMA time in `*ns`, or a
 * negative errno.
 *
 * # Safety
 * `x` is a live `struct pevb_xfer` only this call uses, `req` points to a live `gate::Request`, `ns` is
 * writable.
 */
int pevb_gate_run(void *x, const void *req, uint64_t *ns);

/**
 * Runs ioctl `cmd` with argument `arg` on the open file `pf`: 0 or a negative errno.
 *
 * # Safety
 * `pf` is the `struct pevb_file` of an open file (its `private_data`), for the whole call.
 */
int pevb_ioctl_run(void *pf, uint32_t cmd, size_t arg);

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
 * A query of the lifecycle (`PEVB_LIFE_*`), also what `cuda.c`'s `wait_event` checks.
 *
 * # Safety
 * As `life`.
 */
bool pevb_life_is(struct pevb_life *l, uint32_t what);

/**
 * The provider's free callback (`surface_life::callback`).
 *
 * # Safety
 * `s` is a live `struct pevb_surface` the caller holds a reference to, in its provider's free callback.
 */
void pevb_surface_callback(void *s);

/**
 * UNPIN or close (`surface_life::unpin`).
 *
 * # Safety
 * `s` is a live `struct pevb_surface` the caller holds a reference to.
 */
void pevb_surface_unpin(void *s);

/**
 * A DMA's use ends (`surface_life::end_use`).
 *
 * # Safety
 * As `pevb_surface_unpin`; the caller held a use.
 */
void pevb_surface_end_use(void *s);

/**
 * Card removal (`surface_life::detach`): true if the caller must wait for the free
 * (`pevb_surface_await_free`).
 *
 * # Safety
 * As `pevb_surface_unpin`.
 */
bool pevb_surface_detach(void *s);

/**
 * Waits until the pin is freed (`surface_life::await_free`).
 *
 * # Safety
 * As `pevb_surface_unpin`.
 */
void pevb_surface_await_free(void *s);

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
 * Merges bus-contiguous neighbours of `segs[..n]` in place; returns how many remain.
 *
 * # Safety
 * `segs` is valid for reading and writing `n` segments.
 */
size_t pevb_segments_coalesce(struct pevb_seg *segs, size_t n);

/**
 * Whether the sorted page-frame lists `a[..na]` and `b[..nb]` share a frame (the overlap rule of GPU
 * surfaces: one memory pinned under two addresses is one surface). Either may be empty.
 *
 * # Safety
 * `a` is valid for reading `na` frames and `b` for `nb` (either may be null when its length is 0).
 */
bool pevb_share_page_frames(const uint64_t *a, size_t na, const uint64_t *b, size_t nb);

/**
 * A short name of the first error bit of `st` (not NUL-terminated: `*len` bytes).
 *
 * # Safety
 * `len` is valid for writing.
 */
const char *pevb_status_describe(uint32_t st, size_t *len);

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
 * Reads the gdr ID block: 1 with `*design_version`, `*build_hash` and `*stream` (the design has the stream
 * block) set, 0 where the bitstream has none (NVIDIA's reference design), or a negative errno.
 *
 * # Safety
 * `card` as for `set_leds`; `design_version`, `build_hash` and `stream` writable.
 */
int pevb_user_identity(void *card, uint32_t *design_version, uint32_t *build_hash, uint32_t *stream);

/**
 * Disables the stream source (a stopping C2H blocked on it then ends: engine.c's `pevb_plat_unblock`); 0
 * or a negative errno.
 *
 * # Safety
 * `card` as for `set_leds`, whose design has the stream block.
 */
int pevb_user_stream_off(void *card);

#endif  /* PEVB_LOGIC_H */
