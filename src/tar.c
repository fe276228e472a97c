// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The tar backend: tarballs and OCI layers, shifted as one stream.
 *
 * An uncompressed tar (its first block is a tar header) is read with
 * read(2), and the file data between headers is copied by the kernel
 * (copy_file_range, or splice when one side is a pipe): only headers
 * pass through tarhdr.c, which rewrites them.  gzip is undone by gzin.c;
 * anything else goes to libarchive (loaded only then: tarlibs.h), which
 * only detects and undoes the compression (format "raw").  The result
 * is compressed again the same way: gzip by gzpar.c on all cores, the
 * other filters by libarchive on a thread of their own so that reading
 * and compressing overlap.  The output goes to a temporary file in the
 * target's directory, fsynced and renamed into place only when the
 * whole stream succeeded, so apply is atomic and decides
 * --unmapped=fail itself.
 *
 * What users see (for the manual):
 * - Compression: none, gzip, bzip2, xz, zstd, lz4, detected and kept.
 *   Levels are the tools' defaults (gzip 6, bzip2 9, xz 6, zstd 3,
 *   lz4 1); option "level" overrides.  Output depends only on the input
 *   and the options: gzip has mtime 0, no name, OS 3 (Unix), and is one
 *   member whatever the thread count.  Multi-member gzip (eStargz) and
 *   zstd:chunked come out as plain single streams: their tables of
 *   contents would no longer match anyway.
 * - Names: by default uname/gname are cleared on every entry whose
 *   uid/gid changes, so that a plain "tar -x" as root, which resolves
 *   names first, restores the shifted numeric ids; option names=keep
 *   keeps them.  In text ACLs (SCHILY.acl.*) a shifted entry's name is
 *   likewise replaced by its new number.  A name-only entry (GNU tar
 *   writes "user:alice:rwx") takes its id from the binary ACL GNU tar
 *   stores beside it; with no binary ACL it stays a name (listed as
 *   "acl-names-kept"): only the extracting host can resolve it.
 * - Ids that outgrow their octal field: base-256 in GNU and v7
 *   headers, a pax uid/gid record in ustar/pax ones (a pax header is
 *   inserted when the entry had none).  A later shift that brings the
 *   id back removes what it added, so shift + --reverse (with
 *   names=keep) gives the original bytes.
 * - The ids in the headers of pax (x, g) and GNU long-name (L, K)
 *   blocks themselves are left alone: they own nothing.
 * - Limits: a pax or long-name header may hold at most 1 MiB, the
 *   long-name headers of one entry 2 MiB together; after the
 *   end-of-archive blocks at most 1 MiB of zeros (anything else there
 *   is refused).  No entry is held in memory: peak RSS stays at a few
 *   MB whatever the archive.
 * - "-" reads standard input and writes standard output.  A failure
 *   there (bad input, --unmapped=fail) leaves the output cut short and
 *   the exit status non-zero: a pipeline must not use it.
 * - SHIFTIMG_DIGEST: the sha256 of the file written and of the
 *   uncompressed tar (the OCI diff_id), from the same pass, through
 *   shiftimg_digest().
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "backend.h"
#include "gzin.h"
#include "gzpar.h"
#include "gzreuse.h"
#include "tarhdr.h"
#include "tarlibs.h"

#define IN_BLOCK	(1u << 20)	/* read(2) size */
#define PIPE_BUFS	4		/* buffers queued to a compressor thread */
#define PIPE_BUF_SIZE	(256u << 10)
#define PROGRESS_STEP	(64ull << 20)

static const char *const tar_options[] = {
	"output", "level", "names", NULL
};

static void digest_hex(EVP_MD_CTX *md, char *out)
{
	unsigned char sum[EVP_MAX_MD_SIZE];
	unsigned int n = 0, i;

	out[0] = '\0';
	if (!md || EVP_DigestFinal_ex(md, sum, &n) != 1)
		return;
	strcpy(out, "sha256:");
	for (i = 0; i < n; i++)
		sprintf(out + 7 + 2 * i, "%02x", sum[i]);
}

static EVP_MD_CTX *digest_new(void)
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();

	if (md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
		EVP_MD_CTX_free(md);
		md = NULL;
	}
	return md;
}

/* ---- the output file ---- */

/*
 * Pieces written out are gathered for one writev(2).  A piece inside
 * [ref_lo, ref_hi) (the uncompressed input's read buffer, which is not
 * refilled before a flush) is referenced where it is; other pieces are
 * short-lived and copied to the staging buffer first, so that file
 * data is copied by the kernel only, as cat does.
 */
#define OUT_STAGE	(256u << 10)
#define OUT_IOV		512

struct fdout {
	int fd;
	unsigned char *stage;
	size_t staged;
	struct iovec iov[OUT_IOV];
	unsigned int niov;
	const unsigned char *ref_lo, *ref_hi;
	uint64_t bytes;
	EVP_MD_CTX *md;		/* sha256 of what reaches the file */
	bool flush_behind;	/* a file we fsync at the end */
	uint64_t flushed;	/* writeback started up to here */
	int err;
};

