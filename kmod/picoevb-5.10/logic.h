/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The Rust logic's extern "C" surface (rust/surface.rs), as C sees it. Layouts here must match the
 * #[repr(C)] structs there; probe compares sizeof() of each with PEVB_LAYOUT and refuses the card on any
 * difference, so a drift fails loudly instead of corrupting memory.
 */
#ifndef PEVB_LOGIC_H
#define PEVB_LOGIC_H

#include <linux/types.h>

enum pevb_op {
	PEVB_OP_LED = 1,
	PEVB_OP_CARD_INFO = 2,
	PEVB_OP_ABI_INFO = 3,
	PEVB_OP_H2C = 4,
	PEVB_OP_C2H = 5,
	PEVB_OP_H2C2H = 6,
	PEVB_OP_PIN_CUDA = 7,
	PEVB_OP_UNPIN_CUDA = 8,
	PEVB_OP_REG_CACHE = 9,
	PEVB_OP_RAM_OWNER = 10,
};

struct pevb_side {
	u32 cuda;		/* 0: user memory at addr; 1: CUDA surface handle */
	u32 handle;
	u64 addr;
};

struct pevb_req {
	u32 op;
	u32 value;		/* LED value, UNPIN_CUDA handle, RAM_OWNER op (RAM_QUERY/CLAIM/RELEASE) */
	struct pevb_side src;
	struct pevb_side dst;
	u64 fpga;
	u64 len;
};

struct pevb_facts {
	u32 card_index;
	u32 msi;
	u32 id_block;
	u32 design_version;
	u32 build_hash;
	u32 provider;
	u32 reg_cache;		/* the registration cache works here (CAP_REG_CACHE) */
	u64 ram_size;
};

struct pevb_chain {
	u64 first;
	u32 first_adj;
	u32 count;
	u64 bytes;
};

/* segments::Segment */
struct pevb_seg {
	u64 addr;
	u64 len;
};

struct pevb_engine_regs {
	u32 channel;
	u32 sgdma;
	u32 irq_bit;
	u32 halt_bit;
};

struct pevb_regs {
	u32 bar_user;
	u32 bar_user_size;
	u32 bar_dma;
	u32 bar_dma_size;
	u64 ram_size;
	u32 blocks[6];
	u32 targets[6];
	struct pevb_engine_regs engine[2];
	u32 ch_control;
	u32 ch_control_w1c;
	u32 ch_status;
	u32 ch_status_rc;
	u32 ch_completed;
	u32 ch_int_mask;
	u32 sg_desc_lo;
	u32 sg_desc_hi;
	u32 sg_desc_adj;
	u32 sgc_halt_w1s;
	u32 sgc_halt_w1c;
	u32 irq_chan_en_w1s;
	u32 irq_chan_en_w1c;
	u32 irq_user_en_w1c;
	u32 irq_chan_vec;
	u32 irq_chan_req;
	u32 ctrl_run;
	u32 ctrl_start;
	u32 int_mask;
	u32 stat_busy;
	u32 desc_len_max;
	u32 desc_size;
};

/* pipeline::Move of a step; len 0: that engine does not run in the step. */
struct pevb_move {
	u64 offset;
	u64 len;
	u64 ram;
};

struct pevb_step {
	struct pevb_move h2c;
	struct pevb_move c2h;
};

struct pevb_layout {
	u32 req;
	u32 facts;
	u32 chain;
	u32 segment;
	u32 descriptor;
	u32 regs;
	u32 step;
	u32 range;
	u32 policy;		/* bytes of a cache_policy::Policy, opaque to C */
	u32 policy_align;
	u32 cache_slots;
	u32 owner;		/* bytes of a ram_owner::RamOwner, opaque to C */
	u32 owner_align;
	u32 life;
	u32 life_view;
};

/* cache_policy::Range: @len bytes at user address @addr of address space @mm (an identity only). */
struct pevb_range {
	u64 mm;
	u64 addr;
	u64 len;
};

/* A registration cache's bookkeeping (cache_policy::Policy): PEVB_LAYOUT.policy bytes, never read by C. */
struct pevb_policy;

/* The card RAM's ownership (ram_owner::RamOwner): PEVB_LAYOUT.owner bytes, never read by C. */
#define PEVB_RAM_OWNER_WORDS 4
struct pevb_ram_owner {
	u64 opaque[PEVB_RAM_OWNER_WORDS];
};

enum {
	PEVB_RAM_GO = 0,		/* pevb_ram_begin/claim: go ahead */
	PEVB_RAM_SCRUB_FIRST = 1,	/* zero the whole RAM first, then pevb_ram_scrubbed (under ram_lock) */
};

