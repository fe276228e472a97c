// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * An OCI image layout as a target: a directory holding oci-layout,
 * index.json and blobs/sha256/<hex>, shifted in place as a whole.
 *
 * Every image the index reaches (nested indexes, every platform) is
 * shifted: each of its layers once through the tar backend, which
 * gives the new blob's digest and the new diff_id in the same pass;
 * then the config (rootfs.diff_ids), the manifest (the config's and the
 * layers' descriptors) and the indexes above it are rewritten as
 * splices of the changed values into their original bytes
 * (ocijson.h), so nothing else about them changes.  A shifted manifest
 * carries the map as the annotation org.shiftimg.map: the stamp.
 *
 * On a crash: every new blob is written to a temporary file in the
 * layout, synced and renamed to its digest, and index.json is replaced
 * last, so a client sees the old image or the new one.  The old blobs
 * the new index no longer needs are listed in .shiftimg-gc before the
 * swap and removed after it; a run that finds that list finishes it.
 * A run stopped before the swap left only unreferenced blobs: the next
 * one starts again, and writes the same bytes.
 *
 * Not shifted: signatures and attestations (cosign's sha256-<hex>.sig,
 * .att and .sbom tags, manifests with a subject) of a changed manifest
 * are left out of the new index, since they would no longer verify;
 * other artifacts are left as they are.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "journal.h"
#include "ocijson.h"
#include "tarlibs.h"

#define JSON_MAX	(16u << 20)	/* a config or manifest; layers are streamed */
#define MAP_KEY		"org.shiftimg.map"
#define REF_KEY		"org.opencontainers.image.ref.name"
#define GC_LIST		".shiftimg-gc"
#define HEXLEN		64

typedef char digest_t[SI_DIGEST_LEN];

struct digests {
	digest_t *d;
	size_t nr, alloc;
};

struct layer {
	digest_t old, new, diff;
	uint64_t old_size, size;
	/* What the layer's run, on a worker's handle, leaves for the whole. */
	char tmp[PATH_MAX + 128];	/* the new blob before it is named, "" if not run */
	int err;
	char *msg;			/* the run's error, or NULL */
	struct si_tally tally;
};

struct oci {
	struct shiftimg *h;
	const char *target;
	char dir[PATH_MAX];
	const char *name;		/* the layout in messages */
	const char *ref;		/* DIR:REF, or NULL */
	struct si_oci_renamed *renamed;	/* for an archive's other records */
	int dfd;			/* the layout */
	bool write;			/* the second walk: write what changes */
	char *from, *to;		/* the stamps the run goes between */
	struct layer *layers;
	size_t nr_layers, alloc_layers;
	struct digests changing;	/* manifests and indexes the run changes */
	struct digests gone;		/* old blobs the new index may not need */
	struct digests refs;		/* what an index reaches (gc) */
	struct digests made;		/* layer blobs this run added */
	unsigned int images, done, annotations;
	char left_out[512];		/* signatures and referrers left out */
};

/* An OCI image layout (the layout itself, not DIR:REF). */
static bool is_layout(const char *path)
{
	int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct stat a, b;
	bool yes;

	if (dfd < 0)
		return false;
	yes = fstatat(dfd, "oci-layout", &a, AT_SYMLINK_NOFOLLOW) == 0 &&
	      S_ISREG(a.st_mode) &&
	      fstatat(dfd, "index.json", &b, AT_SYMLINK_NOFOLLOW) == 0 &&
	      S_ISREG(b.st_mode);
	close(dfd);
	return yes;
}

/* Splits DIR:REF when the whole is not a path and DIR is a layout. */
static bool split_ref(const char *target, char *dir, size_t size,
		      const char **ref)
{
	const char *colon = strrchr(target, ':');
	struct stat st;

	*ref = NULL;
	if (lstat(target, &st) == 0 || !colon || colon == target ||
	    !colon[1] || (size_t)(colon - target) >= size)
		return false;
	snprintf(dir, size, "%.*s", (int)(colon - target), target);
	*ref = colon + 1;
	return is_layout(dir);
}

bool si_oci_probe(const char *target)
{
	char dir[PATH_MAX];
	const char *ref;

	return is_layout(target) || split_ref(target, dir, sizeof(dir), &ref);
}

/* ---- digests and blobs ---- */

static bool valid_digest(const char *d)
{
	size_t i;

	if (strncmp(d, "sha256:", 7) || strlen(d) != 7 + HEXLEN)
		return false;
	for (i = 7; d[i]; i++)
		if (!strchr("0123456789abcdef", d[i]))
			return false;
	return true;
}

static int digests_add(struct digests *s, const char *d)
{
	if (s->nr == s->alloc) {
		size_t na = s->alloc ? s->alloc * 2 : 32;
		digest_t *p = realloc(s->d, na * sizeof(*p));

		if (!p)
			return -ENOMEM;
		s->d = p;
		s->alloc = na;
	}
	snprintf(s->d[s->nr++], SI_DIGEST_LEN, "%s", d);
	return 0;
}

static bool digests_has(const struct digests *s, const char *d)
{
	size_t i;

	for (i = 0; i < s->nr; i++)
		if (!strcmp(s->d[i], d))
			return true;
	return false;
}

static void blob_name(const char *digest, char *name, size_t size)
{
	snprintf(name, size, "blobs/sha256/%.64s", digest + 7);
}

int si_sha256(struct shiftimg *h, const void *buf, size_t len, char *out)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char md[32];
	unsigned int mdlen = 0, i;
	const char *why = si_tarlib_load(SI_LIBCRYPTO);
	EVP_MD_CTX *c;

	if (why)
		return si_error(h, ENOTSUP, "sha256: %s", why);
	c = EVP_MD_CTX_new();
	if (!c)
		return si_error(h, ENOMEM, "out of memory");
	if (!EVP_DigestInit_ex(c, EVP_sha256(), NULL) ||
	    !EVP_DigestUpdate(c, buf, len) || !EVP_DigestFinal_ex(c, md, &mdlen)) {
		EVP_MD_CTX_free(c);
		return si_error(h, EIO, "sha256 failed");
	}
	EVP_MD_CTX_free(c);
	strcpy(out, "sha256:");
	for (i = 0; i < 32; i++) {
		out[7 + 2 * i] = hex[md[i] >> 4];
		out[8 + 2 * i] = hex[md[i] & 15];
	}
	out[7 + HEXLEN] = '\0';
	return 0;
}

