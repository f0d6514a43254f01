/* SPDX-License-Identifier: GPL-2.0 */
/* One PicoEVB card as the 5.10 glue holds it; the same lifecycle rules as kmod/picoevb/card.rs. */
#ifndef PEVB_PICOEVB_H
#define PEVB_PICOEVB_H

#include <linux/completion.h>
#include <linux/idr.h>
#include <linux/kref.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/spinlock.h>
#include <linux/wait.h>
#include "services.h"
#include "../picoevb/cpin.h"
#include "../picoevb/node.h"
#include "../picoevb/p2p.h"
#include "../picoevb/pin.h"
#include "../picoevb/watched.h"

/*
 * One page per engine: no adjacent block crosses 4 KiB. Its last slot holds the engine's write-back word
 * (the logic's engine::writeback_offset), the others descriptors; longer requests run as more chains.
 */
#define PEVB_TABLE_LEN (PAGE_SIZE / PEVB_DESC_SIZE)

struct pevb_engine {
	int idx;			/* 0: H2C, 1: C2H */
	struct mutex lock;		/* one request at a time; guards table */
	void *table;			/* descriptor table (coherent), NULL once the card is gone */
	dma_addr_t table_dma;
	struct completion done;		/* signalled by the IRQ handler */
	atomic_t status;		/* status the handler read (read-to-clear) for the chain in flight */
};

struct pevb_pin;

struct pevb_card {
	struct kref ref;		/* the driver's binding plus each open file */
	struct pci_dev *pdev;
	void __iomem *bar_user;
	void __iomem *bar_dma;
	struct pevb_engine eng[2];
	u32 index;
	char name[16];
	struct pevb_node *node;		/* /dev/picoevbN (node.c) */
	struct pevb_facts facts;

	spinlock_t gate;		/* active, gone, wedged */
	unsigned int active;		/* requests using the device (registers, DMA mappings) */
	bool gone;			/* removed: every request fails with ENODEV */
	bool wedged;			/* an engine could not be shown idle: no chain until unbind */
	wait_queue_head_t drained;	/* active dropped to 0 while gone */
	struct mutex qlock;		/* quarantine */
	struct list_head quarantine;	/* pins of requests a wedged engine may still touch, until unbind */
	struct list_head cquarantine;	/* the same for cached buffers' uses (struct pevb_cuse) */
	struct mutex pinlock;		/* one PIN_CUDA at a time checks for overlaps and pins */
	spinlock_t slock;		/* surfaces */
	struct list_head surfaces;	/* GPU surfaces mapped for this device, to unmap at removal */
	struct mutex cachelock;		/* caches; inside pinlock, outside each cache's table lock */
	struct list_head caches;	/* the open files' registration caches, to empty at removal */
	atomic_t callbacks_awaited;	/* free callbacks removal waits for now (debugfs state) */
	struct dentry *debugfs;		/* /sys/kernel/debug/picoevbN: the state file */
	struct mutex ram_lock;		/* ram_owner, and each file's membership of it (ram.c) */
	struct pevb_ram_owner ram_owner;	/* who may use the card RAM */
};

/* The GPU surfaces of one open file, by handle. */
struct pevb_surfaces {
	spinlock_t lock;		/* idr; never held across an allocation (cuda.c's pevb_surfaces_pin) */
	struct idr idr;
};

/* ram.c: the card RAM's ownership (kmod/picoevb/ram.rs) */
void pevb_ram_setup(struct pevb_card *card);
int pevb_ram_use(struct pevb_card *card, u64 *member);
void pevb_ram_unuse(struct pevb_card *card);
int pevb_ram_control(struct pevb_card *card, u64 *member, u32 op, u32 *state);
void pevb_ram_closed(struct pevb_card *card, u64 *member);

/* card.c */
int pevb_card_begin(struct pevb_card *card);
void pevb_card_end(struct pevb_card *card);
bool pevb_card_gone(struct pevb_card *card);
bool pevb_card_wedged(struct pevb_card *card);
void pevb_card_wedge(struct pevb_card *card);
void pevb_card_quarantine(struct pevb_card *card, struct pevb_pin *p);
struct pevb_cuse;
void pevb_card_quarantine_cached(struct pevb_card *card, struct pevb_cuse *u);
void pevb_card_put(struct pevb_card *card);
void pevb_card_debugfs_add(struct pevb_card *card);

static inline u32 pevb_rd(struct pevb_card *card, u32 off)
{
	return ioread32(card->bar_dma + off);
}

static inline void pevb_wr(struct pevb_card *card, u32 off, u32 v)
{
	iowrite32(v, card->bar_dma + off);
}

