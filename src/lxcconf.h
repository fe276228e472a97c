/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * An LXC container's config, as pure functions on its bytes: what the
 * migration needs to read (the map, the rootfs, the includes, the
 * mount entries) and the config with its lxc.idmap lines replaced and
 * every other byte kept.  src/lxc.c does the I/O.
 */
#ifndef SHIFTIMG_LXCCONF_H
#define SHIFTIMG_LXCCONF_H

#include <stdbool.h>
#include <stddef.h>

#include "rules.h"

#define SI_LXC_INCLUDES	16

enum si_lxc_rootfs {
	SI_LXC_ROOTFS_NONE,	/* no lxc.rootfs.path */
	SI_LXC_ROOTFS_DIR,	/* "dir:PATH" or a plain path */
	SI_LXC_ROOTFS_LOOP,	/* "loop:PATH", an image */
	SI_LXC_ROOTFS_OTHER,	/* btrfs:, zfs:, lvm:, overlay:, ... */
};

/* A piece of the config buffer. */
struct si_lxc_span {
	size_t off, len;
};

struct si_lxc_conf {
	/* container id -> host id, as lxc.idmap gives them; the last "lxc.idmap =" clears. */
	struct si_idmap map[2];
	bool have_map[2];
	unsigned int idmap_lines;
	enum si_lxc_rootfs rootfs_kind;
	struct si_lxc_span rootfs;	/* the path, its "dir:"/"loop:" prefix off */
	struct si_lxc_span rootfs_type;	/* the prefix of an OTHER rootfs */
	struct si_lxc_span include[SI_LXC_INCLUDES];
	unsigned int nr_include;
	unsigned int mount_entries;	/* lxc.mount.entry lines */
	bool lxc_keys;			/* any lxc.* key at all */
};

/*
 * Parses a config (or an included file): 0, or -EINVAL with msg
 * saying which line and why.
 */
int si_lxc_conf_parse(const char *buf, size_t len, struct si_lxc_conf *c,
		      char *msg, size_t msgsize);

/*
 * The config with the lxc.idmap lines of the kinds in `kinds`
 * (SHIFTIMG_UID, SHIFTIMG_GID) replaced by `map`: the new lines stand
 * where the first replaced line stood, or at the end if there was none;
 * every other line is kept byte for byte.  A malloc'ed buffer, or NULL.
 */
char *si_lxc_conf_render(const char *buf, size_t len,
			 const struct si_idmap map[2], unsigned int kinds,
			 size_t *outlen);

#endif /* SHIFTIMG_LXCCONF_H */
