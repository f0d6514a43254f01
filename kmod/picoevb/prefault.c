// SPDX-License-Identifier: GPL-2.0
/*
 * The caller's user memory, touched from its ioctl holding nothing of the card's: a request's memory
 * faulted in before any hold or lock, and a stream ring's control words. One source for both builds.
 */
#include <linux/mm.h>
#include <linux/sched/signal.h>
#include <linux/uaccess.h>

int pevb_user_prefault(u64 uaddr, u64 len, bool write);
int pevb_user_load_u64(u64 uaddr, u64 *v);
int pevb_user_store_u64(u64 uaddr, u64 v);

/*
 * Faults [uaddr, uaddr + len) of the caller's memory in (for writing if @write and the memory allows it,
 * else for reading), holding nothing of the driver's: the pins that follow under the card's pin lock or a
 * request's hold on the device (which unbind drains) then find the pages present. A range whose fault
 * never resolves (userfaultfd, a hung FUSE server) thus stalls this caller alone, in GUP's killable fault
 * wait, not every PIN_CUDA and cache miss of the card nor the card's removal. Takes no reference past the
 * call. Only a fatal signal is an error (-EINTR); whatever else fails here, the pin after it reports.
 * Not a guarantee: memory the process unmaps or discards again before the pin faults there once more.
 */
int pevb_user_prefault(u64 uaddr, u64 len, bool write)
{
	struct page *pages[16];
	unsigned long first, npages, done = 0;
	unsigned int gup = write ? FOLL_WRITE : 0;

	if (!len || uaddr + len < uaddr)
		return 0;
	first = uaddr >> PAGE_SHIFT;
	npages = ((uaddr + len - 1) >> PAGE_SHIFT) - first + 1;
	while (done < npages) {
		int want = min_t(unsigned long, npages - done, ARRAY_SIZE(pages));
		int got = get_user_pages_fast((first + done) << PAGE_SHIFT, want, gup, pages);
		int i;

		if (got <= 0 && gup) {
			gup = 0;	/* read-only memory the device only reads: present is enough */
			continue;
		}
		if (got <= 0)
			return fatal_signal_pending(current) ? -EINTR : 0;
		for (i = 0; i < got; i++)
			put_page(pages[i]);
		done += got;
	}
	return 0;
}

/*
 * One naturally aligned 64-bit load or store of the caller's memory (the caller checks the alignment):
 * get_user/put_user of a u64 is a single access on 64-bit arches (x86-64 mov, arm64 ldtr/sttr), where a
 * byte copy (copy_to_user may use rep movsb) could let a concurrent reader see a torn counter. -EFAULT.
 */
int pevb_user_load_u64(u64 uaddr, u64 *v)
{
	return get_user(*v, (u64 __user *)u64_to_user_ptr(uaddr));
}

int pevb_user_store_u64(u64 uaddr, u64 v)
{
	return put_user(v, (u64 __user *)u64_to_user_ptr(uaddr));
}
