/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the C glue defines for the Rust half (the glue files in rust/ declare the same in their extern "C" blocks),
 * and probe's check that this build's C view of the Rust structs (logic.h, generated) matches the Rust one.
 */
#ifndef PEVB_SERVICES_H
#define PEVB_SERVICES_H

#include "logic.h"

/*
 * The request gate's services (file.c), for rust/gate_glue.rs: the transfer @x's holds, taken and let go
 * of in the gate's order (kmod/logic/src/gate.rs). @side: 0 the source, 1 the destination; @dir: 0 H2C,
 * 1 C2H; @at: the window's offset in the request.
 */
struct pevb_xfer;
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
int pevb_gate_one_way(struct pevb_xfer *x, u32 dir, u64 fpga, u64 at, u64 len, bool card_time, u64 *ns);
int pevb_gate_round_trip(struct pevb_xfer *x, u64 at, u64 len, u64 *ns);
bool pevb_gate_wedged(struct pevb_xfer *x);

/*
 * One open file's services (file.c), for rust/ioctl_glue.rs (pevb_ioctl_run runs kmod/logic/src/ioctl.rs
 * over them, and over the card's below): @pf is the file's struct pevb_file; @req the dispatcher's checked
 * transfer, handed back to the gate (pevb_gate_run).
 */
struct pevb_file;
struct pevb_card;
struct pevb_card *pevb_file_card(struct pevb_file *pf);
struct pevb_cache *pevb_file_cache(struct pevb_file *pf);
int pevb_file_transfer(struct pevb_file *pf, const void *req, u64 *ns);
int pevb_file_pin(struct pevb_file *pf, bool host, u64 va, u64 len);
int pevb_file_unpin(struct pevb_file *pf, u32 handle);
int pevb_file_ram(struct pevb_file *pf, u32 op, u32 *state);
int pevb_copy_in(u64 arg, void *buf, size_t len);
int pevb_copy_out(u64 arg, const void *buf, size_t len);
int pevb_file_surface_len(struct pevb_file *pf, u32 handle, u64 *len);
bool pevb_file_interrupted(void);
void pevb_file_sleep_us(u32 us);
const struct pevb_facts *pevb_card_facts(struct pevb_card *card);

/*
 * One GPU surface's services (cuda.c), for rust/life_glue.rs (pevb_surface_* run the sequences of
 * kmod/logic/src/surface_life.rs over them): @s's lifecycle under its lock, the wait on it (@what:
 * PEVB_LIFE_IDLE or PEVB_LIFE_FREED), the shim's unpin, unmap and free.
 */
struct pevb_surface;
struct pevb_life *pevb_surf_life_lock(struct pevb_surface *s);
void pevb_surf_life_unlock(struct pevb_surface *s);
void pevb_surf_wait(struct pevb_surface *s, u32 what);
void pevb_surf_wake(struct pevb_surface *s);
void pevb_surf_unpin_pin(struct pevb_surface *s);
bool pevb_surf_unmap(struct pevb_surface *s);
void pevb_surf_free_pin(struct pevb_surface *s);

/*
 * PIN_CUDA's services (cuda.c), for rust/pin_glue.rs (pevb_cuda_pin runs kmod/logic/src/surface_pin.rs
 * over them) for the struct pevb_cuda_pin_call @c of one PIN_CUDA.
 */
struct pevb_cuda_pin_call;
void pevb_cuda_pin_lock(struct pevb_cuda_pin_call *c);
void pevb_cuda_pin_unlock(struct pevb_cuda_pin_call *c);
int pevb_cuda_pin_frames(struct pevb_cuda_pin_call *c, struct pevb_frames *out);
void pevb_frames_free(struct pevb_frames *f);
bool pevb_cuda_pin_overlaps(struct pevb_cuda_pin_call *c, const struct pevb_frames *f);
void *pevb_cuda_pin_dying(struct pevb_cuda_pin_call *c, const struct pevb_frames *f);
void pevb_cuda_pin_wait_freed(struct pevb_surface *dying);
void pevb_cuda_pin_evict(struct pevb_cuda_pin_call *c, const struct pevb_frames *f);
int pevb_cuda_pin_pin(struct pevb_cuda_pin_call *c, struct pevb_frames *f, struct pevb_surface **out);
bool pevb_cuda_pin_same(struct pevb_cuda_pin_call *c, struct pevb_surface *s);
void pevb_cuda_pin_unpin(struct pevb_surface *s);
int pevb_cuda_pin_publish(struct pevb_cuda_pin_call *c, struct pevb_surface *s);

