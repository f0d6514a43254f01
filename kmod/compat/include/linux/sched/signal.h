/* SPDX-License-Identifier: GPL-2.0 */
/* <linux/sched/signal.h> for 4.9 (4.11 split it out of <linux/sched.h>). */
#ifndef GDR_COMPAT_SCHED_SIGNAL_H
#define GDR_COMPAT_SCHED_SIGNAL_H
#include <linux/sched.h>
#endif
