/* SPDX-License-Identifier: GPL-2.0 */
/* <linux/mmap_lock.h> for kernels before 5.8 (kmod/compat/gdr_compat.h): found only where the kernel lacks it. */
#ifndef GDR_COMPAT_MMAP_LOCK_H
#define GDR_COMPAT_MMAP_LOCK_H
#include <linux/mm_types.h>
#include <linux/rwsem.h>

static inline void mmap_read_lock(struct mm_struct *mm)
{
	down_read(&mm->mmap_sem);
}

static inline void mmap_read_unlock(struct mm_struct *mm)
{
	up_read(&mm->mmap_sem);
}
#endif