/*
 * The registration cache's services (regcache.c), for rust/cache_glue.rs (pevb_cache_* run
 * kmod/logic/src/cache_table.rs over them): cache @c's table (pevb_ct_*: under c->lock but for lock and
 * unlock), its buffers (pevb_cbuf_*), and the struct pevb_cache_call @k of one request's pin.
 */
struct pevb_cache;
struct pevb_cbuf;
struct pevb_cache_call;
void pevb_ct_lock(struct pevb_cache *c);
void pevb_ct_unlock(struct pevb_cache *c);
struct pevb_policy *pevb_ct_policy(struct pevb_cache *c);
bool pevb_ct_closed(struct pevb_cache *c);
void pevb_ct_close(struct pevb_cache *c);
struct pevb_cbuf *pevb_ct_slot(struct pevb_cache *c, u32 slot);
void pevb_ct_set(struct pevb_cache *c, u32 slot, struct pevb_cbuf *p);
bool pevb_cbuf_stale(struct pevb_cbuf *p);
void pevb_cbuf_get(struct pevb_cbuf *p);
void pevb_cbuf_put(struct pevb_cbuf *p);
const u64 *pevb_cbuf_frames(struct pevb_cbuf *p, size_t *n);
struct pevb_cache *pevb_cache_call_cache(struct pevb_cache_call *k);
void pevb_cache_call_pin_lock(struct pevb_cache_call *k);
void pevb_cache_call_pin_unlock(struct pevb_cache_call *k);
bool pevb_cache_call_overlaps(struct pevb_cache_call *k, u64 mm, u64 first, u64 end);
int pevb_cache_call_frames(u64 first, u64 end, struct pevb_frames *out);
bool pevb_cache_call_in_use(struct pevb_cache_call *k, const u64 *frames, size_t n,
			    const struct pevb_range *replacing);
struct pevb_cbuf *pevb_cache_call_pin(struct pevb_cache_call *k, const struct pevb_range *want);
int pevb_cache_call_once(struct pevb_cache_call *k);
int pevb_cache_call_use(struct pevb_cache_call *k, struct pevb_cbuf *p, u64 offset);

/*
 * Removal's steps on @card (main.c; pevb_card_wedge, _detach_surfaces and _close_caches in picoevb.h), for
 * rust/card_glue.rs: pevb_card_remove runs them in kmod/logic/src/removal.rs's order.
 */
void pevb_card_close(struct pevb_card *card);
void pevb_card_wake(struct pevb_card *card);
void pevb_card_drain(struct pevb_card *card);
void pevb_card_release_quarantine(struct pevb_card *card);
void pevb_card_release_tables(struct pevb_card *card);
int pevb_engine_table(struct pevb_card *card, u32 idx, void **descs, size_t *ndescs, u64 *base);

/* The Rust panic handler's way out (main.c). */
void __noreturn pevb_rust_panic(const char *file, size_t file_len, u32 line);

/* Whether this build's C view of the Rust structs matches the Rust one. */
static inline bool pevb_layout_ok(void)
{
	return PEVB_LAYOUT.facts == sizeof(struct pevb_facts) &&
	       PEVB_LAYOUT.segment == sizeof(struct pevb_seg) &&
	       PEVB_LAYOUT.descriptor == PEVB_DESC_SIZE &&
	       PEVB_LAYOUT.regs == sizeof(struct pevb_regs) &&
	       PEVB_LAYOUT.range == sizeof(struct pevb_range) &&
	       PEVB_LAYOUT.policy_align <= sizeof(u64) &&	/* the C storage is u64-aligned */
	       PEVB_LAYOUT.cache_slots == PEVB_CACHE_SLOTS &&
	       PEVB_LAYOUT.owner == sizeof(struct pevb_ram_owner) &&
	       PEVB_LAYOUT.owner_align <= sizeof(u64) &&
	       PEVB_LAYOUT.life == sizeof(struct pevb_life) &&
	       PEVB_LAYOUT.life_view == sizeof(struct pevb_life_view);
}

#endif
