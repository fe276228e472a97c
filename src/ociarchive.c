// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * An OCI archive (skopeo's oci-archive:, the layout as a plain tar) as a
 * target: unpacked into a temporary directory beside the output, the
 * layout shifted there as any layout (src/oci.c), and packed again into
 * a temporary file that is synced and renamed over the output (the
 * archive itself, or -o's).  A crash leaves the archive as it was and a
 * temporary directory named .shiftimg-oci-*.
 *
 * The archive is recognised from its first entry (a layout's file or
 * blobs/) and its being a plain tar: a layer tarball is never taken
 * for one, and probing it reads one header.
 *
 * The OCI form of a `docker save` archive is such a layout with a
 * manifest.json and a repositories file beside it, which name blobs by
 * their digests: those names are replaced with the new ones.  The
 * classic form, which is no layout, goes to src/dockerarchive.c.
 */
#include <archive.h>
#include <archive_entry.h>
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
#include "ocijson.h"
#include "shiftimg-int.h"
#include "tarlibs.h"

#define COPY_BUF	SI_ARCHIVE_BUF

/* A layout's name inside the archive, without "./"; NULL if it is none. */
static const char *layout_name(const char *p)
{
	while (p[0] == '.' && p[1] == '/')
		p += 2;
	if (!strcmp(p, "oci-layout") || !strcmp(p, "index.json") ||
	    !strcmp(p, "manifest.json") || !strcmp(p, "repositories") ||
	    !strcmp(p, "blobs") || !strcmp(p, "blobs/") || !strcmp(p, "blobs/sha256") ||
	    !strcmp(p, "blobs/sha256/") ||
	    (!strncmp(p, "blobs/sha256/", 13) && strlen(p) == 13 + 64 &&
	     !strchr(p + 13, '/') && p[13] != '.'))
		return p;
	return NULL;
}

/*
 * The classic `docker save` form: <id>/layer.tar, <id>.json,
 * <digest>.tar (skopeo), manifest.json and repositories at the top.
 */
static bool classic_docker_name(const char *p)
{
	size_t i;

	while (p[0] == '.' && p[1] == '/')
		p += 2;
	if (!strcmp(p, "manifest.json") || !strcmp(p, "repositories"))
		return true;
	for (i = 0; i < 64; i++)
		if (!p[i] || !strchr("0123456789abcdef", p[i]))
			return false;
	return !p[64] || p[64] == '/' || !strcmp(p + 64, ".tar") ||
	       !strcmp(p + 64, ".json");
}

/* The first header's name, if the file is a plain (ustar) tar. */
static bool first_name(const char *path, char name[100])
{
	char block[512];
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	bool yes = false;

	if (fd < 0)
		return false;
	/* A ustar header: its name, then "ustar" at 257. */
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	    read(fd, block, sizeof(block)) == (ssize_t)sizeof(block) &&
	    !memcmp(block + 257, "ustar", 5)) {
		memcpy(name, block, 99);
		name[99] = '\0';
		yes = true;
	}
	close(fd);
	return yes;
}

bool si_oci_archive_probe(const char *path)
{
	char name[100];

	/* A classic docker archive too: shifted as a tarball, it would come out wrong. */
	return first_name(path, name) &&
	       (layout_name(name) || classic_docker_name(name));
}

int si_archive_tmpdir(struct shiftimg *h, const char *out, char *dir, size_t size)
{
	const char *slash = strrchr(out, '/');

	if ((size_t)snprintf(dir, size, "%.*s.shiftimg-oci-XXXXXX",
			     slash ? (int)(slash - out + 1) : 0, out) >= size)
		return si_error(h, ENAMETOOLONG, "%s: name too long", out);
	if (!mkdtemp(dir))
		return si_error(h, errno, "%s: %s", dir, strerror(errno));
	return 0;
}

static void remove_dir(const char *dir)
{
	char p[PATH_MAX + 300];
	struct dirent *de;
	DIR *d;

	snprintf(p, sizeof(p), "%s/blobs/sha256", dir);
	d = opendir(p);
	while (d && (de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
		    (snprintf(p, sizeof(p), "%s/blobs/sha256/%s", dir, de->d_name), 1))
			unlink(p);
	if (d)
		closedir(d);
	d = opendir(dir);
	while (d && (de = readdir(d)))
		if (de->d_type != DT_DIR &&
		    (snprintf(p, sizeof(p), "%s/%s", dir, de->d_name), 1))
			unlink(p);
	if (d)
		closedir(d);
	snprintf(p, sizeof(p), "%s/blobs/sha256", dir);
	rmdir(p);
	snprintf(p, sizeof(p), "%s/blobs", dir);
	rmdir(p);
	rmdir(dir);
}

int si_archive_extract(struct shiftimg *h, struct archive *a, const char *target,
		       const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644), err = 0;

	if (fd < 0)
		return si_error(h, errno, "%s: %s", path, strerror(errno));
	if (archive_read_data_into_fd(a, fd) != ARCHIVE_OK)
		err = si_error(h, EIO, "%s: %s", target, archive_error_string(a));
	close(fd);
	return err;
}

