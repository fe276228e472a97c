// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * A containers/storage store (podman, buildah, CRI-O) as a target: a
 * directory holding storage.lock and a <driver>-layers/layers.json.
 *
 * A rootless store lives in its owner's user namespace: container root
 * is the owner's own uid (and gid), and container ids 1 up are the
 * owner's subordinate range, so every file of every layer (overlay's
 * diff directories, vfs's dirs), every container's writable layer and
 * userdata, and every volume holds host ids of that namespace.  When
 * the owner's /etc/subuid range changes, the whole store is shifted from
 * the old namespace to the new one with the composed map, as one tree
 * and one journaled run.  The owner's own ids map to themselves, so the
 * store's metadata (layers.json, images.json, containers.json, libpod's
 * database, tar-split files), which records container ids, not host
 * ids, is left as it is, as are its owners.
 *
 * A map given as one range from container id 0 (as --subid and
 * --from-subid give, and --from-subid-range) is the owner's
 * subordinate range and is read the way podman uses it:
 * 0 -> owner, 1.. -> the range.
 *
 * A rootful store holds container ids as they are, except in layers
 * made for a user namespace (a uidmap in layers.json), which this does
 * not migrate: it refuses and says which.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shiftimg-int.h"

static const char *const drivers[] = { "overlay", "vfs", "btrfs", "zfs", "aufs" };
#define NR_DRIVERS	(sizeof(drivers) / sizeof(drivers[0]))

static bool exists_at(int dfd, const char *name, mode_t type)
{
	struct stat st;

	return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	       (st.st_mode & S_IFMT) == type;
}

bool si_store_probe(const char *path)
{
	int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	bool yes = false;
	size_t i;

	if (dfd < 0)
		return false;
	if (exists_at(dfd, "storage.lock", S_IFREG))
		for (i = 0; !yes && i < NR_DRIVERS; i++) {
			char name[64];

			snprintf(name, sizeof(name), "%s-layers/layers.json", drivers[i]);
			yes = exists_at(dfd, name, S_IFREG);
		}
	close(dfd);
	return yes;
}

/* ---- is anything of it in use? ---- */

/*
 * containers/storage makes a driver's home (STORE/overlay) a private
 * mount of itself in the namespace it works in: that is not a use.
 */
static bool driver_home(const char *rest)
{
	size_t i;

	for (i = 0; i < NR_DRIVERS; i++)
		if (rest[0] == '/' && !strcmp(rest + 1, drivers[i]))
			return true;
	return false;
}

/* A mount on or below path in mountinfo f, other than a driver's home. */
static bool mount_below(FILE *f, const char *path, char *where, size_t size)
{
	char line[PATH_MAX * 2 + 256], mp[PATH_MAX];
	size_t n = strlen(path);

	while (fgets(line, sizeof(line), f)) {
		/* "id parent major:minor root mountpoint ..." */
		if (sscanf(line, "%*s %*s %*s %*s %4095s", mp) != 1)
			continue;
		if (!strncmp(mp, path, n) && (mp[n] == '\0' || mp[n] == '/') &&
		    !driver_home(mp + n)) {
			snprintf(where, size, "%s", mp);
			return true;
		}
	}
	return false;
}

/*
 * Rootless podman mounts layers in its own mount namespace (its pause
 * process's), not ours: every namespace on the host is looked in, once.
 */
static bool mounted_anywhere(const char *path, char *where, size_t size,
			     pid_t *pid)
{
	ino_t seen[256];
	size_t nseen = 0, i;
	struct dirent *de;
	bool found = false;
	DIR *d = opendir("/proc");

	if (!d)
		return false;
	while (!found && (de = readdir(d))) {
		char p[320];
		struct stat st;
		FILE *f;

		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		snprintf(p, sizeof(p), "/proc/%s/ns/mnt", de->d_name);
		if (stat(p, &st) < 0)
			continue;
		for (i = 0; i < nseen && seen[i] != st.st_ino; i++)
			;
		if (i < nseen)
			continue;
		if (nseen < sizeof(seen) / sizeof(seen[0]))
			seen[nseen++] = st.st_ino;
		snprintf(p, sizeof(p), "/proc/%s/mountinfo", de->d_name);
		f = fopen(p, "re");
		if (!f)
			continue;
		found = mount_below(f, path, where, size);
		if (found)
			*pid = (pid_t)atoi(de->d_name);
		fclose(f);
	}
	closedir(d);
	return found;
}

/*
 * containers/storage counts the mounts of its layers in
 * <driver>-layers/mountpoints.json under its run root (by default
 * /run/user/UID/containers, /run/containers/storage; older versions:
 * the store itself), naming each mounted layer's path: a file there
 * that names a path in the store is a use.
 */
static bool names_store(const char *file, const char *store)
{
	char want[PATH_MAX + 16], *buf;
	struct stat st;
	bool yes = false;
	int fd = open(file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0)
		return false;
	snprintf(want, sizeof(want), "\"path\":\"%s/", store);
	if (fstat(fd, &st) == 0 && st.st_size < (16 << 20) &&
	    (buf = malloc((size_t)st.st_size + 1))) {
		if (read(fd, buf, (size_t)st.st_size) == st.st_size) {
			buf[st.st_size] = '\0';
			yes = strstr(buf, want) != NULL;
		}
		free(buf);
	}
	close(fd);
	return yes;
}

