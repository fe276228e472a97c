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
 * A rootful store holds container ids as they are, except in what was
 * made for a user namespace (podman --uidmap): a mapped copy of an
 * image's top layer, a container's layer, a container's userdata,
 * which hold host ids of the map their record names.  Moving the store
 * from an old range to a new one (--from-map, --map) is then one tree
 * run over the store with the composed map, host ids outside the old
 * range kept, that does not walk the layers and containers without a
 * map; the records' maps move with it (src/storemap.c), written in the
 * journaled run as an LXC config is (src/lxc.c): X.shiftimg-new is
 * renamed over X after X.shiftimg-old is linked to it, and a re-run
 * reads the records from X.shiftimg-old while the journal is there.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "bolt.h"
#include "journal.h"
#include "shiftimg-int.h"
#include "storemap.h"

static const char *const drivers[] = { "overlay", "vfs", "btrfs", "zfs", "aufs" };
/* Where each driver keeps a layer's files (zfs: a dataset, not walked). */
static const char *const layer_dirs[] = {
	"overlay/", "vfs/dir/", "btrfs/subvolumes/", NULL, "aufs/diff/",
};
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
 * /run/user/UID/containers, /run/containers/storage, or the one
 * libpod's database names; older versions: the store itself), naming
 * each mounted layer's path: a file there that names a path in the
 * store is a use.  (podman mount of a vfs layer mounts nothing: only
 * this file shows it.)
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

static bool layers_mounted(const char *store, uid_t owner, const char *runroot,
			   char *which, size_t size)
{
	char run[64];

	snprintf(run, sizeof(run), "/run/user/%u", (unsigned int)owner);
	return mountpoints_under(store, store, 0, which, size) ||
	       mountpoints_under(owner ? run : "/run/containers", store, 2, which, size) ||
	       (runroot && runroot[0] && mountpoints_under(runroot, store, 0, which, size));
}