/* Reads a small file of the layout whole, NUL-terminated. */
static int read_at(struct oci *o, const char *name, char **buf, size_t *len)
{
	int fd = openat(o->dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW), err = 0;
	struct stat st;
	ssize_t n;

	if (fd < 0)
		return si_error(o->h, errno, "%s: %s: %s", o->name, name, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > JSON_MAX) {
		err = si_error(o->h, EINVAL, "%s: %s: not a file of at most %u MiB",
			       o->name, name, JSON_MAX >> 20);
		goto out_close;
	}
	*buf = malloc((size_t)st.st_size + 1);
	if (!*buf) {
		err = si_error(o->h, ENOMEM, "out of memory");
		goto out_close;
	}
	n = read(fd, *buf, (size_t)st.st_size);
	if (n != st.st_size) {
		free(*buf);
		err = si_error(o->h, EIO, "%s: %s: short read", o->name, name);
		goto out_close;
	}
	(*buf)[n] = '\0';
	*len = (size_t)n;
out_close:
	close(fd);
	return err;
}

/* A JSON blob, checked against its digest: a changed blob would change it. */
static int read_blob(struct oci *o, const char *digest, char **buf, size_t *len)
{
	char name[128];
	digest_t got;
	int err;

	blob_name(digest, name, sizeof(name));
	err = read_at(o, name, buf, len);
	if (!err)
		err = si_sha256(o->h, *buf, *len, got);
	if (!err && strcmp(got, digest)) {
		free(*buf);
		return si_error(o->h, EINVAL, "%s: blob %s does not match its digest (it is %s)",
				o->name, digest, got);
	}
	return err;
}

static int sync_dir(struct oci *o, const char *name)
{
	int fd, err = 0;

	si_fault(SI_FAULT_SYNC);
	fd = openat(o->dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) < 0)
		err = si_error(o->h, errno, "%s/%s: fsync: %s", o->name, name,
			       strerror(errno));
	if (fd >= 0)
		close(fd);
	return err;
}

/* Writes buf to a temporary file beside name, syncs it and renames it to name. */
static int write_durable(struct oci *o, const char *name, const char *buf,
			 size_t len)
{
	char tmp[PATH_MAX + 64];
	const char *slash = strrchr(name, '/');
	int fd, err = 0;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s/%.*s.shiftimg-XXXXXX", o->dir,
			     slash ? (int)(slash - name + 1) : 0, name) >= sizeof(tmp))
		return si_error(o->h, ENAMETOOLONG, "%s: name too long", o->name);
	si_fault(SI_FAULT_WRITE);
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return si_error(o->h, errno, "%s: %s", tmp, strerror(errno));
	if (fchmod(fd, 0644) < 0 || write(fd, buf, len) != (ssize_t)len) {
		err = si_error(o->h, errno ? errno : EIO, "%s: write: %s", tmp,
			       strerror(errno));
		goto out_unlink;
	}
	si_fault(SI_FAULT_SYNC);
	if (fsync(fd) < 0) {
		err = si_error(o->h, errno, "%s: fsync: %s", tmp, strerror(errno));
		goto out_unlink;
	}
	si_fault(SI_FAULT_WRITE);
	if (renameat(AT_FDCWD, tmp, o->dfd, name) < 0) {
		err = si_error(o->h, errno, "%s: rename to %s: %s", tmp, name,
			       strerror(errno));
		goto out_unlink;
	}
	close(fd);
	return 0;
out_unlink:
	unlink(tmp);
	close(fd);
	return err;
}

