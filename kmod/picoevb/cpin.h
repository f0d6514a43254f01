/* SPDX-License-Identifier: GPL-2.0 */
/* cpin.c: cached pins and the work item that releases them (the registration caches of both builds). */
#ifndef PEVB_CPIN_H
#define PEVB_CPIN_H

#include <linux/types.h>

struct device;
struct pevb_cpin;
struct pevb_pin;
struct pevb_work;

struct pevb_work *pevb_work_new(void (*fn)(void *data), void *data);
void pevb_work_free(struct pevb_work *w);
void pevb_work_drain(struct pevb_work *w);
void pevb_work_wait_pages(struct pevb_work *w, const u64 *frames, unsigned long n);
bool pevb_cpin_supported(void);
int pevb_cpin_new(struct device *dev, u64 uaddr, u64 len, struct pevb_work *sweep, struct pevb_cpin **out);
bool pevb_cpin_stale(struct pevb_cpin *p);
struct pevb_pin *pevb_cpin_pin(struct pevb_cpin *p);
void pevb_cpin_sync(struct pevb_cpin *p, u64 offset, u64 len, bool to_device, bool for_device);
void pevb_cpin_release_later(struct pevb_cpin *p, bool dirty);
unsigned long pevb_cpin_npages(struct pevb_cpin *p);
u64 pevb_cpin_pfn(struct pevb_cpin *p, unsigned long i);

#endif
