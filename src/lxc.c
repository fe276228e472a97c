// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * An LXC container as a target: a directory holding an LXC "config".
 *
 * Its current map is its lxc.idmap lines (none: a privileged container,
 * whose ids on disk are the container's own), its rootfs is
 * lxc.rootfs.path (a tree, or with "loop:" an ext4 image).  A run shifts
 * the rootfs from the current map to the map given, through the tree or
 * ext4 backend and its journal, and rewrites the lxc.idmap lines.
 *
 * The config change rides on the rootfs's journal: once the rootfs is
 * shifted, and before its journal goes, the new config is written as
 * config.shiftimg-new, the old one kept as config.shiftimg-old (a hard
 * link), the container directory given to the new root, and
 * config.shiftimg-new renamed over config; config.shiftimg-old goes
 * once the journal has.  So at any crash:
 *   - the rootfs journal is there: config.shiftimg-old (if there) or
 *     config holds the old map; a re-run composes the same map, so the
 *     journal resumes and the config is committed again, and --rollback
 *     undoes the rootfs and puts config.shiftimg-old back;
 *   - it is not, and config.shiftimg-old is: the run finished; a re-run
 *     or --rollback only removes it.
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

#include "journal.h"
#include "lxcconf.h"
#include "shiftimg-int.h"

#define CONFIG_MAX	(1 << 20)
#define INCLUDE_DEPTH	4

struct lxc {
	char dir[PATH_MAX];		/* the container directory, resolved */
	char config[PATH_MAX + 16];	/* dir/config and its companions */
	char conf_new[PATH_MAX + 32];
	char conf_old[PATH_MAX + 32];
	char *cur;			/* the config with the current map */
	size_t cur_len;
	struct si_lxc_conf conf;
	char rootfs[PATH_MAX];
	char *next;			/* the config to be */
	size_t next_len;
	unsigned int kinds;		/* the id kinds the run changes */
	struct stat dir_st, conf_st;
};

bool si_lxc_probe(const char *path)
{
	char cfg[PATH_MAX + 16], *buf;
	struct stat st;
	bool yes = false;
	size_t len;
	int fd;

	if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode))
		return false;
	snprintf(cfg, sizeof(cfg), "%s/config", path);
	fd = open(cfg, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return false;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= CONFIG_MAX) {
		buf = malloc((size_t)st.st_size + 1);
		len = buf ? (size_t)pread(fd, buf, (size_t)st.st_size, 0) : 0;
		if (buf && len == (size_t)st.st_size) {
			buf[len] = '\0';
			yes = strstr(buf, "lxc.rootfs.path") != NULL;
		}
		free(buf);
	}
	close(fd);
	return yes;
}

/* ---- reading the container ---- */

static int check_included(struct shiftimg *h, struct lxc *c, const char *path,
			  int depth);

static int check_include_file(struct shiftimg *h, struct lxc *c,
			      const char *path, int depth)
{
	struct si_lxc_conf inc;
	char msg[512], *buf;
	size_t len;
	int err;

	err = si_file_read(h, path, CONFIG_MAX, &buf, &len);
	if (err)
		return err;
	err = si_lxc_conf_parse(buf, len, &inc, msg, sizeof(msg));
	if (err) {
		err = si_error(h, EINVAL, "%s (included by %s): %s", path, c->config, msg);
	} else if (inc.idmap_lines) {
		err = si_error(h, EINVAL,
			       "%s: the container's lxc.idmap comes from %s (lxc.include): move it into the config, or change that file by hand",
			       c->dir, path);
	} else if (inc.rootfs_kind != SI_LXC_ROOTFS_NONE) {
		err = si_error(h, EINVAL,
			       "%s: the container's lxc.rootfs.path comes from %s (lxc.include): move it into the config",
			       c->dir, path);
	} else {
		unsigned int i;

		c->conf.mount_entries += inc.mount_entries;
		for (i = 0; !err && i < inc.nr_include; i++) {
			char sub[PATH_MAX];

			snprintf(sub, sizeof(sub), "%.*s", (int)inc.include[i].len,
				 buf + inc.include[i].off);
			err = check_included(h, c, sub, depth + 1);
		}
	}
	free(buf);
	return err;
}