#define FLUSH_STEP	(8ull << 20)

/*
 * The file is fsynced before the rename: start writeback as we go, and
 * wait for what is two steps behind, so that the disk works while we
 * do and the final fsync has little left (and dirty pages stay few).
 */
static void flush_behind(struct fdout *o)
{
	while (o->bytes - o->flushed >= FLUSH_STEP) {
		sync_file_range(o->fd, (off_t)o->flushed, FLUSH_STEP,
				SYNC_FILE_RANGE_WRITE);
		if (o->flushed >= 2 * FLUSH_STEP)
			sync_file_range(o->fd, (off_t)(o->flushed - 2 * FLUSH_STEP),
					FLUSH_STEP, SYNC_FILE_RANGE_WAIT_BEFORE |
					SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
		o->flushed += FLUSH_STEP;
	}
}

/* Counts bytes that reached the file by any route. */
static void fdout_count(struct fdout *o, uint64_t n)
{
	o->bytes += n;
	if (o->flush_behind)
		flush_behind(o);
}

/* Writes the gathered pieces. */
static int fdout_flush(struct fdout *o)
{
	struct iovec *v = o->iov;
	unsigned int n = o->niov;
	uint64_t total = 0;

	while (n && !o->err) {
		ssize_t w = writev(o->fd, v, (int)n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			o->err = w < 0 ? -errno : -EIO;
			break;
		}
		total += (uint64_t)w;
		while (n && (size_t)w >= v->iov_len) {
			w -= (ssize_t)v->iov_len;
			v++;
			n--;
		}
		if (n) {
			v->iov_base = (unsigned char *)v->iov_base + w;
			v->iov_len -= (size_t)w;
		}
	}
	o->niov = 0;
	o->staged = 0;
	fdout_count(o, total);
	return o->err;
}

static void fdout_add(struct fdout *o, const unsigned char *p, size_t len)
{
	struct iovec *last = o->niov ? &o->iov[o->niov - 1] : NULL;

	if (last && (const unsigned char *)last->iov_base + last->iov_len == p) {
		last->iov_len += len;
		return;
	}
	o->iov[o->niov].iov_base = (void *)p;
	o->iov[o->niov].iov_len = len;
	o->niov++;
}

static int fdout_write(void *arg, const void *p, size_t len)
{
	struct fdout *o = arg;
	const unsigned char *b = p;
	bool ref = b >= o->ref_lo && b < o->ref_hi;

	if (o->err || !len)
		return o->err;
	if (o->md)
		EVP_DigestUpdate(o->md, p, len);
	if (o->niov == OUT_IOV || (!ref && o->staged + len > OUT_STAGE))
		fdout_flush(o);
	if (ref) {
		fdout_add(o, b, len);
	} else if (len > OUT_STAGE / 4) {
		/* Large and short-lived: no point copying it first. */
		fdout_add(o, b, len);
		fdout_flush(o);
	} else {
		memcpy(o->stage + o->staged, b, len);
		fdout_add(o, o->stage + o->staged, len);
		o->staged += len;
	}
	return o->err;
}

/* ---- libarchive compression on a thread of its own ---- */

struct apipe {
	struct archive *w;
	struct fdout *out;
	pthread_t thread;
	bool started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned char *buf[PIPE_BUFS + 1];
	size_t len[PIPE_BUFS + 1];
	unsigned int head, count;	/* queued: head .. head + count */
	unsigned int cur;		/* being filled by the reader */
	bool closing;
	bool closed;		/* archive_write_close() succeeded */
	int err;
	char msg[256];
};

static la_ssize_t apipe_cb(struct archive *a, void *arg, const void *p,
			   size_t len)
{
	struct fdout *o = arg;

	if (fdout_write(o, p, len) < 0) {
		archive_set_error(a, -o->err, "write error");
		return -1;
	}
	return (la_ssize_t)len;
}

static void *apipe_thread(void *arg)
{
	struct apipe *p = arg;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		unsigned int i;
		la_ssize_t n = 0;

		while (!p->count && !p->closing)
			pthread_cond_wait(&p->cond, &p->lock);
		if (!p->count)
			break;
		i = p->head;
		pthread_mutex_unlock(&p->lock);
		if (!p->err && p->len[i])
			n = archive_write_data(p->w, p->buf[i], p->len[i]);
		if (n < 0 || (size_t)n != p->len[i]) {
			if (!p->err) {
				snprintf(p->msg, sizeof(p->msg), "%s",
					 archive_error_string(p->w) ?: "compression failed");
				p->err = -EIO;
			}
		}
		pthread_mutex_lock(&p->lock);
		p->head = (p->head + 1) % (PIPE_BUFS + 1);
		p->count--;
		pthread_cond_broadcast(&p->cond);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

static int apipe_push(struct apipe *p)
{
	pthread_mutex_lock(&p->lock);
	while (p->count == PIPE_BUFS)
		pthread_cond_wait(&p->cond, &p->lock);
	p->count++;
	p->cur = (p->cur + 1) % (PIPE_BUFS + 1);
	p->len[p->cur] = 0;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	return p->err;
}

static int apipe_write(void *arg, const void *data, size_t len)
{
	struct apipe *p = arg;
	const unsigned char *b = data;

	while (len) {
		size_t room = PIPE_BUF_SIZE - p->len[p->cur], k = room < len ? room : len;

		memcpy(p->buf[p->cur] + p->len[p->cur], b, k);
		p->len[p->cur] += k;
		b += k;
		len -= k;
		if (p->len[p->cur] == PIPE_BUF_SIZE && apipe_push(p) < 0)
			return p->err;
	}
	return p->err;
}

/* Sends the last buffer, waits for the thread, closes the compressor. */
static int apipe_close(struct apipe *p)
{
	if (p->len[p->cur])
		apipe_push(p);
	pthread_mutex_lock(&p->lock);
	p->closing = true;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	pthread_join(p->thread, NULL);
	p->started = false;
	if (!p->err && archive_write_close(p->w) != ARCHIVE_OK) {
		snprintf(p->msg, sizeof(p->msg), "%s",
			 archive_error_string(p->w) ?: "compression failed");
		p->err = -EIO;
	}
	p->closed = !p->err;
	return p->err;
}

static void apipe_free(struct apipe *p)
{
	unsigned int i;

	if (p->started) {
		pthread_mutex_lock(&p->lock);
		p->closing = true;
		p->err = p->err ?: -ECANCELED;
		pthread_cond_broadcast(&p->cond);
		pthread_mutex_unlock(&p->lock);
		pthread_join(p->thread, NULL);
	}
	/*
	 * A failed run's compressor must not finish its stream on the way
	 * out: libarchive's lz4 writer crashes doing so.
	 */
	if (p->w && !p->closed)
		archive_write_fail(p->w);
	if (p->w)
		archive_write_free(p->w);
	for (i = 0; i <= PIPE_BUFS; i++)
		free(p->buf[i]);
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
}

static int apipe_open(struct apipe *p, int code, int level, struct fdout *o)
{
	struct archive_entry *e;
	char lv[16];
	unsigned int i;

	memset(p, 0, sizeof(*p));
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	p->out = o;
	for (i = 0; i <= PIPE_BUFS; i++)
		if (!(p->buf[i] = malloc(PIPE_BUF_SIZE)))
			return -ENOMEM;
	p->w = archive_write_new();
	if (!p->w)
		return -ENOMEM;
	snprintf(lv, sizeof(lv), "%d", level);
	if (archive_write_add_filter(p->w, code) != ARCHIVE_OK ||
	    archive_write_set_format_raw(p->w) != ARCHIVE_OK ||
	    archive_write_set_bytes_in_last_block(p->w, 1) != ARCHIVE_OK ||
	    archive_write_set_filter_option(p->w, NULL, "compression-level", lv) != ARCHIVE_OK ||
	    archive_write_open(p->w, o, NULL, apipe_cb, NULL) != ARCHIVE_OK)
		goto out_archive;
	e = archive_entry_new();
	if (!e)
		return -ENOMEM;
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_pathname(e, "data");
	if (archive_write_header(p->w, e) != ARCHIVE_OK) {
		archive_entry_free(e);
		goto out_archive;
	}
	archive_entry_free(e);
	if (pthread_create(&p->thread, NULL, apipe_thread, p))
		return -EAGAIN;
	p->started = true;
	return 0;
out_archive:
	snprintf(p->msg, sizeof(p->msg), "%s",
		 archive_error_string(p->w) ?: "cannot set up the compressor");
	return -EINVAL;
}

/* ---- one run ---- */

/* How file data of an uncompressed tar goes from input to output. */
enum kcopy {
	KCOPY_RANGE,		/* copy_file_range(2): two regular files */
	KCOPY_SPLICE,		/* splice(2): one side is a pipe */
	KCOPY_BUFFER,		/* read(2) and write(2) */
};

struct run {
	struct shiftimg *h;
	const char *path;		/* for messages */
	int in_fd;
	/* The first block, read to decide who decodes the input. */
	unsigned char head[TH_BLOCK];
	size_t head_len;
	bool head_sent;
	unsigned char *rbuf;		/* input buffer, IN_BLOCK bytes, then out.stage */
	/* Uncompressed input is read here; the rest through libarchive. */
	bool direct;
	struct archive *in;
	/*
	 * gzip input is inflated here, so that every member is checked:
	 * by igzip, or, when gzip output re-uses its matches, by gztap.
	 */
	struct gzin *gz_in;
	struct gztap *gz_tap;
	struct gz_matches matches;
	bool reuse;
	struct gzreuse *gzr;
	char rerr[256];			/* why the input could not be read */
	int code;			/* ARCHIVE_FILTER_* of the input */
	int level;
	bool digest;
	bool fsync_out;			/* the output is a file, fsynced */
	EVP_MD_CTX *md_tar;		/* sha256 of the uncompressed output */
	struct fdout out;
	enum kcopy kcopy;
	off_t in_size;			/* a regular input file's size (dry runs) */
	struct gzpar *gz;
	struct apipe pipe;
	bool pipe_open;
	uint64_t next_progress;
	uint64_t in_total;
	struct th_ctx th;
};

static void run_progress(struct run *r, uint64_t done)
{
	if (r->th.in_bytes >= r->next_progress) {
		si_progress(r->h, done, r->in_total);
		r->next_progress = r->th.in_bytes + PROGRESS_STEP;
	}
}

static ssize_t read_some(int fd, void *buf, size_t len)
{
	ssize_t n;

	do {
		n = read(fd, buf, len);
	} while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : n;
}

/* The first block, or less at the end of the input. */
static ssize_t read_head(struct run *r)
{
	while (r->head_len < TH_BLOCK) {
		ssize_t n = read_some(r->in_fd, r->head + r->head_len,
				      TH_BLOCK - r->head_len);

		if (n <= 0)
			return n;
		r->head_len += (size_t)n;
	}
	return 0;
}

/* Next input chunk for th_stream: the first block, then the fd. */
static ssize_t direct_read(void *arg, const unsigned char **p)
{
	struct run *r = arg;
	ssize_t n;
	int err;

	run_progress(r, r->th.in_bytes);
	if (!r->head_sent) {
		r->head_sent = true;
		*p = r->head;
		return (ssize_t)r->head_len;
	}
	/* The gathered output may point into rbuf: write it first. */
	err = fdout_flush(&r->out);
	if (err)
		return err;
	n = read_some(r->in_fd, r->rbuf, IN_BLOCK);
	*p = r->rbuf;
	return n;
}

static bool kcopy_unsupported(int err)
{
	return err == EXDEV || err == EINVAL || err == ENOSYS ||
	       err == EOPNOTSUPP || err == EBADF;
}

/*
 * Copies up to k bytes of file data by the cheapest route that works,
 * trying the next one when the kernel refuses (a pipe, an O_APPEND
 * output, another file system on an old kernel).
 */
static ssize_t kcopy(struct run *r, size_t k)
{
	ssize_t c;

	switch (r->kcopy) {
	case KCOPY_RANGE:
		c = copy_file_range(r->in_fd, NULL, r->out.fd, NULL, k, 0);
		if (c >= 0 || !kcopy_unsupported(errno))
			return c;
		r->kcopy = KCOPY_SPLICE;
		/* fall through */
	case KCOPY_SPLICE:
		c = splice(r->in_fd, NULL, r->out.fd, NULL, k, SPLICE_F_MORE);
		if (c >= 0 || !kcopy_unsupported(errno))
			return c;
		r->kcopy = KCOPY_BUFFER;
		/* fall through */
	case KCOPY_BUFFER:
		break;
	}
	c = read_some(r->in_fd, r->rbuf, k < IN_BLOCK ? k : IN_BLOCK);
	if (c > 0) {
		int err = fdout_write(&r->out, r->rbuf, (size_t)c);

		err = err ?: fdout_flush(&r->out);
		if (err)
			c = err;
	}
	if (c < 0) {
		errno = (int)-c;
		return -1;
	}
	return c;
}

/*
 * File data of an uncompressed tar: the kernel copies it (th_stream
 * calls this only when it holds no input of its own), as cat does.
 */
static int direct_pass(void *arg, uint64_t n)
{
	struct run *r = arg;
	struct fdout *o = &r->out;
	int err = fdout_flush(o);

	while (!err && n) {
		size_t k = n < (1u << 30) ? (size_t)n : (1u << 30);
		ssize_t c = kcopy(r, k);

		if (c < 0 && errno == EINTR)
			continue;
		if (c < 0)
			return -errno;
		if (c == 0)
			return -ENODATA;
		if (r->kcopy != KCOPY_BUFFER)
			fdout_count(o, (uint64_t)c);
		n -= (uint64_t)c;
	}
	return err;
}

/* File data when nothing is written (check pass, dry run): skipped. */
static int direct_skip(void *arg, uint64_t n)
{
	struct run *r = arg;
	off_t pos = lseek(r->in_fd, 0, SEEK_CUR);

	if (pos < 0)
		return -errno;
	if ((uint64_t)r->in_size - (uint64_t)pos < n)
		return -ENODATA;
	if (lseek(r->in_fd, (off_t)n, SEEK_CUR) < 0)
		return -errno;
	return 0;
}

/* Compressed input: the first block again, then the fd (gzin_fill_fn). */
static ssize_t packed_read(void *arg, const unsigned char **p)
{
	struct run *r = arg;

	if (!r->head_sent) {
		r->head_sent = true;
		*p = r->head;
		return (ssize_t)r->head_len;
	}
	*p = r->rbuf;
	return read_some(r->in_fd, r->rbuf, IN_BLOCK);
}

/* libarchive's input, the same bytes. */
static la_ssize_t la_read(struct archive *a, void *arg, const void **p)
{
	const unsigned char *b;
	ssize_t n = packed_read(arg, &b);

	if (n < 0) {
		archive_set_error(a, (int)-n, "read error: %s", strerror((int)-n));
		return -1;
	}
	*p = b;
	return n;
}

/* Inflated input for th_stream, every member's CRC-32 and size checked. */
static ssize_t gz_read(void *arg, const unsigned char **p)
{
	struct run *r = arg;
	ssize_t n;

	if (r->gz_tap) {
		run_progress(r, gztap_offset(r->gz_tap));
		n = gztap_read(r->gz_tap, p);
		if (n < 0)
			snprintf(r->rerr, sizeof(r->rerr), "%s", gztap_error(r->gz_tap));
		return n;
	}
	run_progress(r, gzin_offset(r->gz_in));
	n = gzin_read(r->gz_in, p);
	if (n < 0)
		snprintf(r->rerr, sizeof(r->rerr), "%s", gzin_error(r->gz_in));
	return n;
}

/* Sets up the gzip reader; the first block is still to be inflated. */
static int gz_open(struct run *r)
{
	if (r->reuse)
		r->gz_tap = gztap_new(packed_read, r, &r->matches);
	else
		r->gz_in = gzin_new(packed_read, r);
	if (!r->gz_in && !r->gz_tap)
		return si_error(r->h, ENOMEM, "%s: out of memory", r->path);
	r->code = ARCHIVE_FILTER_GZIP;
	return 0;
}

static ssize_t run_read(void *arg, const unsigned char **p)
{
	struct run *r = arg;
	const void *buf;
	size_t size;
	la_int64_t off;
	int ret;

	run_progress(r, (uint64_t)archive_filter_bytes(r->in, -1));
	do {
		ret = archive_read_data_block(r->in, &buf, &size, &off);
	} while (ret == ARCHIVE_OK && size == 0);
	if (ret == ARCHIVE_EOF)
		return 0;
	if (ret != ARCHIVE_OK && ret != ARCHIVE_WARN) {
		snprintf(r->rerr, sizeof(r->rerr), "%s",
			 archive_error_string(r->in) ?: "read error");
		return -EIO;
	}
	*p = buf;
	return (ssize_t)size;
}

static int run_write(void *arg, const void *p, size_t len)
{
	struct run *r = arg;

	if (r->md_tar)
		EVP_DigestUpdate(r->md_tar, p, len);
	/* The rewriter's "no place in the input" is gzreuse's. */
	_Static_assert(TH_SRC_NEW == GZ_SRC_NEW, "two names for new bytes");
	if (r->gzr)
		return gzreuse_write(r->gzr, p, len, r->th.src, r->th.src_same);
	if (r->gz)
		return gzpar_write(r->gz, p, len);
	if (r->pipe_open)
		return apipe_write(&r->pipe, p, len);
	return fdout_write(&r->out, p, len);
}

static int null_write(void *arg, const void *p, size_t len)
{
	return 0;
}

static void run_list(void *arg, const char *path, const char *what)
{
	struct run *r = arg;

	si_list(r->h, path, what);
}

/* A tar header or an end-of-archive block? */
static bool block_is_tar(const unsigned char *blk)
{
	for (size_t i = 0; i < TH_BLOCK; i++)
		if (blk[i])
			return th_cksum_ok(blk);
	return true;
}

/*
 * Decides who decodes the input: an uncompressed tar (its first block
 * is a tar header) is read directly, anything else goes to libarchive,
 * which names the compression (r->code).
 */
static int open_input(struct run *r, int fd)
{
	size_t len = IN_BLOCK + OUT_STAGE;
	struct archive_entry *e;
	const char *why;
	ssize_t n;
	int ret;

	r->in_fd = fd;
	/* The output's staging buffer lives past the input's, in one allocation. */
	r->rbuf = si_alloc_big(&len);
	if (!r->rbuf)
		return si_error(r->h, ENOMEM, "%s: out of memory", r->path);
	n = read_head(r);
	if (n < 0)
		return si_error(r->h, (int)-n, "%s: read error at offset 0: %s",
				r->path, strerror((int)-n));
	if (!r->head_len)
		return si_error(r->h, EBADMSG, "%s: empty input", r->path);
	if (r->head_len >= TH_BLOCK && block_is_tar(r->head)) {
		r->direct = true;
		r->code = ARCHIVE_FILTER_NONE;
		return 0;
	}
	if (r->head_len >= 3 && !memcmp(r->head, "\x1f\x8b\x08", 3))
		return gz_open(r);
	if ((why = si_tarlib_load(SI_LIBARCHIVE)))
		return si_error(r->h, ENOTSUP, "%s: not an uncompressed or gzip tar, and %s",
				r->path, why);
	r->in = archive_read_new();
	if (!r->in)
		return si_error(r->h, ENOMEM, "%s: out of memory", r->path);
	archive_read_support_filter_all(r->in);
	archive_read_support_format_raw(r->in);
	if (archive_read_open(r->in, r, NULL, la_read, NULL) != ARCHIVE_OK)
		goto out_err;
	ret = archive_read_next_header(r->in, &e);
	if (ret == ARCHIVE_EOF)
		return si_error(r->h, EBADMSG, "%s: empty input", r->path);
	if (ret != ARCHIVE_OK)
		goto out_err;
	if (archive_filter_count(r->in) > 2)
		return si_error(r->h, ENOTSUP, "%s: nested compression (%s over %s)",
				r->path, archive_filter_name(r->in, 0),
				archive_filter_name(r->in, 1));
	r->code = archive_filter_code(r->in, 0);
	switch (r->code) {
	case ARCHIVE_FILTER_NONE: case ARCHIVE_FILTER_GZIP:
	case ARCHIVE_FILTER_BZIP2: case ARCHIVE_FILTER_XZ:
	case ARCHIVE_FILTER_ZSTD: case ARCHIVE_FILTER_LZ4:
		return 0;
	}
	return si_error(r->h, ENOTSUP, "%s: %s compression is not supported",
			r->path, archive_filter_name(r->in, 0));
out_err:
	return si_error(r->h, EBADMSG, "%s: header at offset 0: %s", r->path,
			archive_error_string(r->in) ?: "cannot read");
}

/* Each tool's own default level, so the output is what users expect. */
static int default_level(int code)
{
	switch (code) {
	case ARCHIVE_FILTER_GZIP: return 6;
	case ARCHIVE_FILTER_BZIP2: return 9;
	case ARCHIVE_FILTER_XZ: return 6;
	case ARCHIVE_FILTER_ZSTD: return 3;
	case ARCHIVE_FILTER_LZ4: return 1;
	}
	return 0;
}

static int parse_options(struct run *r)
{
	const char *lv = si_option(r->h, "level"), *names = si_option(r->h, "names");
	char *end;
	long v;

	r->level = default_level(r->code);
	if (lv) {
		int max = r->code == ARCHIVE_FILTER_ZSTD ? 19 : 9;

		errno = 0;
		v = strtol(lv, &end, 10);
		if (errno || *end || end == lv || v < 1 || v > max)
			return si_error(r->h, EINVAL, "%s: level \"%s\" is not 1 to %d",
					r->path, lv, max);
		r->level = (int)v;
	}
	r->th.keep_names = r->h->flags & SHIFTIMG_NAMES_KEEP;
	if (names && !strcmp(names, "keep"))
		r->th.keep_names = true;
	else if (names && !strcmp(names, "clear"))
		r->th.keep_names = false;
	else if (names)
		return si_error(r->h, EINVAL, "%s: names \"%s\" is not keep or clear",
				r->path, names);
	r->digest = r->h->flags & SHIFTIMG_DIGEST;
	return 0;
}

/* Sets up the compressor matching the input, writing to r->out. */
static int open_output(struct run *r, int fd)
{
	const char *why;
	int err;

	r->out.fd = fd;
	r->out.flush_behind = r->fsync_out;
	r->out.stage = r->rbuf + IN_BLOCK;
	if (r->direct) {
		r->out.ref_lo = r->rbuf;
		r->out.ref_hi = r->rbuf + IN_BLOCK;
	}
	if (r->digest) {
		if ((why = si_tarlib_load(SI_LIBCRYPTO)))
			return si_error(r->h, ENOTSUP, "%s: no sha256: %s", r->path, why);
		/* Uncompressed, the file is the tar: one digest serves both. */
		if (r->code != ARCHIVE_FILTER_NONE)
			r->out.md = digest_new();
		r->md_tar = digest_new();
		if ((!r->out.md && r->code != ARCHIVE_FILTER_NONE) || !r->md_tar)
			return si_error(r->h, ENOMEM, "%s: no sha256", r->path);
	}
	if (r->gz_tap) {
		r->gzr = gzreuse_new(&r->matches, fdout_write, &r->out);
		if (!r->gzr)
			return si_error(r->h, ENOMEM, "%s: out of memory", r->path);
	} else if (r->code == ARCHIVE_FILTER_GZIP) {
		r->gz = gzpar_new(r->level, si_threads(r->h), fdout_write, &r->out);
		if (!r->gz)
			return si_error(r->h, ENOMEM, "%s: cannot start gzip threads", r->path);
	} else if (r->code != ARCHIVE_FILTER_NONE) {
		err = apipe_open(&r->pipe, r->code, r->level, &r->out);
		r->pipe_open = true;
		if (err)
			return si_error(r->h, -err, "%s: %s compressor: %s", r->path,
					archive_filter_name(r->in, 0), r->pipe.msg[0] ? r->pipe.msg : strerror(-err));
	}
	return 0;
}

static int close_output(struct run *r)
{
	int err = 0;

	if (r->gzr)
		err = gzreuse_finish(r->gzr);
	else if (r->gz)
		err = gzpar_finish(r->gz);
	else if (r->pipe_open)
		err = apipe_close(&r->pipe);
	if (!err)
		err = fdout_flush(&r->out);
	if (err)
		return si_error(r->h, -err, "%s: writing the output: %s", r->path,
				r->pipe.msg[0] ? r->pipe.msg : strerror(-err));
	return 0;
}

static void run_free(struct run *r)
{
	gzpar_free(r->gz);
	if (r->pipe_open)
		apipe_free(&r->pipe);
	if (r->in)
		archive_read_free(r->in);
	gzin_free(r->gz_in);
	gzreuse_free(r->gzr);
	gztap_free(r->gz_tap);
	gz_matches_free(&r->matches);
	EVP_MD_CTX_free(r->md_tar);
	EVP_MD_CTX_free(r->out.md);
	free(r->rbuf);
	th_ctx_free(&r->th);
}

/* Streams input fd to output fd (-1: count only). */
static int run_stream(struct run *r, int in_fd, int out_fd)
{
	int err;

	r->th.rules = &r->h->rules;
	r->th.tally = &r->h->tally;
	r->th.read = run_read;
	r->th.io_arg = r;
	if ((r->h->flags & SHIFTIMG_DRY_RUN) || r->h->list_fn) {
		r->th.list = run_list;
		r->th.list_arg = r;
	}
	/* A level asks for gzip made anew; a dry run writes nothing. */
	r->reuse = out_fd >= 0 && !si_option(r->h, "level");
	err = open_input(r, in_fd);
	err = err ?: parse_options(r);
	if (err)
		return err;
	if (r->direct)
		r->th.read = direct_read;
	else if (r->gz_in || r->gz_tap)
		r->th.read = gz_read;
	if (out_fd < 0) {
		struct stat st;

		r->th.write = null_write;
		if (r->direct && fstat(in_fd, &st) == 0 && S_ISREG(st.st_mode)) {
			r->in_size = st.st_size;
			r->th.pass = direct_skip;
		}
	} else {
		r->th.write = run_write;
		r->th.stop_on_unmapped = r->h->rules.unmapped == SHIFTIMG_UNMAPPED_FAIL;
		r->th.stop_on_privileged = si_check_privileged(r->h);
		err = open_output(r, out_fd);
		if (err)
			return err;
		/* The digests need every byte here; otherwise the kernel copies. */
		if (r->direct && !r->digest)
			r->th.pass = direct_pass;
	}
	err = th_stream(&r->th);
	/* A write failure may surface in a read callback (which flushes). */
	if (err && r->out.err)
		return si_error(r->h, -r->out.err, "%s: writing the output at offset %llu: %s",
				r->path, (unsigned long long)r->out.bytes,
				strerror(-r->out.err));
	if (err == -EIO && r->rerr[0] && r->th.err[0])
		return si_error(r->h, EIO, "%s: %s (%s)", r->path, r->th.err, r->rerr);
	if (err == -EOVERFLOW && r->th.unmapped && out_fd == STDOUT_FILENO)
		return si_error(r->h, ERANGE,
				"%s: %llu entries hold ids the map does not cover; the output stops before the first of them (see --unmapped)",
				r->path, (unsigned long long)r->h->tally.st.unmapped);
	if (err == -EOVERFLOW && r->th.unmapped)
		return si_unmapped_refuse(r->h, r->path);
	if (err == -EPERM && r->th.privileged && out_fd == STDOUT_FILENO)
		return si_error(r->h, EPERM,
				"%s: %llu entries would grant real root after the shift (setuid or setgid root, or root file capabilities); the output stops before the first of them (see --allow-privileged)",
				r->path, (unsigned long long)r->h->tally.privileged);
	if (err == -EPERM && r->th.privileged)
		return si_privileged_refuse(r->h, r->path);
	if (err)
		return si_error(r->h, -err, "%s: %s", r->path, r->th.err);
	if (out_fd >= 0) {
		err = close_output(r);
		if (err)
			return err;
	}
	if (r->digest) {
		char *o = r->h->digest_output, *d = r->h->digest_diff_id;

		digest_hex(r->md_tar, d);
		if (r->out.md)
			digest_hex(r->out.md, o);
		else
			strcpy(o, d);
	}
	return 0;
}

/* ---- the target: in place, -o OUT, or stdin to stdout ---- */

static int dir_of(const char *path, char *dir, size_t len)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		return snprintf(dir, len, ".") >= (int)len ? -1 : 0;
	if (slash == path)
		return snprintf(dir, len, "/") >= (int)len ? -1 : 0;
	return snprintf(dir, len, "%.*s", (int)(slash - path), path) >= (int)len ? -1 : 0;
}

/* Makes the file durable under its final name. */
static int commit(struct run *r, int fd, const char *tmp, const char *dest,
		  const char *dir)
{
	int dfd;

	if (fsync(fd) < 0)
		return si_error(r->h, errno, "%s: fsync: %s", tmp, strerror(errno));
	if (rename(tmp, dest) < 0)
		return si_error(r->h, errno, "%s: rename to %s: %s", tmp, dest,
				strerror(errno));
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	return 0;
}

static int apply_file(struct run *r, const struct si_target *t, const char *dest)
{
	char dir[PATH_MAX], tmp[PATH_MAX + 32];
	const char *base;
	int fd, err;

	if (dir_of(dest, dir, sizeof(dir)) < 0)
		return si_error(r->h, ENAMETOOLONG, "%s: name too long", dest);
	base = strrchr(dest, '/') ? strrchr(dest, '/') + 1 : dest;
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s/.%s.shiftimg-XXXXXX", dir,
			     base) >= sizeof(tmp))
		return si_error(r->h, ENAMETOOLONG, "%s: name too long", dest);
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return si_error(r->h, errno, "%s: cannot create a temporary file: %s",
				tmp, strerror(errno));
	/* The new file keeps the old one's mode and, when we may, its owner. */
	if (fchmod(fd, t->st.st_mode & 07777) < 0) {
		err = si_error(r->h, errno, "%s: chmod: %s", tmp, strerror(errno));
		goto out_unlink;
	}
	if (fchown(fd, t->st.st_uid, t->st.st_gid) < 0 && errno != EPERM) {
		err = si_error(r->h, errno, "%s: chown: %s", tmp, strerror(errno));
		goto out_unlink;
	}
	r->fsync_out = true;
	err = run_stream(r, t->fd, fd);
	if (!err)
		err = commit(r, fd, tmp, dest, dir);
	if (err)
		goto out_unlink;
	close(fd);
	return 0;
