// SPDX-License-Identifier: GPL-2.0
/*
 * /dev/picoevbN on 5.10: the ioctl ABI of crates/picoevb-abi, dispatched by the shared Rust logic
 * (kmod/logic/src/ioctl.rs through rust/ioctl_glue.rs, pevb_ioctl_run) over the services of one open file
 * below: its card, its surfaces, its cache, its part in the RAM's ownership, and the user copies. This C
 * never interprets an ABI struct. A request whose engine could not be shown idle keeps its pages pinned.
 */
#include <linux/delay.h>
#include <linux/fs.h>
#include <linux/ktime.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include "picoevb.h"

struct pevb_file {
	struct pevb_card *card;
	struct pevb_surfaces surfaces;	/* GPU surfaces pinned through this file */
	struct pevb_cache *cache;	/* host buffers cached through this file (regcache.c) */
	u64 ram_member;			/* its part in the card RAM's ownership (ram.c), under ram_lock */
};

static int pevb_open(struct inode *inode, struct file *file)
{
	/*
	 * The node's door (node.c) gave us the card and holds pevb_node_lock around this call; removal shuts
	 * the door under that lock before it puts the binding's reference: the card is alive.
	 */
	struct pevb_card *card = file->private_data;
	struct pevb_file *pf = kzalloc(sizeof(*pf), GFP_KERNEL);

	if (!pf)
		return -ENOMEM;
	if (pevb_cache_open(card, &pf->cache)) {
		kfree(pf);
		return -ENOMEM;
	}
	kref_get(&card->ref);
	pf->card = card;
	pevb_surfaces_init(&pf->surfaces);
	file->private_data = pf;
	/* No file position (the ioctls carry their addresses): lseek fails with ESPIPE, as on 6.18, whose
	 * open drops FMODE_LSEEK for file operations without llseek. */
	return nonseekable_open(inode, file);
}

static int pevb_release(struct inode *inode, struct file *file)
{
	struct pevb_file *pf = file->private_data;

	pevb_surfaces_unpin_all(&pf->surfaces);
	pevb_cache_release(pf->card, pf->cache);
	/* No request of this file is in flight any more: the RAM is free if this was its owner's last file. */
	pevb_ram_closed(pf->card, &pf->ram_member);
	pevb_card_put(pf->card);
	kfree(pf);
	return 0;
}

/*
 * One transfer's holds, taken and let go of in the order the shared gate decides (kmod/logic/src/gate.rs,
 * through rust/gate_glue.rs, which calls the pevb_gate_* services below and nothing else touches @side).
 * A side holds a pin of user memory for this request, a use of a cached buffer, or a use of a GPU surface.
 */
struct pevb_xfer {
	struct pevb_file *pf;
	struct {
		struct pevb_pin *pin;
		struct pevb_cuse *cuse;
		struct pevb_use use;	/* use.s: held */
	} side[2];			/* 0: the source (the device reads it), 1: the destination */
};

/* prefault.c: before the request holds the device (removal drains that hold) or any lock of the card. */
int pevb_gate_prefault(u64 addr, u64 len, bool device_writes)
{
	return pevb_user_prefault(addr, len, device_writes);
}

int pevb_gate_begin(struct pevb_xfer *x)
{
	return pevb_card_begin(x->pf->card);
}

void pevb_gate_end(struct pevb_xfer *x)
{
	pevb_card_end(x->pf->card);
}

int pevb_gate_ram_begin(struct pevb_xfer *x)
{
	return pevb_ram_use(x->pf->card, &x->pf->ram_member);
}

void pevb_gate_ram_end(struct pevb_xfer *x)
{
	pevb_ram_unuse(x->pf->card);
}

int pevb_gate_pin(struct pevb_xfer *x, u32 side, u64 addr, u64 len)
{
	return pevb_cache_get(x->pf->cache, x->pf->card, addr, len, side == 0, &x->side[side].cuse,
			      &x->side[side].pin);
}

void pevb_gate_unpin(struct pevb_xfer *x, u32 side)
{
	if (x->side[side].cuse)
		pevb_cuse_end(x->side[side].cuse);
	else
		pevb_unpin_user(x->side[side].pin);
}

/* Until unbind: the engine may still touch the pages. */
void pevb_gate_quarantine(struct pevb_xfer *x, u32 side)
{
	if (x->side[side].cuse)
		pevb_card_quarantine_cached(x->pf->card, x->side[side].cuse);
	else
		pevb_card_quarantine(x->pf->card, x->side[side].pin);
}

int pevb_gate_enter(struct pevb_xfer *x, u32 side, u32 handle, u64 at, u64 len)
{
	return pevb_surfaces_enter(&x->pf->surfaces, handle, at, len, side == 0, &x->side[side].use);
}

void pevb_gate_exit(struct pevb_xfer *x, u32 side)
{
	pevb_use_end(&x->side[side].use);
}

bool pevb_gate_wedged(struct pevb_xfer *x)
{
	return pevb_card_wedged(x->pf->card);
}

