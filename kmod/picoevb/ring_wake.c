// SPDX-License-Identifier: GPL-2.0
/*
 * A stream ring's wake-ups: the eventfd its caller names (RING_EVENTFD), held for the ring's ioctl and
 * signalled each time the driver publishes progress and once at the end. One source for both builds.
 */
#include <linux/err.h>
#include <linux/eventfd.h>
#include <linux/version.h>

int pevb_eventfd_get(int fd, struct eventfd_ctx **ctx);
void pevb_eventfd_signal(struct eventfd_ctx *ctx);
void pevb_eventfd_put(struct eventfd_ctx *ctx);

/*
 * The caller's eventfd @fd, referenced until pevb_eventfd_put: -EBADF (no such descriptor), -EINVAL (not an
 * eventfd). The reference is the context's, not the file's: closing the descriptor mid-ring leaves it valid.
 */
int pevb_eventfd_get(int fd, struct eventfd_ctx **ctx)
{
	struct eventfd_ctx *c = eventfd_ctx_fdget(fd);

	if (IS_ERR(c))
		return PTR_ERR(c);
	*ctx = c;
	return 0;
}

/* Adds 1 to its count and wakes its readers; from the ring's ioctl, process context, holding nothing. */
void pevb_eventfd_signal(struct eventfd_ctx *ctx)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 8, 0)
	eventfd_signal(ctx);
#else
	eventfd_signal(ctx, 1);
#endif
}

void pevb_eventfd_put(struct eventfd_ctx *ctx)
{
	eventfd_ctx_put(ctx);
}
