/* SPDX-License-Identifier: GPL-2.0 */
/* <linux/sched/mm.h> for 4.9 (4.11 split it out), with what 4.12 and 4.14 added that the provider's test
 * switches use. */
#ifndef GDR_COMPAT_SCHED_MM_H
#define GDR_COMPAT_SCHED_MM_H
#include <linux/sched.h>
#include <linux/gfp.h>

static inline unsigned int memalloc_noreclaim_save(void)
{
	unsigned int f = current->flags & PF_MEMALLOC;

	current->flags |= PF_MEMALLOC;
	return f;
}

static inline void memalloc_noreclaim_restore(unsigned int f)
{
	current->flags = (current->flags & ~PF_MEMALLOC) | f;
}

/* lockdep's reclaim priming: 4.9's lockdep_set_current_reclaim_state is not exported, so nothing. */
static inline void fs_reclaim_acquire(gfp_t g)
{
}

static inline void fs_reclaim_release(gfp_t g)
{
}
#endif