/* An lxc.include names a file, or a directory whose *.conf files count. */
static int check_included(struct shiftimg *h, struct lxc *c, const char *path,
			  int depth)
{
	struct dirent *de;
	struct stat st;
	DIR *d;
	int err = 0;

	if (depth > INCLUDE_DEPTH)
		return si_error(h, ELOOP, "%s: lxc.include nested deeper than %d", path,
				INCLUDE_DEPTH);
	if (stat(path, &st) < 0)
		return errno == ENOENT ? 0 : si_error(h, errno, "%s: %s", path, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return check_include_file(h, c, path, depth);
	d = opendir(path);
	if (!d)
		return si_error(h, errno, "%s: %s", path, strerror(errno));
	while (!err && (de = readdir(d))) {
		size_t n = strlen(de->d_name);
		char sub[PATH_MAX];

		if (n < 6 || strcmp(de->d_name + n - 5, ".conf"))
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
		err = check_include_file(h, c, sub, depth);
	}
	closedir(d);
	return err;
}

static int read_config(struct shiftimg *h, struct lxc *c)
{
	struct si_lxc_conf *f = &c->conf;
	const char *which = c->config;
	char msg[512];
	unsigned int i;
	int err;

	/* A committed, unfinished migration: its old map is the current one. */
	if (access(c->conf_old, F_OK) == 0)
		which = c->conf_old;
	err = si_file_read(h, which, CONFIG_MAX, &c->cur, &c->cur_len);
	if (err)
		return err;
	if (stat(c->config, &c->conf_st) < 0)
		return si_error(h, errno, "%s: %s", c->config, strerror(errno));
	/*
	 * lxc.rootfs.path may name any tree, and the run changes what it
	 * names: only a config its runner (or root) alone can write says
	 * where that is.
	 */
	if ((c->conf_st.st_uid != 0 && c->conf_st.st_uid != geteuid()) ||
	    (c->conf_st.st_mode & 022))
		return si_error(h, EPERM, "%s: belongs to uid %u, mode %04o: a config another user can write could point lxc.rootfs.path anywhere; check it, and shift the rootfs as its own target",
				c->config, (unsigned int)c->conf_st.st_uid,
				(unsigned int)(c->conf_st.st_mode & 07777));
	err = si_lxc_conf_parse(c->cur, c->cur_len, f, msg, sizeof(msg));
	if (err)
		return si_error(h, EINVAL, "%s: %s", which, msg);
	for (i = 0; !err && i < f->nr_include; i++) {
		char inc[PATH_MAX];

		snprintf(inc, sizeof(inc), "%.*s", (int)f->include[i].len,
			 c->cur + f->include[i].off);
		err = check_included(h, c, inc, 1);
	}
	return err;
}

static int find_rootfs(struct shiftimg *h, struct lxc *c)
{
	const struct si_lxc_conf *f = &c->conf;

	switch (f->rootfs_kind) {
	case SI_LXC_ROOTFS_NONE:
		return si_error(h, EINVAL, "%s: the config names no rootfs (lxc.rootfs.path)",
				c->config);
	case SI_LXC_ROOTFS_OTHER:
		return si_error(h, EINVAL,
				"%s: a '%.*s' rootfs: only dir: and loop: rootfs are shifted; shift its storage as a tree or image and change lxc.idmap by hand",
				c->config, (int)f->rootfs_type.len,
				c->cur + f->rootfs_type.off);
	default:
		break;
	}
	if (f->rootfs.len >= sizeof(c->rootfs) || !f->rootfs.len ||
	    c->cur[f->rootfs.off] != '/')
		return si_error(h, EINVAL, "%s: lxc.rootfs.path '%.*s': not an absolute path",
				c->config, (int)f->rootfs.len, c->cur + f->rootfs.off);
	snprintf(c->rootfs, sizeof(c->rootfs), "%.*s", (int)f->rootfs.len,
		 c->cur + f->rootfs.off);
	return 0;
}

/* ---- is it running? ---- */

/* LXC's command socket: "@LXCPATH/NAME/command" in /proc/net/unix. */
static bool command_socket(const char *dir)
{
	char want[PATH_MAX + 16], line[PATH_MAX + 128];
	bool found = false;
	FILE *f = fopen("/proc/net/unix", "re");

	if (!f)
		return false;
	snprintf(want, sizeof(want), " @%s/command\n", dir);
	while (!found && fgets(line, sizeof(line), f)) {
		size_t n = strlen(line), w = strlen(want);

		found = n >= w && !strcmp(line + n - w, want);
	}
	fclose(f);
	return found;
}

/* Anything mounted on or below path in our mount namespace. */
static bool mounted_below(const char *path, char *where, size_t size)
{
	char line[PATH_MAX * 2 + 256], mp[PATH_MAX];
	size_t n = strlen(path);
	bool found = false;
	FILE *f = fopen("/proc/self/mountinfo", "re");

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		/* "id parent major:minor root mountpoint ..." */
		if (sscanf(line, "%*s %*s %*s %*s %4095s", mp) != 1)
			continue;
		if (!strncmp(mp, path, n) && (mp[n] == '\0' || mp[n] == '/')) {
			snprintf(where, size, "%s", mp);
			found = true;
		}
	}
	fclose(f);
	return found;
}

