/* SPDX-License-Identifier: GPL-2.0 */
/* p2p.c: the GPU-memory shim of both builds (its contract is at the top of that file). */
#ifndef PEVB_P2P_H
#define PEVB_P2P_H

#include <linux/types.h>

struct device;
struct pevb_p2p;
int pevb_p2p_init(void);
void pevb_p2p_exit(void);
int pevb_p2p_get(void);
void pevb_p2p_put(void);
int pevb_p2p_pin(struct device *dev, u64 va, u64 len, void (*free_cb)(void *), void *data,
		 struct pevb_p2p **out);
int pevb_p2p_pin_host(struct device *dev, u64 va, u64 len, void (*free_cb)(void *), void *data,
		      struct pevb_p2p **out);
bool pevb_p2p_dmabuf_supported(void);
int pevb_p2p_import_dmabuf(struct device *dev, int fd, u64 offset, u64 len, void (*free_cb)(void *), void *data,
			   struct pevb_p2p **out, u32 *placement);
struct pevb_p2p_seg;
const struct pevb_p2p_seg *pevb_p2p_segments(struct pevb_p2p *p, u32 *n);
void pevb_p2p_use_acquire(void);
void pevb_p2p_use_release(void);
void pevb_p2p_uses_awaited(void);
void pevb_p2p_unpin(struct pevb_p2p *p);
void pevb_p2p_free_from_callback(struct pevb_p2p *p);
bool pevb_p2p_unmap_device(struct pevb_p2p *p);
void pevb_p2p_sync(struct pevb_p2p *p, u64 at, u64 len, bool to_device, bool for_device);

#endif
