// SPDX-License-Identifier: GPL-2.0
/* Cached pins: the 6.18 module's own source, checked against this build's prototypes. */
#include "picoevb.h"
#include "../picoevb/cpin.c"