/* A loop device backed by the image. */
static bool loop_attached(const char *image, char *dev, size_t size)
{
	char path[PATH_MAX], back[PATH_MAX];
	struct dirent *de;
	bool found = false;
	DIR *d = opendir("/sys/block");

	if (!d)
		return false;
	while (!found && (de = readdir(d))) {
		FILE *f;

		if (strncmp(de->d_name, "loop", 4))
			continue;
		snprintf(path, sizeof(path), "/sys/block/%s/loop/backing_file", de->d_name);
		f = fopen(path, "re");
		if (!f)
			continue;
		if (fgets(back, sizeof(back), f)) {
			back[strcspn(back, "\n")] = '\0';
			if (!strcmp(back, image)) {
				snprintf(dev, size, "/dev/%s", de->d_name);
				found = true;
			}
		}
		fclose(f);
	}
	closedir(d);
	return found;
}

static int check_stopped(struct shiftimg *h, struct lxc *c)
{
	char real[PATH_MAX], where[PATH_MAX];

	if (command_socket(c->dir))
		return si_error(h, EBUSY, "%s: the container is running (its command socket is open): stop it first (lxc-stop)",
				c->dir);
	if (!realpath(c->rootfs, real))
		return si_error(h, errno, "%s: %s", c->rootfs, strerror(errno));
	if (c->conf.rootfs_kind == SI_LXC_ROOTFS_LOOP &&
	    loop_attached(real, where, sizeof(where)))
		return si_error(h, EBUSY, "%s: the rootfs image %s is attached to %s: the container is running, or detach it (losetup -d)",
				c->dir, real, where);
	if (mounted_below(real, where, sizeof(where)))
		return si_error(h, EBUSY, "%s: %s is mounted in the rootfs: the container is running, or unmount it",
				c->dir, where);
	return 0;
}

/* ---- the new config ---- */

/* container id 0 under a map: the container's root on the host */
static uint32_t root_of(const struct si_idmap *m, bool have)
{
	uint32_t r = 0;

	if (have && !si_idmap_lookup(m, 0, &r))
		r = (uint32_t)-1;
	return r;
}

/* lxc-create gives an unprivileged container's directory to its root. */
static int chown_dir(struct shiftimg *h, struct lxc *c, const struct si_idmap to[2],
		     const bool have_to[2], const struct si_idmap from[2],
		     const bool have_from[2])
{
	uid_t u = c->dir_st.st_uid;
	gid_t g = c->dir_st.st_gid;

	if ((c->kinds & SHIFTIMG_UID) && u == root_of(&from[0], have_from[0]))
		u = root_of(&to[0], have_to[0]);
	if ((c->kinds & SHIFTIMG_GID) && g == root_of(&from[1], have_from[1]))
		g = root_of(&to[1], have_to[1]);
	if (u == c->dir_st.st_uid && g == c->dir_st.st_gid)
		return 0;
	si_fault(SI_FAULT_WRITE);
	if (lchown(c->dir, u, g) < 0)
		return si_error(h, errno, "%s: chown: %s", c->dir, strerror(errno));
	return 0;
}

/*
 * Puts the new config in place: after the rootfs, before its journal
 * goes, so that a crash in here is finished or undone from the journal.
 */
