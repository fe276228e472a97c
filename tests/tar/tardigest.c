// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * tardigest MAP IN OUT: shifts the tarball IN into OUT through the
 * library and prints the two digests of the pass, "output" and
 * "diff_id", one a line, for the tests to check against sha256sum.
 */
#include <stdio.h>

#include "shiftimg.h"

int main(int argc, char **argv)
{
	struct shiftimg *h = shiftimg_new();
	const char *o, *d;

	if (argc != 4 || !h)
		return 2;
	shiftimg_set_flags(h, SHIFTIMG_DIGEST);
	if (shiftimg_map_parse(h, SHIFTIMG_BOTH, argv[1]) < 0 ||
	    shiftimg_set_option(h, "output", argv[3]) < 0 ||
	    shiftimg_run(h, argv[2]) < 0) {
		fprintf(stderr, "tardigest: %s\n", shiftimg_error(h));
		return 1;
	}
	o = shiftimg_digest(h, "output");
	d = shiftimg_digest(h, "diff_id");
	printf("%s\n%s\n", o ? o : "none", d ? d : "none");
	shiftimg_free(h);
	return 0;
}
