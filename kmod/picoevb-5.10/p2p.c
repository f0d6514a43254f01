// SPDX-License-Identifier: GPL-2.0
/* The nvidia_p2p shim: the 6.18 module's own source, checked against this build's prototypes. */
#include "picoevb.h"
#include "../picoevb/p2p.c"