static int commit_config(struct shiftimg *h, void *arg)
{
	struct lxc *c = arg;
	int err;

	err = si_file_stage(h, c->config, c->conf_new, c->conf_old, c->dir, c->next,
			    c->next_len, &c->conf_st, CONFIG_MAX);
	if (err)
		return err < 0 ? err : 0;
	err = chown_dir(h, c, h->given, h->have, c->conf.map, c->conf.have_map);
	if (!err)
		si_fault(SI_FAULT_WRITE);
	if (!err && rename(c->conf_new, c->config) < 0)
		err = si_error(h, errno, "%s: %s", c->config, strerror(errno));
	return err ? err : si_dir_sync(h, c->dir);
}

static int finish(struct shiftimg *h, struct lxc *c)
{
	if (access(c->conf_old, F_OK) < 0)
		return 0;
	si_fault(SI_FAULT_WRITE);
	if (unlink(c->conf_old) < 0 && errno != ENOENT)
		return si_error(h, errno, "%s: %s", c->conf_old, strerror(errno));
	return si_dir_sync(h, c->dir);
}

/* ---- the run ---- */

static int open_container(struct shiftimg *h, const char *target, struct lxc *c)
{
	int err;

	if (!realpath(target, c->dir))
		return si_error(h, errno, "%s: %s", target, strerror(errno));
	if (stat(c->dir, &c->dir_st) < 0)
		return si_error(h, errno, "%s: %s", c->dir, strerror(errno));
	snprintf(c->config, sizeof(c->config), "%s/config", c->dir);
	snprintf(c->conf_new, sizeof(c->conf_new), "%s/config.shiftimg-new", c->dir);
	snprintf(c->conf_old, sizeof(c->conf_old), "%s/config.shiftimg-old", c->dir);
	err = read_config(h, c);
	if (!err)
		err = find_rootfs(h, c);
	return err;
}

static void close_container(struct lxc *c)
{
	free(c->cur);
	free(c->next);
}

static int refuse_options(struct shiftimg *h, const char *target)
{
	if (h->have_from[0] || h->have_from[1])
		return si_error(h, EINVAL, "%s: an LXC container's current map is read from its config (lxc.idmap): give only the map it must have",
				target);
	if (h->flags & SHIFTIMG_REVERSE)
		return si_error(h, EINVAL, "%s: --reverse does not apply to an LXC container: give the map it must have with --map",
				target);
	if (!(h->flags & SHIFTIMG_STAMP))
		return si_error(h, EINVAL, "%s: an LXC container's rootfs is always stamped (--no-stamp)",
				target);
	if (si_option(h, "output"))
		return si_error(h, EINVAL, "%s: -o does not apply to an LXC container: it is migrated in place",
				target);
	return 0;
}

static void say_what(struct shiftimg *h, struct lxc *c)
{
	char what[256];
	size_t n = 0;
	unsigned int k, i;

	for (k = 0; k < 2; k++)
		for (i = 0; (c->kinds & (1u << k)) && i < h->given[k].nr; i++)
			n += (size_t)snprintf(what + n, n < sizeof(what) ? sizeof(what) - n : 0,
					      "%s%c %u %u %u", n ? ", " : "lxc.idmap: ",
					      k ? 'g' : 'u', h->given[k].ext[i].first,
					      h->given[k].ext[i].target, h->given[k].ext[i].count);
	if (h->list_fn)
		h->list_fn(h->list_arg, c->config, what);
	n = strlen(h->notice);
	if (c->conf.mount_entries)
		snprintf(h->notice + n, sizeof(h->notice) - n,
			 "%s%s: %u lxc.mount.entry lines: what they mount into the rootfs is not shifted",
			 n ? "; " : "", c->dir, c->conf.mount_entries);
}

static int migrate(struct shiftimg *h, struct lxc *c)
{
	bool dry = h->flags & SHIFTIMG_DRY_RUN;
	int k, err;

	for (k = 0; k < 2; k++) {
		if (!h->have[k])
			continue;
		c->kinds |= 1u << k;
		/* A privileged container's ids on disk are the container's. */
		h->have_from[k] = c->conf.have_map[k];
		h->from[k] = c->conf.map[k];
	}
	c->next = si_lxc_conf_render(c->cur, c->cur_len, h->given, c->kinds,
				     &c->next_len);
	if (!c->next)
		return si_error(h, ENOMEM, "out of memory");
	err = check_stopped(h, c);
	if (err)
		return err;
	h->commit_fn = dry ? NULL : commit_config;
	h->commit_arg = c;
	err = si_run_path(h, c->rootfs);
	h->commit_fn = NULL;
	/* Also when the rootfs had been shifted already (its stamp). */
	if (!err && !dry)
		err = commit_config(h, c);
	if (!err && !dry)
		err = finish(h, c);
	if (!err)
		say_what(h, c);
	return err;
}

