// SPDX-License-Identifier: GPL-2.0
/* Watched pins: the 6.18 module's own source, checked against this build's prototypes. */
#include "picoevb.h"
#include "../picoevb/watched.c"
