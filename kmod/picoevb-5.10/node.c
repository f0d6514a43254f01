// SPDX-License-Identifier: GPL-2.0
/* The cards' character devices: the 6.18 module's own source, checked against this build's prototypes. */
#include "picoevb.h"
#include "../picoevb/node.c"
