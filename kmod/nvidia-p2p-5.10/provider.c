// SPDX-License-Identifier: GPL-2.0
/* The provider itself: the same source as the 6.18 module's, so both kernels run one provider. */
#include "../nvidia-p2p/provider.c"