static bool mountpoints_under(const char *dir, const char *store, int depth,
			      char *which, size_t size)
{
	struct dirent *de;
	bool found = false;
	DIR *d = opendir(dir);

	if (!d)
		return false;
	while (!found && (de = readdir(d))) {
		char path[PATH_MAX];
		size_t n = strlen(de->d_name);

		if (de->d_name[0] == '.' || de->d_type != DT_DIR ||
		    n < 8 || strcmp(de->d_name + n - 7, "-layers")) {
			if (depth > 0 && de->d_name[0] != '.' && de->d_type == DT_DIR) {
				snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
				found = mountpoints_under(path, store, depth - 1, which, size);
			}
			continue;
		}
		snprintf(path, sizeof(path), "%s/%s/mountpoints.json", dir, de->d_name);
		if (names_store(path, store)) {
			snprintf(which, size, "%s", path);
			found = true;
		}
	}
	closedir(d);
	return found;
}

static bool layers_mounted(const char *store, uid_t owner, char *which, size_t size)
{
	char run[64];

	snprintf(run, sizeof(run), "/run/user/%u", (unsigned int)owner);
	return mountpoints_under(store, store, 0, which, size) ||
	       mountpoints_under(owner ? run : "/run/containers", store, 2, which, size);
}

/* A layer made for a user namespace: layers.json records "uidmap". */
static bool mapped_layers(int dfd, char *which, size_t size)
{
	size_t i;

	for (i = 0; i < NR_DRIVERS; i++) {
		char name[64];
		struct stat st;
		char *buf;
		bool yes;
		int fd;

		snprintf(name, sizeof(name), "%s-layers/layers.json", drivers[i]);
		fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			continue;
		buf = fstat(fd, &st) == 0 && st.st_size < (64 << 20) ?
		      malloc((size_t)st.st_size + 1) : NULL;
		yes = buf && read(fd, buf, (size_t)st.st_size) == st.st_size &&
		      (buf[st.st_size] = '\0', strstr(buf, "\"uidmap\"") ||
					       strstr(buf, "\"gidmap\""));
		free(buf);
		close(fd);
		if (yes) {
			snprintf(which, size, "%s", name);
			return true;
		}
	}
	return false;
}

static int check_unused(struct shiftimg *h, const char *store, uid_t owner)
{
	char where[PATH_MAX];
	pid_t pid = 0;

	if (layers_mounted(store, owner, where, sizeof(where)))
		return si_error(h, EBUSY, "%s: layers are mounted (%s): stop its containers and unmount its images (podman unmount --all, podman image unmount --all)",
				store, where);
	if (mounted_anywhere(store, where, sizeof(where), &pid))
		return si_error(h, EBUSY, "%s: %s is mounted (in the mount namespace of pid %d): stop its containers and unmount its images (podman unmount --all, podman image unmount --all)",
				store, where, (int)pid);
	return 0;
}

/* ---- the maps of a rootless store ---- */

/*
 * One range from container id 0, as a user's subordinate range is
 * given: podman puts the owner at 0 and the range at 1 up.
 */
static int as_namespace(struct shiftimg *h, struct si_idmap *m, uint32_t owner)
{
	struct si_extent e = m->ext[0];
	char why[128];

	if (m->nr != 1 || e.first != 0 || e.target == owner)
		return 0;
	m->nr = 0;
	if (si_idmap_add(m, 0, owner, 1, why, sizeof(why)) < 0 ||
	    si_idmap_add(m, 1, e.target, e.count, why, sizeof(why)) < 0)
		return si_error(h, EINVAL, "the range %u:%u and the store's owner %u: %s",
				e.target, e.count, owner, why);
	return 0;
}

static int rootless_maps(struct shiftimg *h, const struct stat *st)
{
	uint32_t owner[2] = { st->st_uid, st->st_gid };
	int k, err = 0;

	for (k = 0; !err && k < 2; k++) {
		if (h->have[k])
			err = as_namespace(h, &h->given[k], owner[k]);
		if (!err && h->have_from[k])
			err = as_namespace(h, &h->from[k], owner[k]);
	}
	return err;
}

int si_store_run(struct shiftimg *h, const char *target)
{
	struct si_idmap *saved = malloc(4 * sizeof(*saved));
	char where[PATH_MAX], real[PATH_MAX];
	struct stat st;
	int dfd, err;

	if (!saved)
		return si_error(h, ENOMEM, "out of memory");
	memcpy(saved, h->given, 2 * sizeof(*saved));
	memcpy(saved + 2, h->from, 2 * sizeof(*saved));
	err = si_option(h, "output") ?
	      si_error(h, EINVAL, "%s: -o does not apply to a containers/storage store: it is migrated in place",
		       target) : 0;
	if (!err && stat(target, &st) < 0)
		err = si_error(h, errno, "%s: %s", target, strerror(errno));
	if (!err && st.st_uid == 0) {
		dfd = open(target, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd >= 0 && mapped_layers(dfd, where, sizeof(where)))
			err = si_error(h, ENOTSUP, "%s: a rootful store with layers made for a user namespace (%s records a uidmap): those are not migrated; remove them (podman rm, podman rmi) and let podman make them again",
				       target, where);
		if (dfd >= 0)
			close(dfd);
	}
	if (!err && st.st_uid == 0) {
		/* Its layers hold container ids: no range shows in them. */
		snprintf(h->notice, sizeof(h->notice),
			 "%.900s: a rootful store holds container ids, which no subordinate range changes: nothing to do",
			 target);
		goto out_restore;
	}
	if (!err)
		err = rootless_maps(h, &st);
	if (!err && !realpath(target, real))
		err = si_error(h, errno, "%s: %s", target, strerror(errno));
	if (!err)
		err = check_unused(h, real, st.st_uid);
	if (!err)
		err = si_run_path(h, target);
out_restore:
	/* The next target has its own owner. */
	memcpy(h->given, saved, 2 * sizeof(*saved));
	memcpy(h->from, saved + 2, 2 * sizeof(*saved));
	free(saved);
	return err;
}
