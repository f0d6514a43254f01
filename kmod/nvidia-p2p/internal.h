/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Between the C object (provider.c, vram.c) and the Rust crate root (gdr_nv_p2p_main.rs, logic.rs) of
 * gdr_nv_p2p.ko. The codes must match logic.rs; gdr_p2p_rs_abi_matches() checks them at load.
 */
#ifndef GDR_NV_P2P_INTERNAL_H
#define GDR_NV_P2P_INTERNAL_H

#include <linux/types.h>

/* Page-table lifecycle events (logic.rs, mod ev). */
#define GDR_EV_INVALIDATE	1U
#define GDR_EV_RELEASE		2U
#define GDR_EV_PUT_JETSON	3U
#define GDR_EV_PUT_DGPU		4U
#define GDR_EV_FREE_TABLE	5U
#define GDR_EV_COVERS		(1U << 8)
#define GDR_EV_BLOCKABLE	(1U << 9)

/* Actions a transition asks for (logic.rs, mod act). */
#define GDR_A_AGAIN		(1U << 0)
#define GDR_A_PUT_NOTIFIER	(1U << 1)
#define GDR_A_UNREGISTER	(1U << 2)
#define GDR_A_RUN_CALLBACK	(1U << 3)
#define GDR_A_WAIT		(1U << 4)
#define GDR_A_INVALID		(1U << 31)

/* State::INITIAL.to_raw(): notifier registered, callback pending. */
#define GDR_STATE_INITIAL	0U

/* Rust (gdr_nv_p2p_main.rs). */
bool gdr_p2p_rs_abi_matches(u32 initial, const u32 events[7], const u32 actions[6]);
u64 gdr_p2p_rs_step(u32 state, u32 event);
bool gdr_p2p_rs_may_map(u32 state);
bool gdr_p2p_rs_covers(u64 start, u64 end, u64 vaddr);
int gdr_p2p_rs_jetson_span(u64 vaddr, u64 size, u32 page_shift, u64 *first, u32 *npages);
int gdr_p2p_rs_gpu_span(u64 va, u64 len, u32 page_shift, u32 gpu_shift, u32 *npages, u32 *ngpu);
size_t gdr_p2p_rs_plan_segments(const u64 *phys, size_t n, u32 page_shift, u64 max_seg,
				u64 boundary_mask, u32 *first, u32 *count);
ssize_t gdr_p2p_rs_check_gpu_pages(const u64 *phys, size_t n, u32 page_shift, u32 gpu_shift);
int gdr_p2p_rs_gpu_bus_addrs(const u64 *seg_addr, const u64 *seg_len, size_t nseg, u32 gpu_shift,
			     u64 *out, size_t ngpu);

/* C, called from the Rust module's init and exit. */
int gdr_p2p_c_init(void);
void gdr_p2p_c_exit(void);

/* vram.c (dGPU flavour only): the bench's stand-in for GPU memory. */
#define GDR_GPU_PAGE_SHIFT	16
#define GDR_GPU_PAGE_SIZE	(1UL << GDR_GPU_PAGE_SHIFT)
int gdr_vram_init(void);
void gdr_vram_exit(void);

#endif /* GDR_NV_P2P_INTERNAL_H */