int si_archive_each(struct shiftimg *h, const char *target, si_archive_entry_fn *fn,
		    void *arg)
{
	struct archive *a = archive_read_new();
	struct archive_entry *e;
	int fd, r = ARCHIVE_OK, err = 0;

	if (!a)
		return si_error(h, ENOMEM, "out of memory");
	fd = open(target, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = si_error(h, errno, "%s: %s", target, strerror(errno));
		goto out_free;
	}
	archive_read_support_format_tar(a);
	if (archive_read_open_fd(a, fd, COPY_BUF) != ARCHIVE_OK) {
		err = si_error(h, EINVAL, "%s: %s", target, archive_error_string(a));
		goto out_close;
	}
	while (!err && (r = archive_read_next_header(a, &e)) == ARCHIVE_OK)
		err = fn(h, a, e, arg);
	if (!err && r != ARCHIVE_EOF)
		err = si_error(h, EINVAL, "%s: %s", target, archive_error_string(a));
out_close:
	close(fd);
out_free:
	archive_read_free(a);
	return err;
}

struct unpacking {
	const char *target, *dir;
};

/* One entry: a layout's directory or file; anything else is refused. */
static int unpack_entry(struct shiftimg *h, struct archive *a,
			struct archive_entry *e, void *arg)
{
	const struct unpacking *u = arg;
	const char *name = layout_name(archive_entry_pathname(e));
	char p[PATH_MAX + 300];

	if (!name)
		return si_error(h, EINVAL, "%s: '%s' is not a file of an OCI layout",
				u->target, archive_entry_pathname(e));
	snprintf(p, sizeof(p), "%s/%s", u->dir, name);
	if (archive_entry_filetype(e) == AE_IFDIR)
		return mkdir(p, 0755) < 0 && errno != EEXIST ?
		       si_error(h, errno, "%s: %s", p, strerror(errno)) : 0;
	if (archive_entry_filetype(e) != AE_IFREG)
		return si_error(h, EINVAL, "%s: '%s' is not a regular file", u->target, name);
	if (!strncmp(name, "blobs/", 6)) {
		char b[PATH_MAX + 300];

		snprintf(b, sizeof(b), "%s/blobs", u->dir);
		mkdir(b, 0755);
		snprintf(b, sizeof(b), "%s/blobs/sha256", u->dir);
		mkdir(b, 0755);
	}
	return si_archive_extract(h, a, u->target, p);
}

static int unpack(struct shiftimg *h, const char *target, const char *dir)
{
	struct unpacking u = { .target = target, .dir = dir };

	return si_archive_each(h, target, unpack_entry, &u);
}

static int add_file(struct shiftimg *h, struct archive *a, const char *dir,
		    const char *name, char *buf)
{
	struct archive_entry *e = archive_entry_new();
	char p[PATH_MAX + 300];
	struct stat st;
	ssize_t n;
	int fd, err = 0;

	if (!e)
		return si_error(h, ENOMEM, "out of memory");
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		err = si_error(h, errno, "%s: %s", p, strerror(errno));
		goto out_free;
	}
	archive_entry_set_pathname(e, name);
	/* Fixed times and modes: the archive depends only on the layout. */
	archive_entry_set_filetype(e, S_ISDIR(st.st_mode) ? AE_IFDIR : AE_IFREG);
	archive_entry_set_perm(e, S_ISDIR(st.st_mode) ? 0755 : 0644);
	archive_entry_set_mtime(e, 0, 0);
	archive_entry_set_size(e, S_ISDIR(st.st_mode) ? 0 : st.st_size);
	if (archive_write_header(a, e) != ARCHIVE_OK) {
		err = si_error(h, EIO, "%s: %s", name, archive_error_string(a));
		goto out_free;
	}
	while (!S_ISDIR(st.st_mode) && (n = read(fd, buf, COPY_BUF)) > 0)
		if (archive_write_data(a, buf, (size_t)n) != n) {
			err = si_error(h, EIO, "%s: %s", name, archive_error_string(a));
			break;
		}
