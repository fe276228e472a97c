// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * A `docker save` archive of the classic form as a target: manifest.json
 * and repositories at the top, each image's config as <hex>.json, each
 * layer a plain tar, either <v1 id>/layer.tar (Docker) or <diff_id>.tar
 * with <v1 id>/layer.tar a symlink to it (containers/image: skopeo and
 * podman save).
 *
 * The archive is unpacked into a temporary directory beside the output,
 * and an OCI layout is made of it there from hard links: one manifest
 * per manifest.json item, whose layer digests are the config's diff_ids
 * (a plain tar layer's blob is its uncompressed tar).  That layout is
 * shifted as any (src/oci.c), and its new blobs go back where the old
 * ones were: a file named by its old digest gets the new one's name, in
 * manifest.json and in the symlinks to it, and a file named by a v1 id
 * keeps its name.  The v1 ids are not digests any loader checks (Docker
 * and containers/image give an image new ones on load), so they, the
 * legacy <id>/json files and repositories stay as they were.
 *
 * The stamp lives in each manifest.json item as "annotations", which
 * loaders ignore, with the key the OCI manifest has.  The new archive is
 * written in the old one's entry order, modes and times, to a temporary
 * file that is synced and renamed over the output (src/ociarchive.c).
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

#include "ocijson.h"
#include "shiftimg-int.h"

#define COPY_BUF	SI_ARCHIVE_BUF
#define JSON_MAX	(16u << 20)
#define MAP_KEY		"org.shiftimg.map"
#define LAYOUT		".oci"		/* the layout made inside the unpacked archive */

/* One entry of the archive, in its order. */
struct entry {
	char *name;			/* without "./" or a trailing "/" */
	char *fresh;			/* its new name, once its contents changed */
	char *link;			/* a symlink's target */
	unsigned int type;		/* AE_IFREG, AE_IFDIR, AE_IFLNK */
	mode_t perm;
	time_t mtime;
};

/* One manifest.json item, and the manifest made for it. */
struct item {
	struct si_json_span obj, config, layers;
	char config_digest[SI_DIGEST_LEN];
	char manifest[SI_DIGEST_LEN];
	char (*diff)[SI_DIGEST_LEN];	/* the config's diff_ids: the layers' digests */
	size_t nr_layers;
};

struct classic {
	struct shiftimg *h;
	const char *target;
	char dir[PATH_MAX];		/* the unpacked archive */
	struct entry *e;
	size_t nr;
	char *mj;			/* manifest.json */
	size_t mjn;
	struct item *items;
	size_t nr_items;
	struct si_json_edits edits;	/* manifest.json's */
	struct si_oci_renamed renamed;
};

static bool hex64(const char *p)
{
	size_t i;

	for (i = 0; i < 64; i++)
		if (!p[i] || !strchr("0123456789abcdef", p[i]))
			return false;
	return true;
}

/* The names the classic form has; nothing else is taken. */
static bool classic_name(const char *p, unsigned int type)
{
	if (type == AE_IFREG && (!strcmp(p, "manifest.json") || !strcmp(p, "repositories")))
		return true;
	if (!hex64(p))
		return false;
	p += 64;
	if (type == AE_IFDIR)
		return !*p;
	if (type == AE_IFLNK)
		return !strcmp(p, "/layer.tar");
	return !strcmp(p, ".json") || !strcmp(p, ".tar") || !strcmp(p, "/layer.tar") ||
	       !strcmp(p, "/json") || !strcmp(p, "/VERSION");
}

/* A symlink may only be <id>/layer.tar -> ../<hex>.tar, as skopeo writes it. */
static bool classic_link(const char *to)
{
	return !strncmp(to, "../", 3) && hex64(to + 3) && !strcmp(to + 67, ".tar");
}

static struct entry *find_entry(struct classic *c, const char *name)
{
	size_t i;

	for (i = 0; i < c->nr; i++)
		if (!strcmp(c->e[i].name, name))
			return &c->e[i];
	return NULL;
}

static int add_entry(struct classic *c, struct archive_entry *ae, const char *name)
{
	struct entry *e = realloc(c->e, (c->nr + 1) * sizeof(*c->e));
	const char *link = archive_entry_symlink(ae);

	if (!e)
		return si_error(c->h, ENOMEM, "out of memory");
	c->e = e;
	e = &c->e[c->nr];
	memset(e, 0, sizeof(*e));
	e->type = archive_entry_filetype(ae);
	e->perm = archive_entry_perm(ae);
	e->mtime = archive_entry_mtime(ae);
	e->name = strdup(name);
	e->link = link ? strdup(link) : NULL;
	c->nr++;
	if (!e->name || (link && !e->link))
		return si_error(c->h, ENOMEM, "out of memory");
	return 0;
}

static int unpack_entry(struct shiftimg *h, struct archive *a, struct archive_entry *ae,
			void *arg)
{
	struct classic *c = arg;
	const char *raw = archive_entry_pathname(ae), *link;
	unsigned int type = archive_entry_filetype(ae);
	char name[PATH_MAX], p[PATH_MAX * 2];
	size_t n;
	int err;

	while (raw[0] == '.' && raw[1] == '/')
		raw += 2;
	n = strlen(raw);
	if (n >= sizeof(name))
		return si_error(h, ENAMETOOLONG, "%s: '%s': name too long", c->target, raw);
	memcpy(name, raw, n + 1);
	while (n && name[n - 1] == '/')
		name[--n] = '\0';
	if (!classic_name(name, type) || find_entry(c, name))
		return si_error(h, EINVAL, "%s: '%s' is not a file of a docker save archive",
				c->target, raw);
	link = archive_entry_symlink(ae);
	if (type == AE_IFLNK && !classic_link(link))
		return si_error(h, EINVAL, "%s: '%s' is a symlink to '%s', outside the archive's layers",
				c->target, name, link);
	err = add_entry(c, ae, name);
	if (err)
		return err;
	snprintf(p, sizeof(p), "%s/%s", c->dir, name);
	if (type == AE_IFDIR)
		return mkdir(p, 0755) < 0 && errno != EEXIST ?
		       si_error(h, errno, "%s: %s", p, strerror(errno)) : 0;
	/* A file inside <id>/ may come before <id>/ itself, or without it. */
	if (strchr(name, '/')) {
		char d[PATH_MAX * 2];

		snprintf(d, sizeof(d), "%s/%.64s", c->dir, name);
		mkdir(d, 0755);
	}
	if (type == AE_IFLNK)
		return symlink(link, p) < 0 ?
		       si_error(h, errno, "%s: %s", p, strerror(errno)) : 0;
	return si_archive_extract(h, a, c->target, p);
}


/* A small file of the unpacked archive, whole and NUL-terminated. */
static int read_small(struct classic *c, const char *name, char **buf, size_t *len)
{
	char p[PATH_MAX * 2];
	struct stat st;
	int fd, err = 0;

	snprintf(p, sizeof(p), "%s/%s", c->dir, name);
	fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return si_error(c->h, errno, "%s: %s: %s", c->target, name, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > JSON_MAX) {
		err = si_error(c->h, EINVAL, "%s: %s: not a small regular file", c->target, name);
		goto out_close;
	}
	*buf = malloc((size_t)st.st_size + 1);
	if (!*buf) {
		err = si_error(c->h, ENOMEM, "out of memory");
		goto out_close;
	}
	if (read(fd, *buf, (size_t)st.st_size) != st.st_size) {
		free(*buf);
		*buf = NULL;
		err = si_error(c->h, EIO, "%s: %s: short read", c->target, name);
		goto out_close;
	}
	(*buf)[st.st_size] = '\0';
	*len = (size_t)st.st_size;
out_close:
	close(fd);
	return err;
}

static int write_small(struct classic *c, const char *name, const char *buf, size_t len)
{
	char p[PATH_MAX * 2];
	int fd, err = 0;

	snprintf(p, sizeof(p), "%s/%s", c->dir, name);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return si_error(c->h, errno, "%s: %s", p, strerror(errno));
	if (write(fd, buf, len) != (ssize_t)len)
		err = si_error(c->h, errno ? errno : EIO, "%s: %s", p, strerror(errno));
	close(fd);
	return err;
}

/* A path manifest.json names: an entry, a symlink followed to its file. */
static const char *real_file(struct classic *c, const char *name)
{
	const struct entry *e = find_entry(c, name);

	if (e && e->type == AE_IFLNK)
		e = find_entry(c, e->link + 3);
	return e && e->type == AE_IFREG ? e->name : NULL;
}

/* Links name of the unpacked archive into the layout as blob digest. */
static int link_blob(struct classic *c, const char *name, const char *digest)
{
	char from[PATH_MAX * 2], to[PATH_MAX * 2];

	snprintf(from, sizeof(from), "%s/%s", c->dir, name);
	snprintf(to, sizeof(to), "%s/" LAYOUT "/blobs/sha256/%s", c->dir, digest + 7);
	if (link(from, to) < 0 && errno != EEXIST)
		return si_error(c->h, errno, "%s: %s", to, strerror(errno));
	return 0;
}

/* The i-th string of array arr into out; -1 if there is none. */
static int str_at(const char *b, struct si_json_span arr, size_t i, char *out,
		  size_t size)
{
	struct si_json_span el;
	size_t iter = 0, k = 0;

	while (si_json_elem(b, arr, &iter, &el) > 0)
		if (k++ == i)
			return si_json_str(b, el, out, size);
	return -1;
}

static int count(const char *b, struct si_json_span arr)
{
	struct si_json_span el;
	size_t iter = 0;
	int n = 0;

	while (si_json_elem(b, arr, &iter, &el) > 0)
		n++;
	return n;
}

/* Appends the descriptor of a plain tar layer (diff_id, file) to *m. */
static int layer_desc(struct classic *c, const char *file, const char *diff,
		      char **m, size_t *len, bool first)
{
	char p[PATH_MAX * 2], magic[2] = { 0 }, *nm;
	struct stat st;
	int fd, n;

	snprintf(p, sizeof(p), "%s/%s", c->dir, file);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		if (fd >= 0)
			close(fd);
		return si_error(c->h, errno, "%s: %s: %s", c->target, file, strerror(errno));
	}
	n = (int)read(fd, magic, 2);
	close(fd);
	if (n == 2 && ((magic[0] == '\x1f' && magic[1] == '\x8b') ||
		       (magic[0] == '\x28' && magic[1] == '\xb5')))
		return si_error(c->h, ENOTSUP, "%s: layer %s is compressed: a docker save archive holds plain tar layers",
				c->target, file);
	nm = realloc(*m, *len + 256);
	if (!nm)
		return si_error(c->h, ENOMEM, "out of memory");
	*m = nm;
	*len += (size_t)sprintf(*m + *len,
		"%s{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar\",\"digest\":\"%s\",\"size\":%lld}",
		first ? "" : ",", diff, (long long)st.st_size);
	return link_blob(c, file, diff);
}

