// SPDX-License-Identifier: GPL-2.0
/* pevb_eventfd_*: the 6.18 module's own source, checked against this build's prototypes. */
#include "picoevb.h"
#include "../picoevb/ring_wake.c"