out_unlink:
	unlink(tmp);
	close(fd);
	return err;
}

static int tar_shift(struct shiftimg *h, const struct si_target *t,
		     enum si_pass pass)
{
	struct run r = { .h = h, .path = t->path, .next_progress = 0 };
	const char *out = si_option(h, "output");
	int in_fd = t->fd < 0 ? STDIN_FILENO : t->fd;
	int err;

	if (t->fd >= 0) {
		lseek(t->fd, 0, SEEK_SET);
		r.in_total = (uint64_t)t->st.st_size;
	}
	if (pass == SI_PASS_CHECK || (h->flags & SHIFTIMG_DRY_RUN))
		err = run_stream(&r, in_fd, -1);
	else if (t->fd < 0 || (out && !strcmp(out, "-")))
		err = run_stream(&r, in_fd, STDOUT_FILENO);
	else
		err = apply_file(&r, t, out ? out : t->path);
	run_free(&r);
	return err;
}

/* ---- probe ---- */

struct probe_src {
	int fd;
	off_t off;
	unsigned char buf[64 << 10];
};

static la_ssize_t probe_read(struct archive *a, void *arg, const void **p)
{
	struct probe_src *s = arg;
	ssize_t n = pread(s->fd, s->buf, sizeof(s->buf), s->off);

	if (n < 0)
		return -1;
	s->off += n;
	*p = s->buf;
	return n;
}