/* runroot: libpod's run root as its database names it, or NULL. */
static int check_unused(struct shiftimg *h, const char *store, uid_t owner,
			const char *runroot)
{
	char where[PATH_MAX];
	pid_t pid = 0;

	if (layers_mounted(store, owner, runroot, where, sizeof(where)))
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

/* ---- a rootful store's records of what was made for a user namespace ---- */

#define RECORDS_MAX	(256u << 20)
#define NR_RECORDS	(2 * NR_DRIVERS + 1)
#define LIBPOD_DB	"libpod/bolt_state.db"

/* A record file the run rewrites, and its companions. */
struct record {
	char path[PATH_MAX + 64], dir[PATH_MAX + 64];
	char old[PATH_MAX + 80], next_path[PATH_MAX + 80];
	int driver;		/* the driver of its layers or containers; -1: libpod */
	bool layers;		/* layers.json (else containers.json) */
	char *cur;		/* as it was before the run */
	size_t cur_len;
	char *next;		/* as it is to be; NULL: unchanged */
	size_t next_len;
	struct stat st;
	struct si_store_ids ids;	/* its layers or containers */
};

struct rootful {
	char store[PATH_MAX];
	struct record rec[NR_RECORDS];
	size_t nr;
	struct si_dirs skip;	/* layers and containers without a map */
	size_t skip_cap;
	unsigned int layers, containers, configs;	/* with a map */
	char runroot[PATH_MAX];	/* libpod's, where the mount counts are */
	int db_fd;		/* libpod's database, locked */
};

/* A record or one of its companions is there. */
static bool exists(const char *path)
{
	return exists_at(AT_FDCWD, path, S_IFREG);
}

static void add_record(struct rootful *rf, const char *rel, int driver, bool layers)
{
	struct record *r = &rf->rec[rf->nr];
	char path[sizeof(r->path)];

	snprintf(path, sizeof(path), "%s/%s", rf->store, rel);
	memcpy(r->path, path, sizeof(path));
	memcpy(r->dir, path, sizeof(path));
	*strrchr(r->dir, '/') = '\0';
	snprintf(r->old, sizeof(r->old), "%s.shiftimg-old", path);
	snprintf(r->next_path, sizeof(r->next_path), "%s.shiftimg-new", path);
	r->driver = driver;
	r->layers = layers;
	if (exists(r->path) || exists(r->old))
		rf->nr++;
}

/* The records there are (or whose old copy a run left). */
static void find_records(struct rootful *rf)
{
	char rel[64];
	size_t i;

	for (i = 0; i < NR_DRIVERS; i++) {
		snprintf(rel, sizeof(rel), "%s-layers/layers.json", drivers[i]);
		add_record(rf, rel, (int)i, true);
		snprintf(rel, sizeof(rel), "%s-containers/containers.json", drivers[i]);
		add_record(rf, rel, (int)i, false);
	}
	add_record(rf, LIBPOD_DB, -1, false);
}

static void free_records(struct rootful *rf)
{
	size_t i;

	for (i = 0; i < rf->nr; i++) {
		free(rf->rec[i].cur);
		free(rf->rec[i].next);
		si_store_ids_free(&rf->rec[i].ids);
	}
	free(rf->skip.id);
	if (rf->db_fd >= 0)
		close(rf->db_fd);
}

/* A record as it was before the run: its old copy while that is there. */
static int load_record(struct shiftimg *h, struct record *r)
{
	const char *from = exists(r->old) ? r->old : r->path;

	if (stat(from, &r->st) < 0)
		return si_error(h, errno, "%s: %s", from, strerror(errno));
	return si_file_read(h, from, RECORDS_MAX, &r->cur, &r->cur_len);
}

/* STORE/<where><id>, if a directory, is not walked. */
static int add_skip(struct shiftimg *h, struct rootful *rf, const char *where,
		    const char *id)
{
	char path[PATH_MAX + 2 * SI_STORE_ID_MAX];
	struct stat st;

	/* containers/storage's ids are hex; anything else names no layer. */
	if (strchr(id, '/') || id[0] == '.')
		return 0;
	snprintf(path, sizeof(path), "%s/%s%s", rf->store, where, id);
	if (lstat(path, &st) < 0 || !S_ISDIR(st.st_mode))
		return 0;	/* nothing of it on disk */
	if (rf->skip.nr == rf->skip_cap) {
		size_t cap = rf->skip_cap ? 2 * rf->skip_cap : 64;
		struct si_dir_id *p = realloc(rf->skip.id, cap * sizeof(*p));

		if (!p)
			return si_error(h, ENOMEM, "out of memory");
		rf->skip.id = p;
		rf->skip_cap = cap;
	}
	/* A btrfs subvolume has a device number of its own. */
	rf->skip.id[rf->skip.nr++] = (struct si_dir_id){
		((uint64_t)major(st.st_dev) << 32) | minor(st.st_dev), st.st_ino };
	return 0;
}

static int by_id(const void *a, const void *b)
{
	return si_dir_id_cmp(a, b);
}

/* layers.json or containers.json: its maps moved, its records listed. */
static int plan_json(struct shiftimg *h, struct rootful *rf, struct record *r,
		     const struct si_idmap f[2])
{
	unsigned int mapped = 0;
	char why[256];
	size_t i;

	if (si_storemap_records(r->cur, r->cur_len, f, &r->next, &r->next_len, &r->ids,
				why, sizeof(why)) < 0)
		return si_error(h, EINVAL, "%s: %s", r->path, why);
	for (i = 0; i < r->ids.nr; i++)
		mapped += r->ids.rec[i].mapped;
	*(r->layers ? &rf->layers : &rf->containers) += mapped;
	/* A zfs layer is a dataset, mounted only while in use: not walked. */
	if (r->layers && !layer_dirs[r->driver] && mapped)
		return si_error(h, ENOTSUP, "%s: layers made for a user namespace on the %s driver, whose layers are datasets this does not walk; nothing was changed",
				r->path, drivers[r->driver]);
	return 0;
}

/*
 * A container made for a user namespace writes host ids into its
 * layer even where the layer's record has no map (overlay with
 * idmapped lower layers): the layer of a mapped container is walked.
 */
static bool layer_of_mapped(const struct rootful *rf, int driver, const char *id)
{
	size_t i, j;

	for (i = 0; i < rf->nr; i++) {
		const struct record *c = &rf->rec[i];

		for (j = 0; c->driver == driver && !c->layers && j < c->ids.nr; j++)
			if (c->ids.rec[j].mapped && !strcmp(c->ids.rec[j].layer, id))
				return true;
	}
	return false;
}

/* The layers and containers without a map hold container ids: not walked. */
static int plan_skip(struct shiftimg *h, struct rootful *rf)
{
	size_t i, j;
	int err = 0;

	for (i = 0; !err && i < rf->nr; i++) {
		const struct record *r = &rf->rec[i];
		char where[64];

		if (r->driver < 0 || (r->layers && !layer_dirs[r->driver]))
			continue;
		snprintf(where, sizeof(where), "%s%s", r->layers ? layer_dirs[r->driver] :
			 drivers[r->driver], r->layers ? "" : "-containers/");
		for (j = 0; !err && j < r->ids.nr; j++)
			if (!r->ids.rec[j].mapped &&
			    !(r->layers && layer_of_mapped(rf, r->driver, r->ids.rec[j].id)))
				err = add_skip(h, rf, where, r->ids.rec[j].id);
	}
	if (!err)
		qsort(rf->skip.id, rf->skip.nr, sizeof(rf->skip.id[0]), by_id);
	return err;
}

static int plan_libpod(struct shiftimg *h, struct rootful *rf, struct record *r,
		       const struct si_idmap f[2])
{
	struct si_bolt db;
	char why[256];
	int err = 0;

	if (si_bolt_parse((const unsigned char *)r->cur, r->cur_len, &db, why, sizeof(why)) < 0)
		return si_error(h, EINVAL, "%s: %s", r->path, why);
	si_libpod_runroot(&db, rf->runroot, sizeof(rf->runroot));
	if (si_storemap_libpod(&db, f, &rf->configs, why, sizeof(why)) < 0)
		err = si_error(h, EINVAL, "%s: %s", r->path, why);
	else if (rf->configs &&
		 si_bolt_render(&db, (unsigned char **)&r->next, &r->next_len) < 0)
		err = si_error(h, ENOMEM, "out of memory");
	si_bolt_free(&db);
	return err;
}

/* Reads every record and works out what each becomes under f. */
static int plan_records(struct shiftimg *h, struct rootful *rf, const struct si_idmap f[2])
{
	size_t i;
	int err = 0;

	for (i = 0; !err && i < rf->nr; i++) {
		struct record *r = &rf->rec[i];

		err = load_record(h, r);
		if (!err)
			err = r->driver < 0 ? plan_libpod(h, rf, r, f) : plan_json(h, rf, r, f);
	}
	return err ? err : plan_skip(h, rf);
}

/*
 * The map the store's host ids go through: old host id -> container id
 * -> new host id, every other host id kept (root's own files), as the
 * run applies it (h->keep_outside).  With no from-map, the identity:
 * the records are only read.
 */
static int store_maps(struct shiftimg *h, struct si_idmap f[2])
{
	int k, err = 0;

	for (k = 0; !err && k < 2; k++) {
		f[k].nr = 1;
		f[k].ext[0] = (struct si_extent){ 0, 0, SI_ID_MAX + 1u };
		if (h->have[k] && h->have_from[k])
			err = si_disk_map(h, k, &f[k]);
	}
	return err;
}

/* bolt locks its file while a process has it open: podman is at work. */
static int lock_db(struct shiftimg *h, struct rootful *rf)
{
	char path[PATH_MAX + 32];

	snprintf(path, sizeof(path), "%s/%s", rf->store, LIBPOD_DB);
	rf->db_fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (rf->db_fd < 0)
		return errno == ENOENT ? 0 : si_error(h, errno, "%s: %s", path, strerror(errno));
	if (flock(rf->db_fd, LOCK_EX | LOCK_NB) < 0)
		return si_error(h, EBUSY, "%s: open in a podman process: wait for it to end", path);
	return 0;
}

/* ---- the records put in place ---- */

static int commit_record(struct shiftimg *h, struct record *r)
{
	int err = si_file_stage(h, r->path, r->next_path, r->old, r->dir, r->next,
				r->next_len, &r->st, RECORDS_MAX);

	if (err)
		return err < 0 ? err : 0;
	si_fault(SI_FAULT_WRITE);
	if (rename(r->next_path, r->path) < 0)
		return si_error(h, errno, "%s: %s", r->path, strerror(errno));
	return si_dir_sync(h, r->dir);
}

/* After the tree, before its journal goes (the handle's commit_fn). */
static int commit_records(struct shiftimg *h, void *arg)
{
	struct rootful *rf = arg;
	size_t i;
	int err = 0;

	for (i = 0; !err && i < rf->nr; i++)
		if (rf->rec[i].next)
			err = commit_record(h, &rf->rec[i]);
	return err;
}

/* The journal is gone: the old copies go too. */
static int finish_records(struct shiftimg *h, struct rootful *rf)
{
	size_t i;
	int err = 0;

	for (i = 0; !err && i < rf->nr; i++) {
		struct record *r = &rf->rec[i];

		if (!exists(r->old) && !exists(r->next_path))
			continue;
		si_fault(SI_FAULT_WRITE);
		if ((unlink(r->old) < 0 && errno != ENOENT) ||
		    (unlink(r->next_path) < 0 && errno != ENOENT))
			err = si_error(h, errno, "%s: %s", r->path, strerror(errno));
		else
			err = si_dir_sync(h, r->dir);
	}
	return err;
}

/* --rollback: every record as it was. */
static int restore_records(struct shiftimg *h, struct rootful *rf)
{
	size_t i;
	int err = 0;

	for (i = 0; !err && i < rf->nr; i++) {
		struct record *r = &rf->rec[i];

		if (exists(r->old))
			err = si_file_put_back(h, r->old, r->path);
		if (!err && unlink(r->next_path) < 0 && errno != ENOENT)
			err = si_error(h, errno, "%s: %s", r->next_path, strerror(errno));
		if (!err)
			err = si_dir_sync(h, r->dir);
	}
	return err;
}

static bool leftovers(const struct rootful *rf)
{
	size_t i;

	for (i = 0; i < rf->nr; i++)
		if (exists(rf->rec[i].old) || exists(rf->rec[i].next_path))
			return true;
	return false;
}

/* ---- the rootful run ---- */

static int refuse_rootful(struct shiftimg *h, const char *target, struct rootful *rf)
{
	char path[PATH_MAX + 32];
	int k;

	for (k = 0; k < 2; k++)
		if (h->have[k] && !h->have_from[k])
			return si_error(h, EINVAL, "%s: %u layers and %u containers of this rootful store were made for a user namespace and hold host ids of its range: give the map they were made with (--from-map, or --from-map-file) and the one they are to have (--map)",
					target, rf->layers, rf->containers);
	if (h->flags & SHIFTIMG_REVERSE)
		return si_error(h, EINVAL, "%s: --reverse does not apply to a store: give --from-map and --map",
				target);
	/* podman 4.5 on may keep its records in SQLite instead. */
	snprintf(path, sizeof(path), "%s/libpod/db.sql", rf->store);
	if (rf->containers && exists(path))
		return si_error(h, ENOTSUP, "%s: libpod's records are in an SQLite database (%s), whose maps are not rewritten; nothing was changed",
				target, path);
	if (!(h->flags & SHIFTIMG_STAMP))
		return si_error(h, EINVAL, "%s: a rootful store's migration is always stamped (--no-stamp)",
				target);
	return 0;
}

static void say_records(struct shiftimg *h, const struct rootful *rf)
{
	char what[128];
	size_t i;

	for (i = 0; h->list_fn && i < rf->nr; i++) {
		const struct record *r = &rf->rec[i];

		if (!r->next)
			continue;
		if (r->driver < 0)
			snprintf(what, sizeof(what), "id maps of %u container configs", rf->configs);
		else
			snprintf(what, sizeof(what), "uidmap/gidmap of %u %s", r->layers ?
				 rf->layers : rf->containers, r->layers ? "layers" : "containers");
		h->list_fn(h->list_arg, r->path, what);
	}
}

static int migrate_rootful(struct shiftimg *h, const char *target, struct rootful *rf)
{
	bool dry = h->flags & SHIFTIMG_DRY_RUN;
	int err;

	err = check_unused(h, rf->store, 0, rf->runroot);
	if (!err && !dry)
		err = lock_db(h, rf);
	if (err)
		return err;
	h->skip = &rf->skip;
	h->commit_fn = dry ? NULL : commit_records;
	h->commit_arg = rf;
	err = si_run_path(h, target);
	h->skip = NULL;
	h->commit_fn = NULL;
	/* No journal left: the records went in with the tree, or before. */
	if (!err && !dry)
		err = finish_records(h, rf);
	if (!err)
		say_records(h, rf);
	return err;
}

static int rootful_run(struct shiftimg *h, const char *target)
{
	struct rootful *rf = calloc(1, sizeof(*rf));
	struct si_idmap *f = malloc(2 * sizeof(*f));
	int err;

	if (!rf || !f) {
		free(rf);
		free(f);
		return si_error(h, ENOMEM, "out of memory");
	}
	rf->db_fd = -1;
	h->keep_outside = true;
	err = realpath(target, rf->store) ? 0 : si_error(h, errno, "%s: %s", target, strerror(errno));
	if (!err) {
		find_records(rf);
		err = store_maps(h, f);
	}
	if (!err)
		err = plan_records(h, rf, f);
	if (err)
		goto out_free;
	if (!rf->layers && !rf->containers && !leftovers(rf)) {
		/* Its layers hold container ids: no range shows in them. */
		snprintf(h->notice, sizeof(h->notice),
			 "%.900s: a rootful store with nothing made for a user namespace holds container ids, which no range changes: nothing to do",
			 target);
		goto out_free;
	}
	err = refuse_rootful(h, target, rf);
	if (!err)
		err = migrate_rootful(h, target, rf);
out_free:
	h->keep_outside = false;
	free_records(rf);
	free(rf);
	free(f);
	return err;
}

int si_store_run(struct shiftimg *h, const char *target)
{
	struct si_idmap *saved = malloc(4 * sizeof(*saved));
	char real[PATH_MAX];
	struct stat st;
	int err;

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
		err = rootful_run(h, target);
		goto out_restore;
	}
	if (!err)
		err = rootless_maps(h, &st);
	if (!err && !realpath(target, real))
		err = si_error(h, errno, "%s: %s", target, strerror(errno));
	if (!err)
		err = check_unused(h, real, st.st_uid, NULL);
	if (!err)
		err = si_run_path(h, target);
out_restore:
	/* The next target has its own owner. */
	memcpy(h->given, saved, 2 * sizeof(*saved));
	memcpy(h->from, saved + 2, 2 * sizeof(*saved));
	free(saved);
	return err;
}

