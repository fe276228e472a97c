/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The tar stream rewriter: reads an uncompressed tar stream block by
 * block and writes it back with only the bytes a shift must change
 * (uid/gid fields, the pax records carrying ids, names when cleared,
 * checksums, pax lengths and sizes).  Everything else, file data and
 * trailer padding included, is copied verbatim.  No I/O of its own:
 * input and output are callbacks, so it runs on plain buffers too.
 */
#ifndef SHIFTIMG_TARHDR_H
#define SHIFTIMG_TARHDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "rules.h"

#define TH_BLOCK	512
#define TH_SRC_NEW	UINT64_MAX

/*
 * The largest pax (x, g) or GNU long name (L, K) content accepted.  A
 * larger one is refused as malformed: real headers are far smaller
 * (an xattr value is at most 64 KiB) and this keeps memory bounded.
 */
#define TH_META_MAX	(1u << 20)

/*
 * The long-name (L, K) headers pending for one entry, together: a later
 * one overrides an earlier one, but all are kept to be copied, so a
 * run of them must not grow without bound.
 */
#define TH_PENDING_MAX	(2 * TH_META_MAX + 4 * TH_BLOCK)

/*
 * Bytes accepted after the end-of-archive blocks (blocking-factor
 * padding, copied verbatim).  More is refused: a stream of zeros there
 * is how a decompression bomb would look.
 */
#define TH_TRAILER_MAX	(1u << 20)

/* A growable byte buffer. */
struct th_buf {
	unsigned char *p;
	size_t len, cap;
};

struct th_ctx {
	/* Set by the caller. */
	const struct si_rules *rules;
	struct si_tally *tally;
	bool keep_names;		/* keep uname/gname of shifted entries */
	bool stop_on_unmapped;		/* --unmapped=fail: stop writing at once */
	/* The privilege rule applies: stop at an entry that would grant root. */
	bool stop_on_privileged;
	/* Next input chunk: > 0 bytes at *p, 0 at the end, < 0 a -errno. */
	ssize_t (*read)(void *arg, const unsigned char **p);
	/* Writes len bytes: 0 or a -errno. */
	int (*write)(void *arg, const void *p, size_t len);
	/*
	 * Optional: copies the next n input bytes straight to the output
	 * (file data, when nothing is buffered here): 0, -ENODATA if the
	 * input ends first, or another -errno.
	 */
	int (*pass)(void *arg, uint64_t n);
	void *io_arg;
	/* Called for each entry that changes (may be NULL). */
	void (*list)(void *arg, const char *path, const char *what);
	void *list_arg;

	/*
	 * During a write(): the input offset the bytes were read from,
	 * changed or not (file data, a header block, the ends of a pax
	 * header around the records that changed), or TH_SRC_NEW for
	 * bytes with no place in the input; src_same if they are the
	 * input's unchanged.  A hint for compressors.
	 */
	uint64_t src;
	bool src_same;
	/* Results. */
	uint64_t in_bytes;		/* tar bytes read */
	uint64_t out_bytes;		/* tar bytes written */
	bool unmapped;			/* stop_on_unmapped fired */
	bool privileged;		/* stop_on_privileged fired */
	char err[512];			/* the reason when th_stream() fails */

	/* Private. */
	const unsigned char *chunk;
	size_t chunk_len;
	bool eof;
	bool discard;
	struct th_buf meta, pax, out, path, link;
	uint64_t entry_off;
};

/*
 * Runs the whole stream.  Returns 0, or a negative errno with c->err
 * naming the entry, its offset and the reason (-EBADMSG for malformed
 * input, -EOVERFLOW when an id cannot be stored, the callbacks' errors
 * as they are).
 */
int th_stream(struct th_ctx *c);
/* Frees the buffers th_stream() grew. */
void th_ctx_free(struct th_ctx *c);

/* ---- pieces, exposed for the unit tests ---- */

/*
 * Reads a numeric header field: octal (optionally space-led, NUL- or
 * space-terminated) or GNU base-256.  Returns 0, or -EBADMSG for bad
 * digits, a negative or out-of-range base-256 value.
 */
int th_num_get(const unsigned char *f, size_t w, uint64_t *v);
/* Checks a header's checksum (unsigned or historic signed sum). */
bool th_cksum_ok(const unsigned char *blk);
/* Base64 (standard alphabet) and URL %XX decoding, as pax writers use. */
int th_b64_decode(const char *in, size_t len, struct th_buf *out);
void th_b64_encode(const unsigned char *in, size_t len, bool pad,
		   struct th_buf *out);
int th_buf_add(struct th_buf *b, const void *p, size_t len);
void th_buf_free(struct th_buf *b);

/* A decimal value (uid, gid, size) of at most max; false if it is not one. */
bool th_dec_get(const char *s, size_t len, uint64_t max, uint64_t *v);

/* ---- text ACLs (src/taracl.c) ---- */

/* The entry's own owner and group as its header records them. */
struct th_acl_owner {
	const char *name[2];		/* uname, gname; len 0 if none */
	size_t len[2];
	uint32_t id[2];			/* uid, gid before the shift */
};

struct th_acl_in {
	const struct si_rules *rules;
	bool nfs4, keep_names;
	const char *key;		/* the record's key, for messages */
	const char *text;
	size_t len;
	const void *bin;		/* the binary ACL beside it, or NULL */
	size_t binlen;
	const struct th_acl_owner *owner;	/* or NULL */
};

/*
 * Rewrites a text ACL (SCHILY.acl.access/default, "tag:name:perms[:id]"
 * entries separated by ',' or '\n') or an NFSv4 one (SCHILY.acl.ace,
 * "tag:name:perms:flags:type[:id]") into out.  An entry without a
 * number takes its id from the binary ACL beside it, paired in
 * libacl's order and checked (src/taracl.c); with no binary ACL it is
 * left by name and counted in *named.  Shifted entries get the new
 * number in place of the name unless keep_names.  Returns SI_* bits,
 * -EBADMSG (malformed), -EPROTO (the text and the binary ACL disagree;
 * why says how) or -ENOMEM.
 */
int th_acl_text(const struct th_acl_in *in, struct th_buf *out,
		unsigned int *named, struct si_tally *t, char *why, size_t whylen);

#endif /* SHIFTIMG_TARHDR_H */