int si_lxc_run(struct shiftimg *h, const char *target)
{
	struct si_idmap *saved = malloc(2 * sizeof(*saved));
	bool have_from[2] = { h->have_from[0], h->have_from[1] };
	struct lxc c = { 0 };
	int err;

	if (!saved)
		return si_error(h, ENOMEM, "out of memory");
	memcpy(saved, h->from, 2 * sizeof(*saved));
	err = refuse_options(h, target);
	if (!err)
		err = open_container(h, target, &c);
	if (!err)
		err = migrate(h, &c);
	/* The next target of the run has its own current map. */
	memcpy(h->from, saved, 2 * sizeof(*saved));
	h->have_from[0] = have_from[0];
	h->have_from[1] = have_from[1];
	close_container(&c);
	free(saved);
	return err;
}

/* ---- --status and --rollback ---- */

int si_lxc_status(struct shiftimg *h, const char *target, FILE *out)
{
	struct lxc c = { 0 };
	int err = open_container(h, target, &c);

	if (err)
		goto out_close;
	fprintf(out, "container: %s\nrootfs: %s\n", c.dir, c.rootfs);
	if (access(c.conf_new, F_OK) == 0)
		fprintf(out, "config: a new config was being written (%s)\n", c.conf_new);
	if (access(c.conf_old, F_OK) == 0)
		fprintf(out, "config: the new config is in place; the old one is kept in %s\n",
			c.conf_old);
	err = si_journal_status(h, c.rootfs, out);
	if (err == -ENOENT && (!access(c.conf_new, F_OK) || !access(c.conf_old, F_OK))) {
		si_error_clear(h);
		fprintf(out, "rootfs: no journal: the next run finishes the config\n");
		err = 0;
	}
out_close:
	close_container(&c);
	return err;
}

static int restore_config(struct shiftimg *h, struct lxc *c)
{
	int err = 0;

	if (access(c->conf_old, F_OK) == 0) {
		/* The directory went to the new root with the new config. */
		struct si_lxc_conf now;
		char *buf, msg[256];
		size_t len;

		err = si_file_read(h, c->config, CONFIG_MAX, &buf, &len);
		if (err)
			return err;
		if (si_lxc_conf_parse(buf, len, &now, msg, sizeof(msg)) == 0) {
			c->kinds = SHIFTIMG_UID | SHIFTIMG_GID;
			err = chown_dir(h, c, c->conf.map, c->conf.have_map, now.map,
					now.have_map);
		}
		free(buf);
		if (!err)
			err = si_file_put_back(h, c->conf_old, c->config);
	}
	if (!err && unlink(c->conf_new) < 0 && errno != ENOENT)
		err = si_error(h, errno, "%s: %s", c->conf_new, strerror(errno));
	return err ? err : si_dir_sync(h, c->dir);
}

int si_lxc_rollback(struct shiftimg *h, const char *target)
{
	struct lxc c = { 0 };
	bool has_new, has_old;
	int err = open_container(h, target, &c);

	if (err)
		goto out_close;
	has_new = access(c.conf_new, F_OK) == 0;
	has_old = access(c.conf_old, F_OK) == 0;
	err = si_journal_rollback(h, c.rootfs);
	if (err == -ENOENT && (has_new || has_old)) {
		/* No journal: the rootfs was not touched, or the run finished. */
		si_error_clear(h);
		err = has_new ? restore_config(h, &c) : finish(h, &c);
		if (!err)
			snprintf(h->notice, sizeof(h->notice), "%.512s: %s", c.dir,
				 has_new ? "no interrupted run; a leftover config.shiftimg-new was removed" :
				 "the migration had finished; nothing to roll back");
		goto out_close;
	}
	if (!err)
		err = restore_config(h, &c);
out_close:
	close_container(&c);
	return err;
}
