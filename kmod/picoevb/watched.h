/* SPDX-License-Identifier: GPL-2.0 */
/* watched.c: long-term pins under an mmu interval notifier (the registration caches, pinned host surfaces). */
#ifndef PEVB_WATCHED_H
#define PEVB_WATCHED_H

#include <linux/types.h>

/* Watched pins need the mmu interval notifier (5.5): none on 4.x (kmod/compat/gdr_compat.h), where
 * pevb_watched_new* answer -EOPNOTSUPP and the registration cache is off. */
#if defined(CONFIG_MMU_NOTIFIER) && !defined(GDR_NO_INTERVAL_NOTIFIER)
#define PEVB_HAVE_WATCHED 1
#else
#define PEVB_HAVE_WATCHED 0
#endif

struct device;
struct pevb_pin;
struct pevb_watched;
struct work_struct;

int pevb_watched_new(struct device *dev, u64 uaddr, u64 len, struct work_struct *changed,
		     struct pevb_watched **out);
int pevb_watched_new_gone(struct device *dev, u64 uaddr, u64 len, void (*gone)(void *owner), void *owner,
			  struct pevb_watched **out);
bool pevb_watched_stale(struct pevb_watched *w);
struct pevb_pin *pevb_watched_pin(struct pevb_watched *w);
struct pevb_pin *pevb_watched_end(struct pevb_watched *w);

#endif