/* A new JSON blob under its digest (already there: the same bytes). */
static int write_blob(struct oci *o, const char *buf, size_t len, char *digest)
{
	char name[128];
	int err = si_sha256(o->h, buf, len, digest);

	if (err || (o->h->flags & SHIFTIMG_DRY_RUN))
		return err;
	blob_name(digest, name, sizeof(name));
	if (faccessat(o->dfd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
		return 0;
	return write_durable(o, name, buf, len);
}

/* ---- descriptors ---- */

struct desc {
	struct si_json_span obj, digest_v, size_v;
	char media[160];
	digest_t digest;
	char ref[256];			/* its ref.name annotation, or "" */
	bool urls;
};

static int parse_desc(struct oci *o, const char *b, struct si_json_span obj,
		      struct desc *d, const char *what)
{
	struct si_json_span v, ann;

	memset(d, 0, sizeof(*d));
	d->obj = obj;
	if (!si_json_is(b, obj, '{') ||
	    si_json_member(b, obj, "digest", &d->digest_v, NULL) <= 0 ||
	    si_json_str(b, d->digest_v, d->digest, sizeof(d->digest)) < 0 ||
	    si_json_member(b, obj, "size", &d->size_v, NULL) <= 0)
		return si_error(o->h, EINVAL, "%s: a descriptor in %s without a digest and a size",
				o->name, what);
	if (!valid_digest(d->digest))
		return si_error(o->h, ENOTSUP, "%s: %s names %s: only sha256 digests are supported",
				o->name, what, d->digest);
	if (si_json_member(b, obj, "mediaType", &v, NULL) > 0)
		si_json_str(b, v, d->media, sizeof(d->media));
	if (si_json_member(b, obj, "annotations", &ann, NULL) > 0 &&
	    si_json_member(b, ann, REF_KEY, &v, NULL) > 0)
		si_json_str(b, v, d->ref, sizeof(d->ref));
	d->urls = si_json_member(b, obj, "urls", &v, NULL) > 0;
	return 0;
}

static bool is_index(const char *media)
{
	return !strcmp(media, "application/vnd.oci.image.index.v1+json") ||
	       !strcmp(media, "application/vnd.docker.distribution.manifest.list.v2+json");
}

static bool is_manifest(const char *media)
{
	return !strcmp(media, "application/vnd.oci.image.manifest.v1+json") ||
	       !strcmp(media, "application/vnd.docker.distribution.manifest.v2+json");
}

static bool is_image_config(const char *media)
{
	return !strcmp(media, "application/vnd.oci.image.config.v1+json") ||
	       !strcmp(media, "application/vnd.docker.container.image.v1+json");
}

/* cosign's tags for what it stores beside an image: sha256-<hex>.sig */
static bool signature_tag(const char *ref, char *digest)
{
	const char *dot = strrchr(ref, '.');

	if (strncmp(ref, "sha256-", 7) || !dot || dot - ref != 7 + HEXLEN ||
	    (strcmp(dot, ".sig") && strcmp(dot, ".att") && strcmp(dot, ".sbom")))
		return false;
	snprintf(digest, SI_DIGEST_LEN, "sha256:%.*s", HEXLEN, ref + 7);
	return valid_digest(digest);
}

/* Annotations that describe a layer's compressed bytes, not its files. */
static bool describes_bytes(const char *b, struct si_json_span key)
{
	static const char *const prefixes[] = {
		"\"containerd.io/snapshot/stargz/",
		"\"io.containers.estargz.",
		"\"io.github.containers.zstd-chunked.",
	};
	size_t i;

	for (i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (key.len > strlen(prefixes[i]) &&
		    !memcmp(b + key.off, prefixes[i], strlen(prefixes[i])))
			return true;
	return false;
}

static int edit_desc(struct oci *o, const struct desc *d,
		     const char *digest, uint64_t size, struct si_json_edits *ed)
{
	char q[SI_DIGEST_LEN + 2], num[24];

	snprintf(q, sizeof(q), "\"%s\"", digest);
	snprintf(num, sizeof(num), "%llu", (unsigned long long)size);
	if (si_json_edit_add(ed, d->digest_v.off, d->digest_v.len, q) < 0 ||
	    si_json_edit_add(ed, d->size_v.off, d->size_v.len, num) < 0)
		return si_error(o->h, ENOMEM, "out of memory");
	return 0;
}

/* Cuts a layer's annotations about its old bytes (all of them: the member). */
static int drop_byte_annotations(struct oci *o, const char *b,
				 struct si_json_span layer,
				 struct si_json_edits *ed)
{
	struct si_json_span ann, k, v;
	size_t iter = 0, all = 0, drop = 0, at;
	bool cut[64] = { false };
	int r;

	if (si_json_member(b, layer, "annotations", &ann, &at) <= 0)
		return 0;
	while (si_json_next_member(b, ann, &iter, &k, &v) > 0) {
		if (describes_bytes(b, k)) {
			drop++;
			if (all < 64)
				cut[all] = true;
		}
		all++;
	}
	if (!drop)
		return 0;
	if (all > 64)
		return si_error(o->h, ENOTSUP, "%s: a layer with more than 64 annotations",
				o->name);
	o->annotations += (unsigned int)drop;
	if (drop == all) {
		bool *whole = calloc(at + 1, sizeof(*whole));

		if (!whole)
			return si_error(o->h, ENOMEM, "out of memory");
		whole[at] = true;
		r = si_json_cut_items(b, layer, whole, at + 1, ed);
		free(whole);
	} else {
		r = si_json_cut_items(b, ann, cut, all, ed);
	}
	return r < 0 ? si_error(o->h, ENOMEM, "out of memory") : 0;
}

static struct layer *find_layer(struct oci *o, const char *digest)
{
	size_t i;

	for (i = 0; i < o->nr_layers; i++)
		if (!strcmp(o->layers[i].old, digest))
			return &o->layers[i];
	return NULL;
}

static int add_layer(struct oci *o, const char *digest, uint64_t size)
{
	if (find_layer(o, digest))
		return 0;
	if (o->nr_layers == o->alloc_layers) {
		size_t na = o->alloc_layers ? o->alloc_layers * 2 : 16;
		struct layer *l = realloc(o->layers, na * sizeof(*l));

		if (!l)
			return si_error(o->h, ENOMEM, "out of memory");
		o->layers = l;
		o->alloc_layers = na;
	}
	memset(&o->layers[o->nr_layers], 0, sizeof(*o->layers));
	o->layers[o->nr_layers].old_size = size;
	strcpy(o->layers[o->nr_layers++].old, digest);
	return 0;
}

/* ---- an image: manifest, config, layers ---- */

/* What changed, for --dry-run and --verbose: "DIR: config OLD" -> NEW. */
static void report(struct oci *o, const char *what, const char *old,
		   const char *new)
{
	char path[PATH_MAX + 128], to[SI_DIGEST_LEN + 8];

	snprintf(path, sizeof(path), "%s: %s %s", o->name, what, old);
	snprintf(to, sizeof(to), "-> %s", new);
	si_list(o->h, path, to);
	if (o->renamed && !(o->h->flags & SHIFTIMG_DRY_RUN)) {
		struct si_oci_renamed *r = o->renamed;
		void *p = realloc(r->pair, (r->nr + 1) * sizeof(*r->pair));

		if (!p) {
			r->failed = true;
			return;
		}
		r->pair = p;
		snprintf(r->pair[r->nr][0], SI_DIGEST_LEN, "%s", old);
		snprintf(r->pair[r->nr++][1], SI_DIGEST_LEN, "%s", new);
	}
}

struct image {
	char *b;			/* the manifest */
	size_t n;
	struct si_json_span doc, layers;
	struct desc config;
	size_t nr_layers;
	char name[320];			/* for messages: its tag, or its digest */
};

/* The config's rootfs.diff_ids, one per layer, in layer order. */
static int config_diff_ids(struct oci *o, const struct image *im, char *c,
			   size_t cn, struct si_json_span *ids)
{
	struct si_json_span doc, rootfs, el;
	size_t iter = 0, nr = 0;

	if (si_json_doc(c, cn, &doc) < 0 ||
	    si_json_member(c, doc, "rootfs", &rootfs, NULL) <= 0 ||
	    si_json_member(c, rootfs, "diff_ids", ids, NULL) <= 0 ||
	    !si_json_is(c, *ids, '['))
		return si_error(o->h, EINVAL, "%s: %s: config %s has no rootfs.diff_ids",
				o->name, im->name, im->config.digest);
	while (si_json_elem(c, *ids, &iter, &el) > 0)
		nr++;
	if (nr != im->nr_layers)
		return si_error(o->h, EINVAL, "%s: %s: config %s lists %zu diff_ids for %zu layers",
				o->name, im->name, im->config.digest, nr, im->nr_layers);
	return 0;
}

/* Before anything is written: every layer is a tar blob in the layout. */
static int check_layers(struct oci *o, struct image *im)
{
	struct si_json_span el;
	struct desc d;
	size_t iter = 0;
	char name[128];
	struct stat st;
	int err = 0;

	while (!err && si_json_elem(im->b, im->layers, &iter, &el) > 0) {
		err = parse_desc(o, im->b, el, &d, im->name);
		if (err)
			break;
		blob_name(d.digest, name, sizeof(name));
		if (d.urls)
			err = si_error(o->h, ENOTSUP, "%s: %s: layer %s is non-distributable (urls): its bytes are not in the layout; refusing before writing anything",
				       o->name, im->name, d.digest);
		else if (!strstr(d.media, ".tar"))
			err = si_error(o->h, ENOTSUP, "%s: %s: layer %s has media type '%s', not a tar layer",
				       o->name, im->name, d.digest, d.media);
		else if (fstatat(o->dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
			 !S_ISREG(st.st_mode))
			err = si_error(o->h, ENOENT, "%s: %s: layer %s is missing from the layout (%s); refusing before writing anything",
				       o->name, im->name, d.digest, name);
		else
			err = add_layer(o, d.digest, (uint64_t)st.st_size);
	}
	return err;
}

/* The new config: the diff_ids of the shifted layers, nothing else. */
static int write_config(struct oci *o, struct image *im, char *digest,
			uint64_t *size)
{
	struct si_json_edits ed = { 0 };
	struct si_json_span ids, el, lel;
	size_t iter = 0, liter = 0;
	char *c, *out = NULL, q[SI_DIGEST_LEN + 2];
	size_t cn, outn;
	struct desc d;
	int err;

	err = read_blob(o, im->config.digest, &c, &cn);
	if (err)
		return err;
	err = config_diff_ids(o, im, c, cn, &ids);
	while (!err && si_json_elem(c, ids, &iter, &el) > 0 &&
	       si_json_elem(im->b, im->layers, &liter, &lel) > 0) {
		err = parse_desc(o, im->b, lel, &d, im->name);
		snprintf(q, sizeof(q), "\"%s\"", err ? "" : find_layer(o, d.digest)->diff);
		if (!err && si_json_edit_add(&ed, el.off, el.len, q) < 0)
			err = si_error(o->h, ENOMEM, "out of memory");
	}
	if (!err && si_json_splice(c, cn, &ed, &out, &outn) < 0)
		err = si_error(o->h, ENOMEM, "out of memory");
	if (!err)
		err = write_blob(o, out, outn, digest);
	if (!err && strcmp(digest, im->config.digest))
		err = digests_add(&o->gone, im->config.digest);
	*size = outn;
	if (!err)
		report(o, "config", im->config.digest, digest);
	free(out);
	free(c);
	si_json_edits_free(&ed);
	return err;
}

static int load_image(struct oci *o, const struct desc *d, struct image *im)
{
	struct si_json_span v;
	size_t iter = 0;
	int err;

	memset(im, 0, sizeof(*im));
	snprintf(im->name, sizeof(im->name), "%s", d->ref[0] ? d->ref : d->digest);
	err = read_blob(o, d->digest, &im->b, &im->n);
	if (err)
		return err;
	if (si_json_doc(im->b, im->n, &im->doc) < 0 ||
	    !si_json_is(im->b, im->doc, '{'))
		return si_error(o->h, EINVAL, "%s: manifest %s is not a JSON object",
				o->name, d->digest);
	if (si_json_member(im->b, im->doc, "config", &v, NULL) <= 0)
		return si_error(o->h, EINVAL, "%s: manifest %s has no config",
				o->name, d->digest);
	err = parse_desc(o, im->b, v, &im->config, im->name);
	/* No layers (umoci new makes such an image): nothing to walk. */
	if (!err && si_json_member(im->b, im->doc, "layers", &im->layers, NULL) <= 0)
		im->layers = (struct si_json_span){ 0, 0 };
	while (!err && si_json_elem(im->b, im->layers, &iter, &v) > 0)
		im->nr_layers++;
	return err;
}

/* The subject of a referrer (an attestation, a signature), or "". */
static void subject_of(const struct image *im, char *digest)
{
	struct si_json_span s, v;

	digest[0] = '\0';
	if (si_json_member(im->b, im->doc, "subject", &s, NULL) > 0 &&
	    si_json_member(im->b, s, "digest", &v, NULL) > 0)
		si_json_str(im->b, v, digest, SI_DIGEST_LEN);
}

/* Whether the run shifts this image: the stamp in its annotations. */
static int judge(struct oci *o, const struct image *im)
{
	struct si_json_span ann, v;
	char old[1024] = "", who[PATH_MAX + 400];

	if (si_json_member(im->b, im->doc, "annotations", &ann, NULL) > 0 &&
	    si_json_member(im->b, ann, MAP_KEY, &v, NULL) > 0)
		si_json_str(im->b, v, old, sizeof(old));
	snprintf(who, sizeof(who), "%s: image %s", o->name, im->name);
	return si_stamp_judge(o->h, who, old, o->from, o->to);
}

/* The new manifest: the config's and layers' descriptors, and the stamp. */
static int rewrite_manifest(struct oci *o, struct image *im, char *digest,
			    uint64_t *size)
{
	struct si_json_edits ed = { 0 };
	struct si_json_span el;
	digest_t cdig;
	uint64_t csize;
	size_t iter = 0, outn = 0;
	char *out = NULL;
	struct desc d;
	int err;

	err = write_config(o, im, cdig, &csize);
	if (!err)
		err = edit_desc(o, &im->config, cdig, csize, &ed);
	while (!err && si_json_elem(im->b, im->layers, &iter, &el) > 0) {
		const struct layer *l;

		err = parse_desc(o, im->b, el, &d, im->name);
		l = err ? NULL : find_layer(o, d.digest);
		if (l)
			err = edit_desc(o, &d, l->new, l->size, &ed);
		if (!err)
			err = drop_byte_annotations(o, im->b, el, &ed);
	}
	if (!err && (o->h->flags & SHIFTIMG_STAMP) &&
	    si_json_set_annotation(im->b, im->doc, MAP_KEY,
				   o->to[0] ? o->to : NULL, &ed) < 0)
		err = si_error(o->h, EINVAL, "%s: manifest of %s: bad annotations",
			       o->name, im->name);
	if (!err && si_json_splice(im->b, im->n, &ed, &out, &outn) < 0)
		err = si_error(o->h, ENOMEM, "out of memory");
	if (!err)
		err = write_blob(o, out, outn, digest);
	*size = outn;
	free(out);
	si_json_edits_free(&ed);
	return err;
}

/*
 * One manifest of an index.  The first walk judges and checks it and
 * collects its layers; the second writes its config and itself, and
 * *changed says whether its descriptor must change (to digest, size).
 */
static int walk_manifest(struct oci *o, const struct desc *d, bool selected,
			 char *digest, uint64_t *size, bool *changed,
			 char *subject)
{
	struct image im;
	int err;

	*changed = false;
	err = load_image(o, d, &im);
	if (err)
		goto out_free;
	subject_of(&im, subject);
	/* An artifact (a signature, an SBOM) holds no file system. */
	if (!selected || !is_image_config(im.config.media))
		goto out_free;
	if (o->write) {
		if (!digests_has(&o->changing, d->digest))
			goto out_free;
		err = rewrite_manifest(o, &im, digest, size);
		*changed = !err && strcmp(digest, d->digest);
		if (*changed) {
			err = digests_add(&o->gone, d->digest);
			report(o, "manifest", d->digest, digest);
		}
		goto out_free;
	}
	err = judge(o, &im);
	if (err == SI_STAMP_DONE) {
		o->done++;
		err = 0;
		goto out_free;
	}
	if (!err)
		err = check_layers(o, &im);
	if (!err) {
		char *c;
		size_t cn;
		struct si_json_span ids;

		err = read_blob(o, im.config.digest, &c, &cn);
		if (!err) {
			err = config_diff_ids(o, &im, c, cn, &ids);
			free(c);
		}
	}
	if (!err && !digests_has(&o->changing, d->digest)) {
		o->images++;
		err = digests_add(&o->changing, d->digest);
	}
out_free:
	free(im.b);
	return err;
}

/* ---- indexes ---- */

static int walk_index(struct oci *o, const char *b, size_t n, bool top,
		      bool selected, char **out, size_t *outn, bool *changed);

static void note_left_out(struct oci *o, const char *what)
{
	size_t len = strlen(o->left_out);

	snprintf(o->left_out + len, sizeof(o->left_out) - len, "%s%s",
		 len ? ", " : "", what);
}

static int walk_child_index(struct oci *o, const struct desc *d, bool selected,
			    char *digest, uint64_t *size, bool *changed)
{
	char *b, *out = NULL;
	size_t n, outn = 0;
	int err = read_blob(o, d->digest, &b, &n);

	if (err)
		return err;
	err = walk_index(o, b, n, false, selected, &out, &outn, changed);
	if (!err && !o->write && *changed)
		err = digests_add(&o->changing, d->digest);
	if (!err && o->write && *changed) {
		err = write_blob(o, out, outn, digest);
		*size = outn;
		if (!err)
			err = digests_add(&o->gone, d->digest);
		if (!err)
			report(o, "index", d->digest, digest);
	}
	free(out);
	free(b);
	return err;
}

/* One descriptor of an index: recursed into, rewritten or cut. */
static int walk_desc(struct oci *o, const char *b, struct si_json_span el,
		     bool *cut, bool top, bool selected,
		     struct si_json_edits *ed, bool *changed)
{
	char subject[SI_DIGEST_LEN] = "", signed_[SI_DIGEST_LEN];
	digest_t digest;
	uint64_t size = 0;
	bool ch = false;
	struct desc d;
	int err = parse_desc(o, b, el, &d, top ? "index.json" : "an index");

	if (err)
		return err;
	if (top && signature_tag(d.ref, signed_))
		strcpy(subject, signed_);
	else if (top && o->ref && strcmp(d.ref, o->ref))
		selected = false;
	if (subject[0])
		;	/* a signature tag holds no image */
	else if (is_index(d.media))
		err = walk_child_index(o, &d, selected, digest, &size, &ch);
	else if (is_manifest(d.media))
		err = walk_manifest(o, &d, selected, digest, &size, &ch, subject);
	if (err || !o->write)
		return err;
	if (subject[0] && digests_has(&o->changing, subject)) {
		char what[300];

		snprintf(what, sizeof(what), "%s", d.ref[0] ? d.ref : d.digest);
		note_left_out(o, what);
		*changed = true;
		*cut = true;
		return 0;
	}
	if (ch) {
		*changed = true;
		err = edit_desc(o, &d, digest, size, ed);
	}
	return err;
}

static int walk_index(struct oci *o, const char *b, size_t n, bool top,
		      bool selected, char **out, size_t *outn, bool *changed)
{
	struct si_json_edits ed = { 0 };
	struct si_json_span doc, m, el;
	size_t iter = 0, before = o->changing.nr, nr = 0, i;
	bool *cut;
	int err = 0;

	*changed = false;
	if (si_json_doc(b, n, &doc) < 0 || !si_json_is(b, doc, '{'))
		return si_error(o->h, EINVAL, "%s: %s is not a JSON object", o->name,
				top ? "index.json" : "an index");
	if (si_json_member(b, doc, "manifests", &m, NULL) <= 0)
		return 0;
	while (si_json_elem(b, m, &iter, &el) > 0)
		nr++;
	cut = calloc(nr + 1, sizeof(*cut));
	if (!cut)
		return si_error(o->h, ENOMEM, "out of memory");
	iter = 0;
	for (i = 0; !err && si_json_elem(b, m, &iter, &el) > 0; i++)
		err = walk_desc(o, b, el, &cut[i], top, selected, &ed, changed);
	if (!err && o->write && (si_json_cut_items(b, m, cut, nr, &ed) < 0 ||
				 si_json_splice(b, n, &ed, out, outn) < 0))
		err = si_error(o->h, ENOMEM, "out of memory");
	free(cut);
	/* In the first walk an index changes with any image below it. */
	if (!err && !o->write)
		*changed = o->changing.nr > before;
	si_json_edits_free(&ed);
	return err;
}

/* ---- layers ---- */

/*
 * One layer through the tar backend on c, a handle of its own, into a
 * temporary file beside the blob; what it found stays on the layer.
 */
static void run_layer(struct oci *o, struct shiftimg *c, struct layer *l)
{
	char in[PATH_MAX + 128];
	struct stat st;

	snprintf(in, sizeof(in), "%s/blobs/sha256/%s", o->dir, l->old + 7);
	snprintf(l->tmp, sizeof(l->tmp), "%s/blobs/sha256/.shiftimg-layer-%s",
		 o->dir, l->old + 7);
	l->err = shiftimg_set_option(c, "output", l->tmp);
	if (!l->err)
		l->err = si_run_path(c, in);
	si_option_unset(c, "output");
	if (!l->err && stat(l->tmp, &st) < 0)
		l->err = si_error(c, errno, "%s: %s", l->tmp, strerror(errno));
	if (!l->err) {
		l->size = (uint64_t)st.st_size;
		strcpy(l->new, c->digest_output);
		strcpy(l->diff, c->digest_diff_id);
	} else {
		l->msg = strdup(c->err[0] ? c->err : strerror(-l->err));
		if (!l->msg)
			l->err = -ENOMEM;
		c->err[0] = '\0';
	}
	l->tally = c->tally;
	si_tally_init(&c->tally);
}

/*
 * Layers are independent, so a pool of workers takes them, largest
 * first so that the last one to finish is a small one.  A failure
 * stops the others from taking more.
 */
struct order {
	uint64_t size;			/* of the old blob */
	size_t i;
};

struct pool {
	struct oci *o;
	struct order *order;
	size_t next;			/* __atomic: the next of order */
	size_t done;			/* __atomic: layers through */
	bool stop;			/* __atomic */
	bool callbacks;			/* the parent's: one worker alone */
	unsigned int threads;		/* each worker's */
};

static void *pool_worker(void *arg)
{
	struct pool *p = arg;
	struct oci *o = p->o;
	struct shiftimg *c = si_handle_fork(o->h, p->callbacks);
	size_t i;

	/* A dry run shifts too, to a file it removes: it reports the new digests. */
	if (c) {
		c->flags = (c->flags | SHIFTIMG_DIGEST) & ~SHIFTIMG_DRY_RUN;
		c->threads = p->threads;
	}
	while (!__atomic_load_n(&p->stop, __ATOMIC_RELAXED) &&
	       (i = __atomic_fetch_add(&p->next, 1, __ATOMIC_RELAXED)) < o->nr_layers) {
		struct layer *l = &o->layers[p->order[i].i];

		if (c)
			run_layer(o, c, l);
		else
			l->err = -ENOMEM;
		if (l->err)
			__atomic_store_n(&p->stop, true, __ATOMIC_RELAXED);
		if (!p->callbacks)
			si_progress(o->h, __atomic_add_fetch(&p->done, 1, __ATOMIC_RELAXED),
				    o->nr_layers);
	}
	si_handle_fork_free(c);
	return NULL;
}

static int larger_first(const void *a, const void *b)
{
	const struct order *x = a, *y = b;

	return x->size < y->size ? 1 : x->size > y->size ? -1 : 0;
}

/* The layers, largest blob first. */
static struct order *layer_order(struct oci *o)
{
	struct order *ord = malloc(o->nr_layers * sizeof(*ord));
	size_t i;

	if (!ord)
		return NULL;
	for (i = 0; i < o->nr_layers; i++) {
		ord[i].i = i;
		ord[i].size = o->layers[i].old_size;
	}
	qsort(ord, o->nr_layers, sizeof(*ord), larger_first);
	return ord;
}

/*
 * Workers: one per thread the run may use, at most one per layer, and
 * one alone when the run lists (the lines of two layers would mix).
 * The threads are shared out among them, two at least each (given two
 * or more): a worker's gzip output takes about 1 MB per thread
 * (gzpar.c), and a layer left alone at the end still keeps more than
 * one core busy.  Progress is then counted in layers.
 */
static int run_layers(struct oci *o)
{
	struct pool p = { .o = o };
	unsigned int workers, t, started = 0;
	pthread_t *tids;

	p.callbacks = o->h->list_fn != NULL;
	workers = p.callbacks ? 1 : si_threads(o->h);
	if (workers > o->nr_layers)
		workers = (unsigned int)o->nr_layers;
	p.threads = (si_threads(o->h) + workers - 1) / workers;
	if (p.threads < 2 && si_threads(o->h) >= 2)
		p.threads = 2;
	p.order = layer_order(o);
	tids = calloc(workers, sizeof(*tids));
	if (!p.order || !tids) {
		free(p.order);
		free(tids);
		return si_error(o->h, ENOMEM, "out of memory");
	}
	for (t = 1; t < workers; t++)
		if (!pthread_create(&tids[started], NULL, pool_worker, &p))
			started++;
	pool_worker(&p);
	for (t = 0; t < started; t++)
		pthread_join(tids[t], NULL);
	free(tids);
	free(p.order);
	return 0;
}

/* A shifted layer named by its digest, or dropped by a dry run. */
static int place_layer(struct oci *o, struct layer *l)
{
	char name[128];

	report(o, "layer", l->old, l->new);
	if (o->h->flags & SHIFTIMG_DRY_RUN)
		return 0;
	blob_name(l->new, name, sizeof(name));
	if (faccessat(o->dfd, name, F_OK, AT_SYMLINK_NOFOLLOW) < 0 &&
	    digests_add(&o->made, l->new) < 0)
		return si_error(o->h, ENOMEM, "out of memory");
	si_fault(SI_FAULT_WRITE);
	if (renameat(AT_FDCWD, l->tmp, o->dfd, name) < 0)
		return si_error(o->h, errno, "%s: rename to %s: %s", l->tmp, name,
				strerror(errno));
	if (strcmp(l->new, l->old))
		return digests_add(&o->gone, l->old);
	return 0;
}

/*
 * Every layer shifted, then their results taken in layer order, as a
 * run one after another would have them: the tallies, the first failed
 * layer's error, and the new blobs put in place.
 */
static int shift_layers(struct oci *o)
{
	struct shiftimg *h = o->h;
	size_t i;
	int err = run_layers(o);

	for (i = 0; i < o->nr_layers; i++) {
		struct layer *l = &o->layers[i];

		si_tally_merge(&h->tally, &l->tally);
		if (!err && l->err)
			err = si_error(h, -l->err, "%s",
				       l->msg ? l->msg : strerror(-l->err));
	}
	for (i = 0; !err && i < o->nr_layers; i++)
		err = place_layer(o, &o->layers[i]);
	/* What a failure or a dry run left; a named blob is gone from here. */
	for (i = 0; i < o->nr_layers; i++)
		if (o->layers[i].tmp[0])
			unlink(o->layers[i].tmp);
	return err;
}

static void free_layers(struct oci *o)
{
	size_t i;

	for (i = 0; i < o->nr_layers; i++) {
		free(o->layers[i].msg);
		si_tally_free(&o->layers[i].tally);
	}
	free(o->layers);
}

/* ---- old blobs ---- */

/* Every blob an index reaches, into o->refs. */
static int collect_refs(struct oci *o, const char *b, size_t n)
{
	struct si_json_span doc, m, el;
	size_t iter = 0;
	int err = 0;

	if (si_json_doc(b, n, &doc) < 0 ||
	    si_json_member(b, doc, "manifests", &m, NULL) <= 0)
		return 0;
	while (!err && si_json_elem(b, m, &iter, &el) > 0) {
		struct desc d;
		char *c;
		size_t cn;

		err = parse_desc(o, b, el, &d, "an index");
		if (!err)
			err = digests_add(&o->refs, d.digest);
		if (err || (!is_index(d.media) && !is_manifest(d.media)))
			continue;
		err = read_blob(o, d.digest, &c, &cn);
		if (err)
			break;
		if (is_index(d.media)) {
			err = collect_refs(o, c, cn);
		} else {
			/* A manifest: its config and its layers, as descriptors. */
			struct si_json_span doc2, v, ly, lel;
			size_t it2 = 0;

			if (si_json_doc(c, cn, &doc2) == 0) {
				if (si_json_member(c, doc2, "config", &v, NULL) > 0 &&
				    !parse_desc(o, c, v, &d, "a manifest"))
					err = digests_add(&o->refs, d.digest);
				if (si_json_member(c, doc2, "layers", &ly, NULL) > 0)
					while (!err && si_json_elem(c, ly, &it2, &lel) > 0)
						if (!(err = parse_desc(o, c, lel, &d, "a manifest")))
							err = digests_add(&o->refs, d.digest);
			}
		}
		free(c);
	}
	return err;
}

/*
 * Removes the blobs a list names that index.json no longer reaches,
 * then the list: what a run does once its index is durable, and the
 * next run does for one stopped before it was done.
 */
static int finish_gc(struct oci *o)
{
	char *list, *idx, *line, *save = NULL, name[128];
	size_t ln, in;
	int err;

	if (faccessat(o->dfd, GC_LIST, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	err = read_at(o, GC_LIST, &list, &ln);
	if (err)
		return err;
	err = read_at(o, "index.json", &idx, &in);
	o->refs.nr = 0;
	if (!err)
		err = collect_refs(o, idx, in);
	for (line = strtok_r(list, "\n", &save); !err && line;
	     line = strtok_r(NULL, "\n", &save)) {
		if (!valid_digest(line) || digests_has(&o->refs, line))
			continue;
		blob_name(line, name, sizeof(name));
		si_fault(SI_FAULT_WRITE);
		if (unlinkat(o->dfd, name, 0) < 0 && errno != ENOENT)
			err = si_error(o->h, errno, "%s/%s: %s", o->name, name,
				       strerror(errno));
	}
	if (!err) {
		si_fault(SI_FAULT_WRITE);
		unlinkat(o->dfd, GC_LIST, 0);
		err = sync_dir(o, ".");
	}
	free(idx);
	free(list);
	return err;
}

static int write_gc_list(struct oci *o)
{
	size_t i, len = 0;
	char *buf = malloc(o->gone.nr * SI_DIGEST_LEN + 1);
	int err;

	if (!buf)
		return si_error(o->h, ENOMEM, "out of memory");
	buf[0] = '\0';
	for (i = 0; i < o->gone.nr; i++)
		len += (size_t)sprintf(buf + len, "%s\n", o->gone.d[i]);
	err = write_durable(o, GC_LIST, buf, len);
	free(buf);
	return err;
}

/* Temporary files of a run that stopped: nothing names them. */
static void remove_leftovers(struct oci *o, const char *sub)
{
	int fd = openat(o->dfd, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent *de;
	DIR *d;

	if (fd < 0)
		return;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return;
	}
	while ((de = readdir(d)))
		if (de->d_name[0] == '.' && strstr(de->d_name, ".shiftimg-") &&
		    strcmp(de->d_name, GC_LIST))
			unlinkat(dirfd(d), de->d_name, 0);
	closedir(d);
}

/* ---- the run ---- */

static void set_notice(struct oci *o, const char *old_index, const char *new_index)
{
	struct shiftimg *h = o->h;
	size_t len;

	len = (size_t)snprintf(h->notice, sizeof(h->notice),
			       "%.300s: %s %u image%s (%zu layer%s)",
			       o->name, h->flags & SHIFTIMG_DRY_RUN ? "would shift" : "shifted",
			       o->images, o->images == 1 ? "" : "s", o->nr_layers,
			       o->nr_layers == 1 ? "" : "s");
	if (!(o->renamed && o->renamed->own_layout))
		len += (size_t)snprintf(h->notice + len, sizeof(h->notice) - len,
					", index.json %.19s... -> %.19s...", old_index, new_index);
	if (o->done && len < sizeof(h->notice))
		len += (size_t)snprintf(h->notice + len, sizeof(h->notice) - len,
					"; %u already shifted with this map", o->done);
	if (o->annotations && len < sizeof(h->notice))
		len += (size_t)snprintf(h->notice + len, sizeof(h->notice) - len,
					"; dropped %u eStargz/zstd:chunked layer annotation%s (they described the old bytes: the layers are plain gzip or zstd now)",
					o->annotations, o->annotations == 1 ? "" : "s");
	if (o->left_out[0] && len < sizeof(h->notice))
		len += (size_t)snprintf(h->notice + len, sizeof(h->notice) - len,
					"; left out, as they would no longer verify: %s",
					o->left_out);
	if ((h->flags & SHIFTIMG_REVERSE) && len < sizeof(h->notice))
		snprintf(h->notice + len, sizeof(h->notice) - len,
			 "; the diff_ids are the original ones, compressed digests may differ where another program compressed the layers");
}

/* The new index, then the old blobs it no longer needs. */
static int commit(struct oci *o, const char *idx, size_t n)
{
	int err = sync_dir(o, "blobs/sha256");

	if (!err && !(o->h->flags & SHIFTIMG_KEEP_BLOBS))
		err = write_gc_list(o);
	if (!err)
		err = write_durable(o, "index.json", idx, n);
	if (!err)
		err = sync_dir(o, ".");
	if (!err)
		err = finish_gc(o);
	return err;
}

/*
 * A run refused on a later layer (an unmapped id) takes back the layer
 * blobs it added: nothing refers to them.  Its config and manifest
 * blobs are only written once every layer is through.
 */
static void drop_made(struct oci *o)
{
	char name[128];
	size_t i;

	for (i = 0; i < o->made.nr; i++) {
		blob_name(o->made.d[i], name, sizeof(name));
		unlinkat(o->dfd, name, 0);
	}
}

static int shift_all(struct oci *o, char *idx, size_t n)
{
	struct shiftimg *h = o->h;
	digest_t old_d, new_d;
	char *out = NULL;
	size_t outn;
	bool changed;
	int err;

	err = walk_index(o, idx, n, true, true, NULL, NULL, &changed);
	if (err)
		return err;
	if (!o->images) {
		if (o->ref && !o->done)
			return si_error(h, ENOENT, "%s: no image named '%s' (%s)",
					o->name, o->ref, REF_KEY);
		if (!o->done)
			snprintf(h->notice, sizeof(h->notice),
				 "%.900s: no image in the layout; nothing done", o->name);
		return 0;
	}
	err = shift_layers(o);
	o->write = true;
	if (!err)
		err = walk_index(o, idx, n, true, true, &out, &outn, &changed);
	if (!err)
		err = si_sha256(h, idx, n, old_d);
	if (!err)
		err = si_sha256(h, out, outn, new_d);
	if (!err && !(h->flags & SHIFTIMG_DRY_RUN))
		err = commit(o, out, outn);
	else if (err)
		drop_made(o);
	if (!err) {
		/* The run's digest is the new index's; a layer's diff_id is not the image's. */
		snprintf(h->digest_output, sizeof(h->digest_output), "%s", new_d);
		h->digest_diff_id[0] = '\0';
		set_notice(o, old_d, new_d);
	}
	free(out);
	return err;
}

static int open_layout(struct oci *o, const char *target)
{
	if (is_layout(target))
		snprintf(o->dir, sizeof(o->dir), "%s", target);
	else
		split_ref(target, o->dir, sizeof(o->dir), &o->ref);
	if (si_option(o->h, "output") && !o->name)
		return si_error(o->h, EINVAL, "%s: -o does not apply to an OCI image layout: it is shifted in place",
				target);
	if (!o->name)
		o->name = o->dir;
	o->dfd = open(o->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (o->dfd < 0)
		return si_error(o->h, errno, "%s: %s", o->name, strerror(errno));
	/* Two runs on one layout would remove each other's files. */
	if (flock(o->dfd, LOCK_EX | LOCK_NB) < 0)
		return si_error(o->h, EBUSY, "%s: another shiftimg is working on this layout",
				o->name);
	return 0;
}

/* Not a backend: what shiftimg_backend() names after a layout's run. */
static const struct si_backend oci_backend = { .name = "oci" };

int si_oci_run_as(struct shiftimg *h, const char *target, const char *name,
		  struct si_oci_renamed *renamed)
{
	struct oci o = { .h = h, .target = target, .name = name,
			 .renamed = renamed, .dfd = -1 };
	struct timespec t0, t1;
	char *idx = NULL;
	size_t n;
	int err;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	err = open_layout(&o, target);
	if (!err && si_stamp_texts(h, &o.from, &o.to) < 0)
		err = si_error(h, ENOMEM, "out of memory");
	if (!err && !(h->flags & SHIFTIMG_DRY_RUN)) {
		err = finish_gc(&o);
		remove_leftovers(&o, "blobs/sha256");
		remove_leftovers(&o, ".");
	}
	if (!err)
		err = read_at(&o, "index.json", &idx, &n);
	if (!err)
		err = shift_all(&o, idx, n);
	h->backend = &oci_backend;
	/* Each layer's run set its own time: the whole's is the image's. */
	clock_gettime(CLOCK_MONOTONIC, &t1);
	h->tally.st.seconds = (double)(t1.tv_sec - t0.tv_sec) +
			      (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	free(idx);
	free(o.from);
	free(o.to);
	free_layers(&o);
	free(o.changing.d);
	free(o.gone.d);
	free(o.refs.d);
	free(o.made.d);
	if (o.dfd >= 0)
		close(o.dfd);
	return err;
}

int si_oci_run(struct shiftimg *h, const char *target)
{
	return si_oci_run_as(h, target, NULL, NULL);
}
