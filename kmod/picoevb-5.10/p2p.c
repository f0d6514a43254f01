// SPDX-License-Identifier: GPL-2.0
/* The GPU-memory shim: the 6.18 module's own source and header (../picoevb/p2p.h). */
#include "picoevb.h"
#include "../picoevb/p2p.c"

/* cuda.c hands the shim's segments to the logic as its own: one layout. */
static_assert(sizeof(struct pevb_p2p_seg) == sizeof(struct pevb_seg) &&
	      offsetof(struct pevb_p2p_seg, addr) == offsetof(struct pevb_seg, addr) &&
	      offsetof(struct pevb_p2p_seg, len) == offsetof(struct pevb_seg, len));
