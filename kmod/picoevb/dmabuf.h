/* SPDX-License-Identifier: GPL-2.0 */
/* dmabuf.c: a dma-buf imported for DMA (IMPORT_DMABUF), under p2p.c's pin contract. */
#ifndef PEVB_DMABUF_H
#define PEVB_DMABUF_H

#include <linux/errno.h>
#include <linux/types.h>
#include <linux/version.h>

struct device;
struct pevb_dmabuf;
struct pevb_seg;

/* Where an import's bytes lie (the ABI's DMABUF_SYSTEM and DMABUF_PEER); neither bit: not known. */
#define PEVB_DMABUF_SYSTEM	(1U << 0)
#define PEVB_DMABUF_PEER	(1U << 1)

/*
 * The importer's side of the dma-buf locking convention this file follows (the reservation lock held for
 * map and unmap, never for attach, detach or put) is Linux 6.2's; 5.10 builds without it.
 */
#if IS_ENABLED(CONFIG_DMA_SHARED_BUFFER) && LINUX_VERSION_CODE >= KERNEL_VERSION(6, 2, 0)
#define PEVB_HAVE_DMABUF 1
int pevb_dmabuf_import(struct device *dev, int fd, u64 offset, u64 len, void (*moved)(void *owner), void *owner,
		       struct pevb_dmabuf **out);
bool pevb_dmabuf_stale(struct pevb_dmabuf *b);
const struct pevb_seg *pevb_dmabuf_segments(struct pevb_dmabuf *b, size_t *n);
u32 pevb_dmabuf_placement(struct pevb_dmabuf *b);
void pevb_dmabuf_unmap(struct pevb_dmabuf *b);
bool pevb_dmabuf_try_unmap(struct pevb_dmabuf *b);
void pevb_dmabuf_release(struct pevb_dmabuf *b);
#else
#define PEVB_HAVE_DMABUF 0
static inline int pevb_dmabuf_import(struct device *dev, int fd, u64 offset, u64 len, void (*moved)(void *owner),
				     void *owner, struct pevb_dmabuf **out)
{
	return -EOPNOTSUPP;
}
static inline bool pevb_dmabuf_stale(struct pevb_dmabuf *b) { return true; }
static inline const struct pevb_seg *pevb_dmabuf_segments(struct pevb_dmabuf *b, size_t *n)
{
	*n = 0;
	return NULL;
}
static inline u32 pevb_dmabuf_placement(struct pevb_dmabuf *b) { return 0; }
static inline void pevb_dmabuf_unmap(struct pevb_dmabuf *b) {}
static inline bool pevb_dmabuf_try_unmap(struct pevb_dmabuf *b) { return true; }
static inline void pevb_dmabuf_release(struct pevb_dmabuf *b) {}
#endif

#endif
