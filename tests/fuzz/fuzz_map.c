// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The map parsers on hostile text: --map specs (one per line), the same
 * text as a /proc/PID/uid_map file and as subuid/subgid files.  Checks
 * that what was accepted is a map: no overlaps, lookups that invert.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "shiftimg-int.h"

/* A file holding the input, named for the parsers that want a path. */
static int as_file(const uint8_t *data, size_t size, char *path, size_t len)
{
	int fd = memfd_create("fuzz-map", MFD_CLOEXEC);

	if (fd < 0 || write(fd, data, size) != (ssize_t)size)
		abort();
	snprintf(path, len, "/proc/self/fd/%d", fd);
	return fd;
}

/* Everything the map holds must send x one way and back again. */
static void check_map(const struct si_idmap *m)
{
	struct si_idmap inv;
	unsigned int i;
	uint32_t y, z;

	if (m->nr > SI_MAP_MAX)
		abort();
	si_idmap_invert(m, &inv);
	for (i = 0; i < m->nr; i++) {
		const struct si_extent *e = &m->ext[i];
		uint32_t probe[3] = { e->first, e->first + (e->count - 1) / 2,
				      e->first + (e->count - 1) };
		int j;

		if (i && m->ext[i - 1].first + (uint64_t)m->ext[i - 1].count >
			 e->first)
			abort();	/* unsorted or overlapping */
		for (j = 0; j < 3; j++) {
			if (!si_idmap_lookup(m, probe[j], &y) ||
			    y != e->target + (probe[j] - e->first))
				abort();
			if (!si_idmap_lookup(&inv, y, &z) || z != probe[j])
				abort();
		}
	}
}

static void check(struct shiftimg *h)
{
	char buf[64], *full;
	int n;

	check_map(&h->given[0]);
	check_map(&h->given[1]);
	/*
	 * Measured (NULL, 0), then formatted into a small buffer: the same
	 * length, truncated and terminated, never overflowed.
	 */
	n = shiftimg_map_format(h, 0, NULL, 0);
	if (shiftimg_map_format(h, 0, buf, sizeof(buf)) != n ||
	    memchr(buf, '\0', sizeof(buf)) == NULL)
		abort();
	full = malloc((size_t)n + 1);
	if (!full || shiftimg_map_format(h, 0, full, (size_t)n + 1) != n ||
	    strlen(full) != (size_t)n || strncmp(full, buf, sizeof(buf) - 1))
		abort();
	free(full);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct shiftimg *h = shiftimg_new();
	char *text = malloc(size + 1), *line, *save = NULL;
	char path[64];
	int fd;

	if (!h || !text)
		abort();
	memcpy(text, data, size);
	text[size] = '\0';
	for (line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save))
		shiftimg_map_parse(h, SHIFTIMG_BOTH, line);
	check(h);
	shiftimg_free(h);

	fd = as_file(data, size, path, sizeof(path));
	h = shiftimg_new();
	shiftimg_map_load(h, SHIFTIMG_UID, path);
	check(h);
	shiftimg_free(h);
	h = shiftimg_new();
	shiftimg_map_subid(h, SHIFTIMG_BOTH, "root", path, path);
	shiftimg_map_subid(h, SHIFTIMG_BOTH, "0", path, path);
	check(h);
	shiftimg_free(h);
	close(fd);
	free(text);
	return 0;
}
