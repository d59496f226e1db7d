// SPDX-License-Identifier: LGPL-2.1-or-later
#include "lm.h"

int main(int argc, char **argv)
{
	return lm_main(argc, argv);
}