/*
 * The manifest of item it: its config and layers from the config's
 * diff_ids, and the stamp the item carries.  Written into the layout,
 * its digest into it->manifest, its descriptor appended to *idx.
 */
static int make_manifest(struct classic *c, struct item *it, char **idx, size_t *idxn)
{
	char cname[PATH_MAX], lname[PATH_MAX], diff[SI_DIGEST_LEN], stamp[1024] = "";
	struct si_json_span cdoc, rootfs, diffs, ann, v;
	char *cfg = NULL, *m = NULL, *nm;
	size_t cn, mn, i, nr;
	const char *file;
	int err;

	if (si_json_str(c->mj, it->config, cname, sizeof(cname)) < 0 ||
	    !(file = real_file(c, cname)))
		return si_error(c->h, EINVAL, "%s: manifest.json: the config '%s' is not in the archive",
				c->target, cname);
	err = read_small(c, file, &cfg, &cn);
	if (!err)
		err = si_sha256(c->h, cfg, cn, it->config_digest);
	if (!err)
		err = link_blob(c, file, it->config_digest);
	if (err)
		goto out_free;
	if (si_json_doc(cfg, cn, &cdoc) < 0 ||
	    si_json_member(cfg, cdoc, "rootfs", &rootfs, NULL) <= 0 ||
	    si_json_member(cfg, rootfs, "diff_ids", &diffs, NULL) <= 0 ||
	    !si_json_is(cfg, diffs, '[')) {
		err = si_error(c->h, EINVAL, "%s: %s: no rootfs.diff_ids", c->target, cname);
		goto out_free;
	}
	nr = (size_t)count(c->mj, it->layers);
	if ((size_t)count(cfg, diffs) != nr) {
		err = si_error(c->h, EINVAL, "%s: %s names %zu layers, its config %d diff_ids",
			       c->target, cname, nr, count(cfg, diffs));
		goto out_free;
	}
	it->diff = calloc(nr ? nr : 1, sizeof(*it->diff));
	it->nr_layers = nr;
	m = malloc(512);
	if (!m || !it->diff) {
		err = si_error(c->h, ENOMEM, "out of memory");
		goto out_free;
	}
	mn = (size_t)sprintf(m, "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
			     "\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\","
			     "\"digest\":\"%s\",\"size\":%zu},\"layers\":[", it->config_digest, cn);
	for (i = 0; !err && i < nr; i++) {
		if (str_at(c->mj, it->layers, i, lname, sizeof(lname)) < 0 ||
		    !(file = real_file(c, lname)))
			err = si_error(c->h, EINVAL, "%s: layer %zu of %s ('%s') is missing",
				       c->target, i + 1, cname, lname);
		else if (str_at(cfg, diffs, i, diff, sizeof(diff)) < 0 ||
			 strncmp(diff, "sha256:", 7) || !hex64(diff + 7) || diff[71])
			err = si_error(c->h, EINVAL, "%s: %s: diff_id %zu is not a sha256 digest",
				       c->target, cname, i + 1);
		/* A file named by a digest must be that layer. */
		else if (hex64(file) && !strcmp(file + 64, ".tar") && strncmp(file, diff + 7, 64))
			err = si_error(c->h, EINVAL, "%s: layer %s is named for another diff_id than %s's %s",
				       c->target, file, cname, diff);
		else
			err = layer_desc(c, file, diff, &m, &mn, i == 0);
		if (!err)
			memcpy(it->diff[i], diff, SI_DIGEST_LEN);
	}
	if (err)
		goto out_free;
	if (si_json_member(c->mj, it->obj, "annotations", &ann, NULL) > 0 &&
	    si_json_member(c->mj, ann, MAP_KEY, &v, NULL) > 0)
		si_json_str(c->mj, v, stamp, sizeof(stamp));
	nm = realloc(m, mn + strlen(stamp) + 64);
	if (!nm) {
		err = si_error(c->h, ENOMEM, "out of memory");
		goto out_free;
	}
	m = nm;
	if (stamp[0])
		mn += (size_t)sprintf(m + mn, "],\"annotations\":{\"" MAP_KEY "\":\"%s\"}}", stamp);
	else
		mn += (size_t)sprintf(m + mn, "]}");
	err = si_sha256(c->h, m, mn, it->manifest);
	if (!err) {
		snprintf(lname, sizeof(lname), LAYOUT "/blobs/sha256/%s", it->manifest + 7);
		err = write_small(c, lname, m, mn);
	}
	/* Named by its first tag, in messages. */
	if (si_json_member(c->mj, it->obj, "RepoTags", &v, NULL) <= 0 ||
	    str_at(c->mj, v, 0, lname, sizeof(lname)) < 0 || strlen(lname) > 256)
		lname[0] = '\0';
	nm = err ? NULL : realloc(*idx, *idxn + 512);
	if (!err && !nm)
		err = si_error(c->h, ENOMEM, "out of memory");
	if (!err) {
		*idx = nm;
		*idxn += (size_t)sprintf(*idx + *idxn,
			"%s{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"%s\",\"size\":%zu%s%s%s}",
			it == c->items ? "" : ",", it->manifest, mn,
			lname[0] ? ",\"annotations\":{\"org.opencontainers.image.ref.name\":\"" : "",
			lname, lname[0] ? "\"}" : "");
	}
out_free:
	free(cfg);
	free(m);
	return err;
}