/* Slots of a cache's table of pins (cache_policy::CAPACITY). */
#define PEVB_CACHE_SLOTS 64

enum {
	PEVB_LOOKUP_MISS = -1,		/* not cached: pevb_policy_miss says what to pin and whether to cache it */
	PEVB_LOOKUP_BYPASS = -2,	/* not to be cached: pin for this request only */
};

enum pevb_removal {
	PEVB_EVICTED = 0,
	PEVB_INVALIDATED = 1,
	PEVB_FLUSHED = 2,
};

/* Told each slot pevb_policy_control/_flush removed from the policy: the glue drops that slot's pin. */
typedef void (*pevb_dropped_fn)(void *ctx, u32 slot);

/* XDMA descriptor: eight u32 (xdma::Descriptor); only its size matters to C. */
#define PEVB_DESC_SIZE 32

extern const struct pevb_layout PEVB_LAYOUT;
extern const struct pevb_regs PEVB_REGS;

int pevb_ioctl_op(u32 cmd);
int pevb_ioctl_check(int op, unsigned long arg, const void *buf, size_t len, u64 ram,
		     struct pevb_req *out);
int pevb_ioctl_done(int op, void *buf, size_t len, u64 dma_time_ns, u32 handle);
int pevb_ioctl_info(int op, void *buf, size_t len, const struct pevb_facts *facts);
size_t pevb_segments_coalesce(struct pevb_seg *segs, size_t n);
int pevb_pipeline_step(u64 len, u64 ram, u64 align, u64 s, struct pevb_step *out);
u32 pevb_pipeline_polled(bool h2c, bool c2h);
bool pevb_status_ended(u32 status);
bool pevb_share_page_frames(const u64 *a, size_t na, const u64 *b, size_t nb);
int pevb_chain_build(bool c2h, const struct pevb_seg *segs, size_t nsegs, u64 host_off, u64 fpga,
		     u64 len, void *descs, size_t ndescs, u64 base, struct pevb_chain *out);
int pevb_status_outcome(u32 status);
const char *pevb_status_describe(u32 status, size_t *len);
bool pevb_identifier_ok(u32 id, u32 target);
long pevb_segments_window(const struct pevb_seg *segs, size_t n, u64 offset, u64 len, struct pevb_seg *out,
			  size_t nout);

/* The registration cache's policy; every call but init under the cache's table lock. */
void pevb_policy_init(struct pevb_policy *p, u64 page);
int pevb_policy_lookup(struct pevb_policy *p, const struct pevb_range *r, u64 *offset);
void pevb_policy_hit(struct pevb_policy *p, u32 slot);
bool pevb_policy_miss(struct pevb_policy *p, const struct pevb_range *r, struct pevb_range *want);
int pevb_policy_make_room(struct pevb_policy *p, const struct pevb_range *r);
int pevb_policy_insert(struct pevb_policy *p, const struct pevb_range *r);
void pevb_policy_remove(struct pevb_policy *p, u32 slot, u32 why);
void pevb_policy_note_uncached(struct pevb_policy *p);
int pevb_policy_sharing(struct pevb_policy *p, const struct pevb_range *r);
bool pevb_policy_slot_shares_page(struct pevb_policy *p, u32 slot, const struct pevb_range *r);
int pevb_policy_control(struct pevb_policy *p, void *buf, size_t len, pevb_dropped_fn dropped, void *ctx);
void pevb_policy_flush(struct pevb_policy *p, pevb_dropped_fn dropped, void *ctx);
u32 pevb_policy_entries(struct pevb_policy *p);
bool pevb_ids_ok(u16 vendor, u16 device, u16 subvendor, u16 subdevice);

/* The card RAM's ownership; every call under the card's ram_lock (ram.c). @m: a file's membership. */
void pevb_ram_init(struct pevb_ram_owner *o);
int pevb_ram_begin(struct pevb_ram_owner *o, u64 *m, u32 pid);
void pevb_ram_end(struct pevb_ram_owner *o);
int pevb_ram_claim(struct pevb_ram_owner *o, u64 *m, u32 pid);
void pevb_ram_scrubbed(struct pevb_ram_owner *o, bool ok);
int pevb_ram_release(struct pevb_ram_owner *o, u64 *m, u32 pid);
void pevb_ram_close(struct pevb_ram_owner *o, u64 *m);
u32 pevb_ram_state(struct pevb_ram_owner *o, u64 *m, u32 pid);

