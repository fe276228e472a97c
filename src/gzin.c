// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Streaming gzip input on ISA-L's igzip inflater.
 *
 * Inflating is most of a gzip layer's reading: zlib takes about 1 s of
 * CPU for 200 MB of tar, igzip a quarter of that, and still streams
 * with constant memory (libdeflate is as fast but wants whole members
 * in memory).  igzip parses the gzip header and checks the trailer
 * (CRC-32 and size) itself; what follows a member is judged here.
 */
#include <errno.h>
#include <inttypes.h>
#include <isa-l/igzip_lib.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gzin.h"
#include "shiftimg-int.h"

#define OUT_SIZE	(1u << 20)

struct gzin {
	struct inflate_state s;
	gzin_fill_fn *fill;
	void *arg;
	unsigned char *out;
	size_t out_size;
	uint64_t in_read;		/* compressed bytes taken from fill */
	bool eof, member_end, zeros;
	char msg[160];
};

struct gzin *gzin_new(gzin_fill_fn *fill, void *arg)
{
	struct gzin *g = calloc(1, sizeof(*g));

	if (!g)
		return NULL;
	g->out_size = OUT_SIZE;
	g->out = si_alloc_big(&g->out_size);
	if (!g->out) {
		free(g);
		return NULL;
	}
	g->fill = fill;
	g->arg = arg;
	isal_inflate_init(&g->s);
	g->s.crc_flag = ISAL_GZIP;
	return g;
}

void gzin_free(struct gzin *g)
{
	if (!g)
		return;
	free(g->out);
	free(g);
}

const char *gzin_error(const struct gzin *g)
{
	return g->msg;
}

/* Bytes igzip holds in its bit buffer are not read yet, for messages. */
uint64_t gzin_offset(const struct gzin *g)
{
	uint64_t held = g->s.avail_in + (uint64_t)(g->s.read_in_length / 8);

	return g->in_read > held ? g->in_read - held : 0;
}

static int bad(struct gzin *g, const char *why)
{
	snprintf(g->msg, sizeof(g->msg), "gzip: %s at compressed offset %" PRIu64,
		 why, gzin_offset(g));
	return -EIO;
}

static int fill(struct gzin *g)
{
	const unsigned char *p;
	ssize_t n;

	if (g->s.avail_in || g->eof)
		return 0;
	n = g->fill(g->arg, &p);
	if (n < 0) {
		snprintf(g->msg, sizeof(g->msg), "%s", strerror((int)-n));
		return (int)n;
	}
	g->eof = n == 0;
	/* Inflating neither writes nor keeps the input once taken. */
	g->s.next_in = (uint8_t *)p;
	g->s.avail_in = (uint32_t)n;
	g->in_read += (uint64_t)n;
	return 0;
}

/*
 * Between two members: another member, or zeros to the end; anything
 * else is refused rather than dropped silently.  1 at the end.
 */
static int next_member(struct gzin *g)
{
	int err;

	for (;;) {
		err = fill(g);
		if (err)
			return err;
		if (!g->s.avail_in)
			return 1;
		if (!g->zeros && *g->s.next_in == 0x1f) {
			uint8_t *next = g->s.next_in;
			uint32_t avail = g->s.avail_in;

			isal_inflate_reset(&g->s);
			g->s.crc_flag = ISAL_GZIP;
			g->s.next_in = next;
			g->s.avail_in = avail;
			g->member_end = false;
			return 0;
		}
		while (g->s.avail_in && *g->s.next_in == 0) {
			g->s.next_in++;
			g->s.avail_in--;
		}
		if (g->s.avail_in)
			return bad(g, g->zeros ? "data after the trailing zeros" :
				   "data that is not gzip");
		g->zeros = true;
	}
}

static const char *why(int ret)
{
	switch (ret) {
	case ISAL_INVALID_WRAPPER:
		return "not a gzip header";
	case ISAL_UNSUPPORTED_METHOD:
		return "unknown compression method";
	case ISAL_INCORRECT_CHECKSUM:
		return "incorrect data check (CRC-32 or length)";
	case ISAL_INVALID_LOOKBACK:
		return "invalid distance too far back";
	case ISAL_INVALID_SYMBOL:
		return "invalid code";
	default:
		return "invalid deflate block";
	}
}

ssize_t gzin_read(struct gzin *g, const unsigned char **p)
{
	size_t made;
	int ret, err;

	for (;;) {
		if (g->member_end) {
			err = next_member(g);
			if (err)
				return err < 0 ? err : 0;
		}
		err = fill(g);
		if (err)
			return err;
		g->s.next_out = g->out;
		g->s.avail_out = (uint32_t)g->out_size;
		ret = isal_inflate(&g->s);
		if (ret < 0)
			return bad(g, why(ret));
		made = g->out_size - g->s.avail_out;
		if (g->s.block_state == ISAL_BLOCK_FINISH)
			g->member_end = true;
		else if (!made && !g->s.avail_in && g->eof)
			return bad(g, "unexpected end of stream");
		if (made) {
			*p = g->out;
			return (ssize_t)made;
		}
	}
}
