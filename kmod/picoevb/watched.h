/* SPDX-License-Identifier: GPL-2.0 */
/* watched.c: long-term pins under an mmu interval notifier (the registration caches, pinned host surfaces). */
#ifndef PEVB_WATCHED_H
#define PEVB_WATCHED_H

#include <linux/types.h>

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
