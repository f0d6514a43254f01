/* SPDX-License-Identifier: GPL-2.0 */
/* <linux/refcount.h> for 4.9 (4.11 added it), the calls p2p.c makes: an atomic_t that warns on a take from 0. */
#ifndef GDR_COMPAT_REFCOUNT_H
#define GDR_COMPAT_REFCOUNT_H
#include <linux/atomic.h>
#include <linux/bug.h>

typedef struct {
	atomic_t refs;
} refcount_t;

static inline void refcount_set(refcount_t *r, unsigned int n)
{
	atomic_set(&r->refs, n);
}

static inline void refcount_inc(refcount_t *r)
{
	WARN_ON_ONCE(atomic_inc_return(&r->refs) <= 1);
}

static inline bool refcount_dec_and_test(refcount_t *r)
{
	return atomic_dec_and_test(&r->refs);
}
#endif