/* manifest.json's items, each with a manifest in the layout. */
static int make_layout(struct classic *c)
{
	struct si_json_span doc, el, v;
	size_t iter = 0, idxn;
	char p[PATH_MAX * 2], *idx;
	int err = 0;

	if (!find_entry(c, "manifest.json"))
		return si_error(c->h, EINVAL, "%s: no manifest.json: an archive of the old docker save form without one is not supported",
				c->target);
	err = read_small(c, "manifest.json", &c->mj, &c->mjn);
	if (err)
		return err;
	if (si_json_doc(c->mj, c->mjn, &doc) < 0 || !si_json_is(c->mj, doc, '['))
		return si_error(c->h, EINVAL, "%s: manifest.json is not a JSON array", c->target);
	c->nr_items = (size_t)count(c->mj, doc);
	c->items = calloc(c->nr_items ? c->nr_items : 1, sizeof(*c->items));
	if (!c->items)
		return si_error(c->h, ENOMEM, "out of memory");
	for (c->nr_items = 0; si_json_elem(c->mj, doc, &iter, &el) > 0; c->nr_items++) {
		struct item *it = &c->items[c->nr_items];

		it->obj = el;
		if (!si_json_is(c->mj, el, '{') ||
		    si_json_member(c->mj, el, "Config", &it->config, NULL) <= 0 ||
		    si_json_member(c->mj, el, "Layers", &it->layers, NULL) <= 0 ||
		    !si_json_is(c->mj, it->layers, '['))
			return si_error(c->h, EINVAL, "%s: manifest.json: item %zu has no Config or Layers",
					c->target, c->nr_items + 1);
		/* Foreign layers are fetched from elsewhere on load: not here to shift. */
		if (si_json_member(c->mj, el, "LayerSources", &v, NULL) > 0 &&
		    si_json_is(c->mj, v, '{') && v.len > 2)
			return si_error(c->h, ENOTSUP, "%s: manifest.json: item %zu has non-distributable layers (LayerSources), which are not in the archive",
					c->target, c->nr_items + 1);
	}
	snprintf(p, sizeof(p), "%s/" LAYOUT, c->dir);
	if (mkdir(p, 0755) < 0)
		return si_error(c->h, errno, "%s: %s", p, strerror(errno));
	snprintf(p, sizeof(p), "%s/" LAYOUT "/blobs", c->dir);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/" LAYOUT "/blobs/sha256", c->dir);
	if (mkdir(p, 0755) < 0)
		return si_error(c->h, errno, "%s: %s", p, strerror(errno));
	err = write_small(c, LAYOUT "/oci-layout", "{\"imageLayoutVersion\":\"1.0.0\"}", 30);
	idx = malloc(64);
	if (!idx)
		return si_error(c->h, ENOMEM, "out of memory");
	idxn = (size_t)sprintf(idx, "{\"schemaVersion\":2,\"manifests\":[");
	for (iter = 0; !err && iter < c->nr_items; iter++)
		err = make_manifest(c, &c->items[iter], &idx, &idxn);
	if (!err) {
		char *ni = realloc(idx, idxn + 3);

		if (!ni) {
			err = si_error(c->h, ENOMEM, "out of memory");
		} else {
			idx = ni;
			idxn += (size_t)sprintf(idx + idxn, "]}");
			err = write_small(c, LAYOUT "/index.json", idx, idxn);
		}
	}
	free(idx);
	return err;
}