out_free:
	if (fd >= 0)
		close(fd);
	archive_entry_free(e);
	return err;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The layout's files as skopeo orders them: the blobs by name. */
static int add_blobs(struct shiftimg *h, struct archive *a, const char *dir,
		     char *buf)
{
	char p[PATH_MAX + 300], **names = NULL, **nn;
	size_t nr = 0, i;
	struct dirent *de;
	int err = 0;
	DIR *d;

	snprintf(p, sizeof(p), "%s/blobs/sha256", dir);
	d = opendir(p);
	if (!d)
		return si_error(h, errno, "%s: %s", p, strerror(errno));
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		nn = realloc(names, (nr + 1) * sizeof(*names));
		if (!nn || !(nn[nr] = malloc(strlen(de->d_name) + 14))) {
			names = nn ? nn : names;
			err = si_error(h, ENOMEM, "out of memory");
			break;
		}
		names = nn;
		sprintf(names[nr++], "blobs/sha256/%s", de->d_name);
	}
	closedir(d);
	if (!err)
		qsort(names, nr, sizeof(*names), name_cmp);
	for (i = 0; i < nr; i++) {
		if (!err)
			err = add_file(h, a, dir, names[i], buf);
		free(names[i]);
	}
	free(names);
	return err;
}

static bool docker_file(const char *dir, const char *name)
{
	char p[PATH_MAX + 32];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return access(p, F_OK) == 0;
}

/* Every string of a JSON value that holds a replaced digest's hex. */
static int renamed_in(const char *b, struct si_json_span v,
		      const struct si_oci_renamed *r, struct si_json_edits *ed)
{
	struct si_json_span k, x;
	size_t iter = 0, i;
	int err = 0;

	if (si_json_is(b, v, '{')) {
		while (!err && si_json_next_member(b, v, &iter, &k, &x) > 0)
			err = renamed_in(b, x, r, ed);
		return err;
	}
	if (si_json_is(b, v, '[')) {
		while (!err && si_json_elem(b, v, &iter, &x) > 0)
			err = renamed_in(b, x, r, ed);
		return err;
	}
	if (!si_json_is(b, v, '"') || v.len < 66)
		return 0;
	for (i = 0; i < r->nr; i++) {
		const char *old = r->pair[i][0] + 7, *hit;
		char *text;

		hit = memmem(b + v.off, v.len, old, 64);
		if (!hit)
			continue;
		text = strndup(b + v.off, v.len);
		if (!text)
			return -1;
		memcpy(text + (hit - (b + v.off)), r->pair[i][1] + 7, 64);
		err = si_json_edit_add(ed, v.off, v.len, text);
		free(text);
		return err;
	}
	return 0;
}

/* manifest.json and repositories of a docker archive: the new names. */
static int rename_in_file(struct shiftimg *h, const char *dir, const char *name,
			  const struct si_oci_renamed *r)
{
	struct si_json_edits ed = { 0 };
	struct si_json_span doc;
	char p[PATH_MAX + 32], *b = NULL, *out = NULL;
	size_t outn;
	struct stat st;
	int fd, err = 0;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	if (fstat(fd, &st) < 0 || st.st_size > (16 << 20) ||
	    !(b = malloc((size_t)st.st_size + 1)) ||
	    read(fd, b, (size_t)st.st_size) != st.st_size) {
		err = si_error(h, EIO, "%s: cannot read it", name);
		goto out_free;
	}
	close(fd);
	fd = -1;
	if (si_json_doc(b, (size_t)st.st_size, &doc) < 0) {
		err = si_error(h, EINVAL, "%s: not JSON", name);
		goto out_free;
	}
	if (renamed_in(b, doc, r, &ed) < 0 ||
	    si_json_splice(b, (size_t)st.st_size, &ed, &out, &outn) < 0) {
		err = si_error(h, ENOMEM, "out of memory");
		goto out_free;
	}
	fd = open(p, O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd < 0 || write(fd, out, outn) != (ssize_t)outn)
		err = si_error(h, errno ? errno : EIO, "%s: %s", p, strerror(errno));
out_free:
	if (fd >= 0)
		close(fd);
	si_json_edits_free(&ed);
	free(out);
	free(b);
	return err;
}