/* ---- --status and --rollback ---- */

static int open_records(struct shiftimg *h, const char *target, struct rootful *rf)
{
	memset(rf, 0, sizeof(*rf));
	rf->db_fd = -1;
	if (!realpath(target, rf->store))
		return si_error(h, errno, "%s: %s", target, strerror(errno));
	find_records(rf);
	return 0;
}

int si_store_status(struct shiftimg *h, const char *target, FILE *out)
{
	struct rootful *rf = malloc(sizeof(*rf));
	size_t i;
	int err;

	if (!rf)
		return si_error(h, ENOMEM, "out of memory");
	err = open_records(h, target, rf);
	for (i = 0; !err && i < rf->nr; i++) {
		if (exists(rf->rec[i].next_path))
			fprintf(out, "record: a new %s was being written\n", rf->rec[i].path);
		if (exists(rf->rec[i].old))
			fprintf(out, "record: the new %s is in place; the old one is kept in %s\n",
				rf->rec[i].path, rf->rec[i].old);
	}
	if (!err)
		err = si_journal_status(h, target, out);
	if (err == -ENOENT && leftovers(rf)) {
		si_error_clear(h);
		fprintf(out, "store: no journal: the next run finishes the records\n");
		err = 0;
	}
	free_records(rf);
	free(rf);
	return err;
}

int si_store_rollback(struct shiftimg *h, const char *target)
{
	struct rootful *rf = malloc(sizeof(*rf));
	bool left;
	int err;

	if (!rf)
		return si_error(h, ENOMEM, "out of memory");
	err = open_records(h, target, rf);
	left = !err && leftovers(rf);
	if (!err)
		err = si_journal_rollback(h, target);
	if (err == -ENOENT && left) {
		/* No journal: the run had finished, records and all. */
		si_error_clear(h);
		err = finish_records(h, rf);
		if (!err)
			snprintf(h->notice, sizeof(h->notice),
				 "%.512s: the migration had finished; nothing to roll back",
				 rf->store);
	} else if (!err) {
		err = restore_records(h, rf);
	}
	free_records(rf);
	free(rf);
	return err;
}