/* What a blob became in the run, or NULL if it stayed. */
static const char *renamed_to(const struct classic *c, const char *digest)
{
	size_t i;

	for (i = 0; i < c->renamed.nr; i++)
		if (!strcmp(c->renamed.pair[i][0], digest))
			return c->renamed.pair[i][1];
	return NULL;
}

/*
 * The file manifest.json names as value gets the contents of blob to.
 * Named by its old digest (old), it takes the new one's name: in its
 * entry, in the symlinks to it and in manifest.json.
 */
static int replace_file(struct classic *c, struct si_json_span value,
			const char *old, const char *to, const char *suffix)
{
	char name[PATH_MAX], blob[PATH_MAX * 2], p[PATH_MAX * 2], fresh[PATH_MAX];
	const char *file = NULL;
	struct entry *e;
	size_t i;

	if (si_json_str(c->mj, value, name, sizeof(name)) == 0)
		file = real_file(c, name);
	if (!file)
		return si_error(c->h, EINVAL, "%s: manifest.json: bad name", c->target);
	e = find_entry(c, file);
	if (!e->fresh) {
		snprintf(fresh, sizeof(fresh), "%s", e->name);
		if (!strncmp(e->name, old + 7, 64) && !strcmp(e->name + 64, suffix))
			snprintf(fresh, sizeof(fresh), "%.64s%s", to + 7, suffix);
		snprintf(blob, sizeof(blob), "%s/" LAYOUT "/blobs/sha256/%s", c->dir, to + 7);
		snprintf(p, sizeof(p), "%s/%s", c->dir, e->name);
		unlink(p);
		snprintf(p, sizeof(p), "%s/%s", c->dir, fresh);
		if (link(blob, p) < 0)
			return si_error(c->h, errno, "%s: %s", p, strerror(errno));
		e->fresh = strdup(fresh);
		if (!e->fresh)
			return si_error(c->h, ENOMEM, "out of memory");
		for (i = 0; i < c->nr; i++) {
			struct entry *l = &c->e[i];
			char *target;

			if (l->type != AE_IFLNK || strcmp(l->link + 3, e->name))
				continue;
			if (asprintf(&target, "../%s", fresh) < 0)
				return si_error(c->h, ENOMEM, "out of memory");
			free(l->link);
			l->link = target;
		}
	}
	/* manifest.json names the file itself, not a symlink to it. */
	if (!strcmp(name, e->name) && strcmp(e->fresh, e->name)) {
		char q[PATH_MAX + 2];

		snprintf(q, sizeof(q), "\"%s\"", e->fresh);
		if (si_json_edit_add(&c->edits, value.off, value.len, q) < 0)
			return si_error(c->h, ENOMEM, "out of memory");
	}
	return 0;
}