/*
 * The window at @at of the request: a host pin holds just the window, a surface use the whole surface, so
 * *@off is where the window starts in the returned segments.
 */
static const struct pevb_seg *segments(struct pevb_xfer *x, u32 side, u64 at, size_t *n, u64 *off)
{
	*off = 0;
	if (x->side[side].use.s) {
		*off = at;
		return pevb_use_segments(&x->side[side].use, n);
	}
	if (x->side[side].cuse)
		return pevb_cuse_segments(x->side[side].cuse, n);
	return pevb_pin_segments(x->side[side].pin, n);
}

/*
 * @dir 0: H2C from the source, 1: C2H into the destination, so @dir is also the side (gate.rs's Side::of).
 * Killable: the engine may be busy with another request for up to its timeout. *@ns: the kernel's clock
 * around the chains, or with @card_time the engine's run time by the card's clock.
 */
int pevb_gate_one_way(struct pevb_xfer *x, u32 dir, u64 fpga, u64 at, u64 len, bool card_time, u64 *ns)
{
	struct pevb_card *card = x->pf->card;
	struct pevb_engine *e = &card->eng[dir];
	const struct pevb_seg *segs;
	size_t n;
	u64 t0, off, card_ns = 0;
	int ret;

	segs = segments(x, dir, at, &n, &off);
	ret = mutex_lock_killable(&e->lock);
	if (ret)
		return ret;
	t0 = ktime_get_ns();
	ret = pevb_transfer(card, e, segs, n, off, fpga, len, card_time, &card_ns);
	*ns = card_time ? card_ns : ktime_get_ns() - t0;
	mutex_unlock(&e->lock);
	return ret;
}

/* Source -> FPGA RAM -> destination, pipelined (kmod/logic/src/round_trip.rs), both engines locked H2C first. */
int pevb_gate_round_trip(struct pevb_xfer *x, u64 at, u64 len, u64 *ns)
{
	struct pevb_card *card = x->pf->card;
	const struct pevb_seg *src, *dst;
	size_t nsrc, ndst;
	u64 t0, src_at, dst_at;
	int ret;

	src = segments(x, 0, at, &nsrc, &src_at);
	dst = segments(x, 1, at, &ndst, &dst_at);
	ret = mutex_lock_killable(&card->eng[0].lock);
	if (ret)
		return ret;
	ret = mutex_lock_killable(&card->eng[1].lock);
	if (ret) {
		mutex_unlock(&card->eng[0].lock);
		return ret;
	}
	t0 = ktime_get_ns();
	ret = pevb_round_trip(card, src, nsrc, src_at, dst, ndst, dst_at, len);
	*ns = ktime_get_ns() - t0;
	mutex_unlock(&card->eng[1].lock);
	mutex_unlock(&card->eng[0].lock);
	return ret;
}

/* ---- one open file's services, for rust/ioctl_glue.rs ---- */

struct pevb_card *pevb_file_card(struct pevb_file *pf)
{
	return pf->card;
}

struct pevb_cache *pevb_file_cache(struct pevb_file *pf)
{
	return pf->cache;
}

/* @req: the dispatcher's checked request, handed back to the gate (pevb_gate_run) with this transfer's holds. */
int pevb_file_transfer(struct pevb_file *pf, const void *req, u64 *ns)
{
	struct pevb_xfer x = { .pf = pf };

	return pevb_gate_run(&x, req, ns);
}

int pevb_file_pin(struct pevb_file *pf, bool host, u64 va, u64 len)
{
	return pevb_surfaces_pin(&pf->surfaces, pf->card, host, va, len);
}

int pevb_file_unpin(struct pevb_file *pf, u32 handle)
{
	return pevb_surfaces_unpin(&pf->surfaces, handle);
}

int pevb_file_ram(struct pevb_file *pf, u32 op, u32 *state)
{
	return pevb_ram_control(pf->card, &pf->ram_member, op, state);
}

int pevb_file_surface_len(struct pevb_file *pf, u32 handle, u64 *len)
{
	return pevb_surfaces_len(&pf->surfaces, handle, len);
}

/* A stream ring's chain boundary (kmod/logic/src/stream_ring_run.rs): a signal ends the ring. */
bool pevb_file_interrupted(void)
{
	return signal_pending(current);
}

void pevb_file_sleep_us(u32 us)
{
	usleep_range(us, us + us / 4);
}

int pevb_copy_in(u64 arg, void *buf, size_t len)
{
	return copy_from_user(buf, u64_to_user_ptr(arg), len) ? -EFAULT : 0;
}

int pevb_copy_out(u64 arg, const void *buf, size_t len)
{
	return copy_to_user(u64_to_user_ptr(arg), buf, len) ? -EFAULT : 0;
}

static long pevb_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	return pevb_ioctl_run(file->private_data, cmd, arg);
}

const struct file_operations pevb_fops = {
	.owner = THIS_MODULE,	/* an open file holds the module: rmmod waits for close */
	.open = pevb_open,
	.release = pevb_release,
	.unlocked_ioctl = pevb_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.llseek = no_llseek,
};