static int pack_into(struct shiftimg *h, struct archive *a, char *buf, void *arg)
{
	static const char *const first[] = { "blobs", "blobs/sha256" };
	static const char *const last[] = {
		"index.json", "manifest.json", "oci-layout", "repositories",
	};
	const char *dir = arg;
	int err = 0;
	size_t i;

	for (i = 0; !err && i < 2; i++)
		err = add_file(h, a, dir, first[i], buf);
	if (!err)
		err = add_blobs(h, a, dir, buf);
	for (i = 0; !err && i < 4; i++)
		if (i % 2 == 0 || docker_file(dir, last[i]))
			err = add_file(h, a, dir, last[i], buf);
	return err;
}

/* A tar (pax where it must, ustar where it can) of what fill adds, into fd. */
static int write_tar(struct shiftimg *h, int fd, si_archive_fill_fn *fill, void *arg)
{
	struct archive *a = archive_write_new();
	char *buf = malloc(SI_ARCHIVE_BUF);
	int err = 0;

	if (!a || !buf) {
		err = si_error(h, ENOMEM, "out of memory");
		goto out_free;
	}
	archive_write_set_format_pax_restricted(a);
	if (archive_write_open_fd(a, fd) != ARCHIVE_OK) {
		err = si_error(h, EIO, "%s", archive_error_string(a));
		goto out_free;
	}
	err = fill(h, a, buf, arg);
	if (!err && archive_write_close(a) != ARCHIVE_OK)
		err = si_error(h, EIO, "%s", archive_error_string(a));
out_free:
	if (a)
		archive_write_free(a);
	free(buf);
	return err;
}

int si_archive_replace(struct shiftimg *h, const char *out, si_archive_fill_fn *fill,
		       void *arg)
{
	char tmp[PATH_MAX + 64];
	int fd, err;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.shiftimg-XXXXXX", out) >= sizeof(tmp))
		return si_error(h, ENAMETOOLONG, "%s: name too long", out);
	si_fault(SI_FAULT_WRITE);
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return si_error(h, errno, "%s: %s", tmp, strerror(errno));
	fchmod(fd, 0644);
	err = write_tar(h, fd, fill, arg);
	si_fault(SI_FAULT_SYNC);
	if (!err && fsync(fd) < 0)
		err = si_error(h, errno, "%s: fsync: %s", tmp, strerror(errno));
	si_fault(SI_FAULT_WRITE);
	if (!err && rename(tmp, out) < 0)
		err = si_error(h, errno, "%s: rename to %s: %s", tmp, out, strerror(errno));
	if (err)
		unlink(tmp);
	close(fd);
	return err;
}

/* The layout unpacked beside out, shifted, and packed again. */
static int layout_run(struct shiftimg *h, const char *target, const char *out,
		      bool rewrite)
{
	struct si_oci_renamed renamed = { 0 };
	char dir[PATH_MAX];
	int err;

	err = si_archive_tmpdir(h, out, dir, sizeof(dir));
	if (err)
		return err;
	err = unpack(h, target, dir);
	/* The layout's layers take -o for themselves. */
	si_option_unset(h, "output");
	if (!err)
		err = si_oci_run_as(h, dir, target, &renamed);
	if (!err && renamed.failed)
		err = si_error(h, ENOMEM, "out of memory");
	if (!err && renamed.nr)
		err = rename_in_file(h, dir, "manifest.json", &renamed);
	if (!err && renamed.nr)
		err = rename_in_file(h, dir, "repositories", &renamed);
	/* Nothing changed in place: the archive stays as it was. */
	if (!err && !(h->flags & SHIFTIMG_DRY_RUN) && (rewrite || renamed.nr))
		err = si_archive_replace(h, out, pack_into, dir);
	remove_dir(dir);
	free(renamed.pair);
	return err;
}

int si_oci_archive_run(struct shiftimg *h, const char *target)
{
	const char *o = si_option(h, "output");
	const char *why = si_tarlib_load(SI_LIBARCHIVE);
	char first[100], *out = strdup(o ? o : target);
	int err = 0;

	if (!out)
		return si_error(h, ENOMEM, "out of memory");
	if (why)
		err = si_error(h, ENOTSUP, "%s: %s", target, why);
	if (!err && !strcmp(out, "-"))
		err = si_error(h, EINVAL, "%s: an OCI or docker archive is written to a file, not to standard output",
			       target);
	if (!err && first_name(target, first) && !layout_name(first))
		err = si_docker_archive_run(h, target, out, o != NULL);
	else if (!err)
		err = layout_run(h, target, out, o != NULL);
	if (o && shiftimg_set_option(h, "output", out) < 0 && !err)
		err = -ENOMEM;
	free(out);
	return err;
}