/* The new manifest's stamp into the item's annotations. */
static int restamp(struct classic *c, const struct item *it, const char *manifest)
{
	char name[PATH_MAX], stamp[1024] = "", *m = NULL;
	struct si_json_span doc, ann, v;
	size_t mn;
	int err;

	snprintf(name, sizeof(name), LAYOUT "/blobs/sha256/%s", manifest + 7);
	err = read_small(c, name, &m, &mn);
	if (err)
		return err;
	if (si_json_doc(m, mn, &doc) == 0 &&
	    si_json_member(m, doc, "annotations", &ann, NULL) > 0 &&
	    si_json_member(m, ann, MAP_KEY, &v, NULL) > 0)
		si_json_str(m, v, stamp, sizeof(stamp));
	free(m);
	if (si_json_set_annotation(c->mj, it->obj, MAP_KEY, stamp[0] ? stamp : NULL,
				   &c->edits) < 0)
		return si_error(c->h, EINVAL, "%s: manifest.json: bad annotations", c->target);
	return 0;
}

/* Each item's new config, layers and stamp into the unpacked archive. */
static int write_back(struct classic *c)
{
	char *out = NULL;
	size_t i, k, outn;
	int err = 0;

	for (i = 0; !err && i < c->nr_items; i++) {
		struct item *it = &c->items[i];
		const char *to = renamed_to(c, it->config_digest), *m;
		struct si_json_span el;
		size_t iter = 0;

		if (to)
			err = replace_file(c, it->config, it->config_digest, to, ".json");
		for (k = 0; !err && k < it->nr_layers &&
			    si_json_elem(c->mj, it->layers, &iter, &el) > 0; k++) {
			to = renamed_to(c, it->diff[k]);
			if (to)
				err = replace_file(c, el, it->diff[k], to, ".tar");
		}
		m = err ? NULL : renamed_to(c, it->manifest);
		if (m && (c->h->flags & SHIFTIMG_STAMP))
			err = restamp(c, it, m);
	}
	if (!err && si_json_splice(c->mj, c->mjn, &c->edits, &out, &outn) < 0)
		err = si_error(c->h, ENOMEM, "out of memory");
	if (!err)
		err = write_small(c, "manifest.json", out, outn);
	free(out);
	return err;
}