/* Do the n bytes b start with the magic of a compression the backend handles? */
static bool compressed_magic(const unsigned char *b, ssize_t n)
{
	static const struct { const char *m; size_t n; } magic[] = {
		{ "\x1f\x8b", 2 }, { "BZh", 3 }, { "\xfd" "7zXZ\0", 6 },
		{ "\x28\xb5\x2f\xfd", 4 }, { "\x04\x22\x4d\x18", 4 },
	};

	for (size_t i = 0; n > 0 && i < sizeof(magic) / sizeof(magic[0]); i++)
		if ((size_t)n >= magic[i].n && !memcmp(b, magic[i].m, magic[i].n))
			return true;
	return false;
}

/*
 * Is the first block (after any decompression) a tar header?  A file
 * in one of the compressions we handle is ours whatever it holds, so
 * that the error says what is wrong with it (a damaged stream, no tar
 * inside); libarchive names the other compressions, which the shift
 * then refuses by name.
 */
static bool tar_probe(const struct si_target *t)
{
	struct probe_src *s;
	struct archive *a;
	struct archive_entry *e;
	unsigned char blk[TH_BLOCK];
	la_ssize_t n;
	bool ok = false;

	if (t->fd < 0)
		return true;
	if (!S_ISREG(t->st.st_mode))
		return false;
	n = pread(t->fd, blk, TH_BLOCK, 0);
	if (compressed_magic(blk, n) || (n == TH_BLOCK && block_is_tar(blk)))
		return true;
	/* Another compression, which only libarchive can name. */
	if (si_tarlib_load(SI_LIBARCHIVE))
		return false;
	s = calloc(1, sizeof(*s));
	a = archive_read_new();
	if (!s || !a)
		goto out;
	s->fd = t->fd;
	archive_read_support_filter_all(a);
	archive_read_support_format_raw(a);
	if (archive_read_open(a, s, NULL, probe_read, NULL) != ARCHIVE_OK ||
	    archive_read_next_header(a, &e) != ARCHIVE_OK)
		goto out;
	n = archive_read_data(a, blk, sizeof(blk));
	ok = n == TH_BLOCK && block_is_tar(blk);
out:
	if (a)
		archive_read_free(a);
	free(s);
	return ok;
}

const struct si_backend si_tar_backend = {
	.name = "tar",
	.flags = SI_BACKEND_ATOMIC,
	.options = tar_options,
	.probe = tar_probe,
	.shift = tar_shift,
};