/*
 * The engine protocol (kmod/logic/src/engine.rs, through rust/engine_glue.rs): @card is a struct pevb_card,
 * @idx the engine (0: H2C, 1: C2H). A run started by pevb_engine_start ends through pevb_engine_finish or
 * pevb_engine_cancel, which return once the engine was shown idle or the card is wedged.
 */
#define PEVB_RUN_WORDS 6
struct pevb_run_state {
	u64 bytes;			/* what the run's chain moves */
	u64 opaque[PEVB_RUN_WORDS];	/* engine::Run, never read by C */
};
extern const u32 PEVB_RUN_STATE_SIZE;
int pevb_engine_start(void *card, u32 idx, const struct pevb_seg *segs, size_t nsegs, u64 host_off, u64 fpga,
		      u64 len, void *descs, size_t ndescs, u64 base, bool poll, struct pevb_run_state *out);
void pevb_engine_wait(void *card, u32 idx, struct pevb_run_state *r);
int pevb_engine_finish(void *card, u32 idx, struct pevb_run_state *r);
int pevb_engine_cancel(void *card, u32 idx, struct pevb_run_state *r);
bool pevb_engine_stop(void *card, u32 idx);
int pevb_engine_transfer(void *card, u32 idx, const struct pevb_seg *segs, size_t nsegs, u64 host_off,
			 u64 fpga, u64 len, void *descs, size_t ndescs, u64 base);

/*
 * The request gate (kmod/logic/src/gate.rs, through rust/gate_glue.rs): runs the checked H2C, C2H or H2C2H
 * request @r on the transfer @x (file.c's struct pevb_xfer), taking and letting go of the card, its RAM,
 * pins and surface uses in the gate's order through the pevb_gate_* services file.c defines; 0 with the DMA
 * time in *@ns, or a negative errno. @side: 0 the source, 1 the destination; @dir: 0 H2C, 1 C2H.
 */
struct pevb_xfer;
int pevb_gate_transfer(struct pevb_xfer *x, const struct pevb_req *r, u64 *ns);
int pevb_gate_prefault(u64 addr, u64 len, bool device_writes);
int pevb_gate_begin(struct pevb_xfer *x);
void pevb_gate_end(struct pevb_xfer *x);
int pevb_gate_ram_begin(struct pevb_xfer *x);
void pevb_gate_ram_end(struct pevb_xfer *x);
int pevb_gate_pin(struct pevb_xfer *x, u32 side, u64 addr, u64 len);
void pevb_gate_unpin(struct pevb_xfer *x, u32 side);
void pevb_gate_quarantine(struct pevb_xfer *x, u32 side);
int pevb_gate_enter(struct pevb_xfer *x, u32 side, u32 handle, u64 at, u64 len);
void pevb_gate_exit(struct pevb_xfer *x, u32 side);
int pevb_gate_one_way(struct pevb_xfer *x, u32 dir, u64 fpga, u64 at, u64 len, u64 *ns);
int pevb_gate_round_trip(struct pevb_xfer *x, u64 at, u64 len, u64 *ns);
bool pevb_gate_wedged(struct pevb_xfer *x);

/*
 * The user BAR (rust/user_glue.rs: crates/picoevb-regs' Leds and IdBlock, as 6.18 runs them) over
 * pevb_plat_user_rd/wr (card.c, declared in picoevb.h). @card: a struct pevb_card whose BARs are mapped.
 */
int pevb_user_set_leds(void *card, u32 value);
int pevb_user_identity(void *card, u32 *design_version, u32 *build_hash);

/*
 * A GPU surface's lifecycle (kmod/logic/src/surface_life.rs, through rust/life_glue.rs): who may use the
 * surface, when the callback may end, which of callback and unpin frees. Every call under the surface's
 * spinlock (cuda.c), which does what the answers ask without it.
 */
struct pevb_life {
	u32 opaque[2];		/* surface_life::Life, never read by C */
};
enum pevb_detach {
	PEVB_DETACH_DONE = 0,		/* unmapped before */
	PEVB_DETACH_UNMAP = 1,		/* unmap now, held like a DMA; then pevb_life_end_use */
	PEVB_DETACH_AWAIT_FREE = 2,	/* the callback has begun: wait for its free, which unmaps */
};
struct pevb_life_view {
	u32 users;
	bool dead, unpinning, detached, freed;
};
void pevb_life_init(struct pevb_life *l);
int pevb_life_begin_use(struct pevb_life *l);
bool pevb_life_end_use(struct pevb_life *l);		/* true: wake the callback */
void pevb_life_begin_callback(struct pevb_life *l);
bool pevb_life_idle(struct pevb_life *l);		/* what the callback waits for */
bool pevb_life_end_callback(struct pevb_life *l);	/* true: the callback frees */
bool pevb_life_begin_unpin(struct pevb_life *l);	/* true: unpin through the shim */
bool pevb_life_end_unpin(struct pevb_life *l);		/* true: the unpin frees */
void pevb_life_set_freed(struct pevb_life *l);
bool pevb_life_is_freed(struct pevb_life *l);
bool pevb_life_live(struct pevb_life *l);
bool pevb_life_dying(struct pevb_life *l);
u32 pevb_life_detach(struct pevb_life *l);
void pevb_life_view(struct pevb_life *l, struct pevb_life_view *out);