static int pack_entry(struct classic *c, struct archive *a, const struct entry *e,
		      char *buf)
{
	struct archive_entry *ae = archive_entry_new();
	const char *name = e->fresh ? e->fresh : e->name;
	char p[PATH_MAX * 2];
	struct stat st;
	ssize_t n;
	int fd = -1, err = 0;

	if (!ae)
		return si_error(c->h, ENOMEM, "out of memory");
	snprintf(p, sizeof(p), "%s/%s", c->dir, name);
	if (e->type == AE_IFREG) {
		fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0 || fstat(fd, &st) < 0) {
			err = si_error(c->h, errno, "%s: %s", p, strerror(errno));
			goto out_free;
		}
		archive_entry_set_size(ae, st.st_size);
	}
	archive_entry_set_pathname(ae, name);
	archive_entry_set_filetype(ae, e->type);
	archive_entry_set_perm(ae, e->perm);
	archive_entry_set_mtime(ae, e->mtime, 0);
	if (e->link)
		archive_entry_set_symlink(ae, e->link);
	if (archive_write_header(a, ae) != ARCHIVE_OK) {
		err = si_error(c->h, EIO, "%s: %s", name, archive_error_string(a));
		goto out_free;
	}
	while (fd >= 0 && (n = read(fd, buf, COPY_BUF)) > 0)
		if (archive_write_data(a, buf, (size_t)n) != n) {
			err = si_error(c->h, EIO, "%s: %s", name, archive_error_string(a));
			break;
		}
