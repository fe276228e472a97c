// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * An LXC config on hostile bytes: what is accepted can be rewritten,
 * and the rewrite reads back with the new map in place of the old, the
 * other kind's map and the rootfs as they were.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lxcconf.h"

static void same_map(const struct si_idmap *a, const struct si_idmap *b)
{
	if (a->nr != b->nr || memcmp(a->ext, b->ext, a->nr * sizeof(a->ext[0])))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct si_lxc_conf in, out;
	struct si_idmap map[2] = { { 0 } };
	char msg[512], e[64];
	unsigned int kinds;
	size_t len;
	char *buf;

	if (si_lxc_conf_parse((const char *)data, size, &in, msg, sizeof(msg)) < 0)
		return 0;
	si_idmap_add(&map[0], 0, 200000, 65536, e, sizeof(e));
	si_idmap_add(&map[1], 0, 300000, 1000, e, sizeof(e));
	si_idmap_add(&map[1], 1000, 400000, 64536, e, sizeof(e));
	for (kinds = 1; kinds <= 3; kinds++) {
		buf = si_lxc_conf_render((const char *)data, size, map, kinds, &len);
		if (!buf)
			abort();
		/* A replaced kind reads back as the new map; the other as before. */
		if (si_lxc_conf_parse(buf, len, &out, msg, sizeof(msg)) < 0)
			abort();
		same_map(&out.map[0], kinds & 1 ? &map[0] : &in.map[0]);
		same_map(&out.map[1], kinds & 2 ? &map[1] : &in.map[1]);
		if (out.rootfs_kind != in.rootfs_kind || out.rootfs.len != in.rootfs.len ||
		    memcmp(buf + out.rootfs.off, data + in.rootfs.off, in.rootfs.len) ||
		    out.mount_entries != in.mount_entries || out.nr_include != in.nr_include)
			abort();
		free(buf);
	}
	return 0;
}