/* engine.c: the engine's kernel services; the protocol itself is Rust (logic.h, pevb_engine_*) */
int pevb_engine_init(struct pevb_card *card, struct pevb_engine *e, int idx);
void pevb_engine_release_table(struct pevb_card *card, struct pevb_engine *e);
void pevb_engine_signal(struct pevb_engine *e, u32 status);
int pevb_transfer(struct pevb_card *card, struct pevb_engine *e, const struct pevb_seg *segs,
		  size_t nsegs, u64 host_off, u64 fpga, u64 len, bool card_time, u64 *card_ns);
/* The user BAR's registers (called from rust/user_glue.rs only, which bounds @off). */
u32 pevb_plat_user_rd(struct pevb_card *card, u32 off);
void pevb_plat_user_wr(struct pevb_card *card, u32 off, u32 v);

/* What the protocol runs on (called from rust/engine_glue.rs only). */
u32 pevb_plat_rd(struct pevb_card *card, u32 off);
void pevb_plat_wr(struct pevb_card *card, u32 off, u32 v);
int pevb_plat_gate_enter(struct pevb_card *card);
void pevb_plat_gate_exit(struct pevb_card *card);
u32 pevb_plat_status(struct pevb_card *card, u32 idx);
void pevb_plat_add_status(struct pevb_card *card, u32 idx, u32 bits);
void pevb_plat_rearm(struct pevb_card *card, u32 idx);
int pevb_plat_wait(struct pevb_card *card, u32 idx, u32 ms);
u64 pevb_plat_now_us(void);
void pevb_plat_sleep_us(u32 us);
void pevb_plat_log(struct pevb_card *card, u32 idx, u32 kind, u32 a, u32 b);
bool pevb_plat_unblock(struct pevb_card *card, u32 idx);


/* pin.c (the shared one's functions are in ../picoevb/pin.h) */
void pevb_pin_park(struct list_head *q, struct pevb_pin *p);
void pevb_pin_release_all(struct list_head *q);
int pevb_pin_frames(struct pevb_pin *p, u64 **out, size_t *n);
int pevb_user_frames(u64 first, u64 end, u64 **out, size_t *n);
int pevb_user_prefault(u64 uaddr, u64 len, bool write);
int pevb_user_load_u64(u64 uaddr, u64 *v);
int pevb_user_store_u64(u64 uaddr, u64 v);

/* ring_wake.c (the 6.18 module's): a stream ring's eventfd */
struct eventfd_ctx;
int pevb_eventfd_get(int fd, struct eventfd_ctx **ctx);
void pevb_eventfd_signal(struct eventfd_ctx *ctx);
void pevb_eventfd_put(struct eventfd_ctx *ctx);

/* regcache.c */
struct pevb_cache;
int pevb_cache_open(struct pevb_card *card, struct pevb_cache **out);
void pevb_cache_release(struct pevb_card *card, struct pevb_cache *c);
int pevb_cache_get(struct pevb_cache *c, struct pevb_card *card, u64 addr, u64 len, bool to_device,
		   struct pevb_cuse **cuse, struct pevb_pin **pin);
const struct pevb_seg *pevb_cuse_segments(struct pevb_cuse *u, size_t *n);
void pevb_cuse_end(struct pevb_cuse *u);
void pevb_cuse_park(struct list_head *q, struct pevb_cuse *u);
void pevb_cuse_release_all(struct list_head *q);
void pevb_card_evict_cached(struct pevb_card *card, unsigned long mm, u64 first, u64 end, const u64 *frames,
			    size_t n);
void pevb_card_close_caches(struct pevb_card *card);
struct seq_file;
void pevb_card_describe_caches(struct pevb_card *card, struct seq_file *m);

/* cuda.c */
struct pevb_surface;
/* A DMA's use of a GPU surface (cuda.rs's InUse): the request's own, so taking one allocates nothing. */
struct pevb_use {
	struct pevb_surface *s;		/* NULL: none held */
	u64 at, len;			/* bytes handed to the device; back to the CPU after a C2H */
	bool to_device;
};
void pevb_surfaces_init(struct pevb_surfaces *t);
int pevb_surfaces_pin(struct pevb_surfaces *t, struct pevb_card *card, bool host, u64 va, u64 len);
int pevb_surfaces_unpin(struct pevb_surfaces *t, u32 handle);
int pevb_surfaces_len(struct pevb_surfaces *t, u32 handle, u64 *len);
void pevb_surfaces_unpin_all(struct pevb_surfaces *t);
int pevb_surfaces_enter(struct pevb_surfaces *t, u32 handle, u64 at, u64 len, bool to_device,
			struct pevb_use *u);
const struct pevb_seg *pevb_use_segments(struct pevb_use *u, size_t *n);
void pevb_use_end(struct pevb_use *u);
void pevb_card_detach_surfaces(struct pevb_card *card);
bool pevb_card_overlaps(struct pevb_card *card, unsigned long mm, u64 first, u64 end, const u64 *frames,
			size_t n);
void pevb_card_describe_surfaces(struct pevb_card *card, struct seq_file *m);
bool pevb_provider_available(void);

/* file.c */
extern const struct file_operations pevb_fops;

#endif