out_free:
	if (fd >= 0)
		close(fd);
	archive_entry_free(ae);
	return err;
}

/* The new archive: the old one's entries in their order, as they are now. */
static int pack_entries(struct shiftimg *h, struct archive *a, char *buf, void *arg)
{
	struct classic *c = arg;
	int err = 0;
	size_t i;

	(void)h;
	for (i = 0; !err && i < c->nr; i++)
		err = pack_entry(c, a, &c->e[i], buf);
	return err;
}

/* The unpacked archive goes, layout and all (three levels at most). */
static void remove_tree(int dfd, const char *name, int depth)
{
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct dirent *de;
	DIR *d;

	if (fd >= 0 && (d = fdopendir(fd))) {
		while ((de = readdir(d)))
			if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
			    unlinkat(fd, de->d_name, 0) < 0 && depth > 0)
				remove_tree(fd, de->d_name, depth - 1);
		closedir(d);
	} else if (fd >= 0) {
		close(fd);
	}
	unlinkat(dfd, name, AT_REMOVEDIR);
}

static void classic_free(struct classic *c)
{
	size_t i;

	for (i = 0; i < c->nr; i++) {
		free(c->e[i].name);
		free(c->e[i].fresh);
		free(c->e[i].link);
	}
	for (i = 0; i < c->nr_items; i++)
		free(c->items[i].diff);
	free(c->e);
	free(c->items);
	free(c->mj);
	free(c->renamed.pair);
	si_json_edits_free(&c->edits);
}

int si_docker_archive_run(struct shiftimg *h, const char *target, const char *out,
			  bool rewrite)
{
	struct classic c = { .h = h, .target = target, .renamed.own_layout = true };
	char lay[PATH_MAX + 8];
	int err;

	err = si_archive_tmpdir(h, out, c.dir, sizeof(c.dir));
	if (err)
		return err;
	err = si_archive_each(h, target, unpack_entry, &c);
	if (!err)
		err = make_layout(&c);
	/* The layout's layers take -o for themselves. */
	si_option_unset(h, "output");
	snprintf(lay, sizeof(lay), "%s/" LAYOUT, c.dir);
	if (!err)
		err = si_oci_run_as(h, lay, target, &c.renamed);
	if (!err && c.renamed.failed)
		err = si_error(h, ENOMEM, "out of memory");
	if (!err && c.renamed.nr)
		err = write_back(&c);
	if (!err && !(h->flags & SHIFTIMG_DRY_RUN) && (rewrite || c.renamed.nr))
		err = si_archive_replace(h, out, pack_entries, &c);
	remove_tree(AT_FDCWD, c.dir, 3);
	classic_free(&c);
	return err;
}
