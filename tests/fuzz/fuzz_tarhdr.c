// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The tar stream rewriter on hostile streams, fed in chunks of a size
 * the first byte picks so that headers, pax records and long names
 * straddle reads.  Checked: the byte counts agree with what was written
 * (until --unmapped=fail or the privilege rule stops the writes), a run
 * that met an entry granting root with the rule on fails, and with a
 * map that changes nothing the output is the input.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tarhdr.h"

struct mem {
	const unsigned char *p;
	size_t len, off, step;
	struct th_buf out;
};

static ssize_t mem_read(void *arg, const unsigned char **p)
{
	struct mem *m = arg;
	size_t n = m->len - m->off < m->step ? m->len - m->off : m->step;

	*p = m->p + m->off;
	m->off += n;
	return (ssize_t)n;
}

static int mem_write(void *arg, const void *p, size_t len)
{
	struct mem *m = arg;

	/* Bounded, like a disk that fills up: the error must come back. */
	if (m->out.len + len > 64u << 20)
		return -28;	/* ENOSPC */
	return th_buf_add(&m->out, p, len);
}

static void list(void *arg, const char *path, const char *what)
{
	if (!path || !what)
		abort();
}

static void make_rules(struct si_rules *r, unsigned int mode)
{
	struct si_idmap m = { 0 };
	char err[128];
	int k;

	memset(r, 0, sizeof(*r));
	if (mode == 0) {
		si_idmap_add(&m, 0, 0, (uint64_t)SI_ID_MAX + 1, err, sizeof(err));
	} else {
		si_idmap_add(&m, 0, 100000, 65536, err, sizeof(err));
		si_idmap_add(&m, 3000000, 100, 1000, err, sizeof(err));
		/* Large ids, so that octal and base-256 fields must grow. */
		si_idmap_add(&m, 70000, 4000000000u, 1000, err, sizeof(err));
	}
	for (k = 0; k < 2; k++) {
		if (mode == 2)
			si_idmap_invert(&m, &r->map[k]);
		else
			r->map[k] = m;
	}
	r->unmapped = SHIFTIMG_UNMAPPED_KEEP;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const size_t steps[8] = { 1, 7, 100, 511, 512, 513, 4096, 1 << 20 };
	struct th_ctx c = { 0 };
	struct si_rules r;
	struct si_tally t;
	struct mem m = { 0 };
	unsigned int mode;
	int ret;

	if (size < 1)
		return 0;
	mode = (data[0] >> 3) % 3;
	make_rules(&r, mode);
	si_tally_init(&t);
	m.p = data + 1;
	m.len = size - 1;
	m.step = steps[data[0] & 7];
	c.rules = &r;
	c.tally = &t;
	c.keep_names = data[0] & 0x20;
	c.stop_on_unmapped = data[0] & 0x40;
	c.stop_on_privileged = data[0] & 0x40;
	c.read = mem_read;
	c.write = mem_write;
	c.io_arg = &m;
	if (data[0] & 0x80)
		c.list = list;
	ret = th_stream(&c);
	/* Once a stop fires, bytes are counted but not written. */
	if ((!c.unmapped && !c.privileged && c.out_bytes != m.out.len) ||
	    c.in_bytes > m.len)
		abort();
	if (c.privileged != (c.stop_on_privileged && t.privileged > 0) ||
	    (c.privileged && ret == 0))
		abort();
	if (ret < 0 && !memchr(c.err, '\0', sizeof(c.err)))
		abort();
	/* Nothing to shift: not one byte may differ. */
	if (ret == 0 && mode == 0 &&
	    (m.out.len != c.in_bytes || memcmp(m.out.p, m.p, m.out.len)))
		abort();
	th_ctx_free(&c);
	th_buf_free(&m.out);
	si_tally_free(&t);
	return 0;
}