/*
 * PIN_CUDA's sequence (kmod/logic/src/surface_pin.rs, through rust/pin_glue.rs) over the pevb_cuda_pin_*
 * services cuda.c defines, for the struct pevb_cuda_pin_call @call of one PIN_CUDA: the new handle, or a
 * negative errno. The caller has faulted the range in, holds the device and a provider reference.
 */
struct pevb_cuda_pin_call;
struct pevb_surface;
struct pevb_frames {
	u64 *f;		/* kvmalloc'd, sorted page frame numbers */
	size_t n;
};
int pevb_cuda_pin(struct pevb_cuda_pin_call *call);
void pevb_cuda_pin_lock(struct pevb_cuda_pin_call *c);
void pevb_cuda_pin_unlock(struct pevb_cuda_pin_call *c);
int pevb_cuda_pin_frames(struct pevb_cuda_pin_call *c, struct pevb_frames *out);
void pevb_cuda_pin_frames_free(struct pevb_frames *f);
bool pevb_cuda_pin_overlaps(struct pevb_cuda_pin_call *c, const struct pevb_frames *f);
void *pevb_cuda_pin_dying(struct pevb_cuda_pin_call *c, const struct pevb_frames *f);
void pevb_cuda_pin_wait_freed(struct pevb_surface *dying);
void pevb_cuda_pin_evict(struct pevb_cuda_pin_call *c, const struct pevb_frames *f);
int pevb_cuda_pin_pin(struct pevb_cuda_pin_call *c, struct pevb_frames *f, struct pevb_surface **out);
bool pevb_cuda_pin_same(struct pevb_cuda_pin_call *c, struct pevb_surface *s);
void pevb_cuda_pin_unpin(struct pevb_surface *s);
int pevb_cuda_pin_publish(struct pevb_cuda_pin_call *c, struct pevb_surface *s);

/* What the protocol logs (pevb_plat_log's @kind; engine.c words it). */
enum pevb_event {
	PEVB_EV_VANISHED = 0,
	PEVB_EV_TIMEOUT = 1,		/* a: ms */
	PEVB_EV_FAILED = 2,		/* a: status */
	PEVB_EV_SHORT = 3,		/* a: completed, b: descriptors */
	PEVB_EV_STILL_BUSY = 4,
	PEVB_EV_RELEASE_FAILED = 5,	/* a: errno */
};

/* The Rust panic handler's way out (main.c). */
void __noreturn pevb_rust_panic(const char *file, size_t file_len, u32 line);

/* Whether this build's C view of the surface matches the Rust one. */
static inline bool pevb_layout_ok(void)
{
	return PEVB_LAYOUT.req == sizeof(struct pevb_req) &&
	       PEVB_LAYOUT.facts == sizeof(struct pevb_facts) &&
	       PEVB_LAYOUT.chain == sizeof(struct pevb_chain) &&
	       PEVB_LAYOUT.segment == sizeof(struct pevb_seg) &&
	       PEVB_LAYOUT.descriptor == PEVB_DESC_SIZE &&
	       PEVB_LAYOUT.regs == sizeof(struct pevb_regs) &&
	       PEVB_LAYOUT.step == sizeof(struct pevb_step) &&
	       PEVB_LAYOUT.range == sizeof(struct pevb_range) &&
	       PEVB_LAYOUT.policy_align <= sizeof(u64) &&	/* the C storage is u64-aligned */
	       PEVB_LAYOUT.cache_slots == PEVB_CACHE_SLOTS &&
	       PEVB_LAYOUT.owner <= sizeof(struct pevb_ram_owner) &&
	       PEVB_LAYOUT.owner_align <= sizeof(u64) &&
	       PEVB_LAYOUT.life == sizeof(struct pevb_life) &&
	       PEVB_LAYOUT.life_view == sizeof(struct pevb_life_view) &&
	       PEVB_RUN_STATE_SIZE == sizeof(struct pevb_run_state);
}

#endif
