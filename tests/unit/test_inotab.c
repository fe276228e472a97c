// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The judgement on a raw ext4 inode (src/inotab.c): which inodes the
 * walk may leave unlisted.  A wrong "plain" loses an id, so every field
 * that must match, every xattr kind and every malformed entry is here.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "inotab.h"
#include "le.h"

#define ISIZE	256
#define EXTRA	32			/* i_extra_isize */
#define BODY	(128 + EXTRA)		/* in-inode xattrs start here */

/* A regular file 0644, owned by 70000:70001, ctime 1700000000.123456789. */
static void inode(unsigned char *raw, struct statx *sx)
{
	memset(raw, 0, ISIZE);
	put16(raw, S_IFREG | 0644);
	put16(raw + 0x02, 70000 & 0xffff);
	put16(raw + 0x78, 70000 >> 16);
	put16(raw + 0x18, 70001 & 0xffff);
	put16(raw + 0x7a, 70001 >> 16);
	put32(raw + 0x0c, 1700000000);
	put16(raw + 0x80, EXTRA);
	put32(raw + 0x84, 123456789u << 2);
	memset(sx, 0, sizeof(*sx));
	sx->stx_mask = STATX_BASIC_STATS;
	sx->stx_mode = S_IFREG | 0644;
	sx->stx_uid = 70000;
	sx->stx_gid = 70001;
	sx->stx_ctime.tv_sec = 1700000000;
	sx->stx_ctime.tv_nsec = 123456789;
}

/* Appends an in-inode entry; returns the offset after it. */
static size_t entry(unsigned char *raw, size_t off, unsigned int index,
		    const char *name)
{
	size_t len = strlen(name);

	if (off == BODY) {
		put32(raw + off, 0xEA020000u);
		off += 4;
	}
	raw[off] = (unsigned char)len;
	raw[off + 1] = (unsigned char)index;
	put32(raw + off + 8, 1);	/* e_value_size */
	memcpy(raw + off + 16, name, len);
	return off + ((16 + len + 3) & ~(size_t)3);
}

static bool plain_with(unsigned int index, const char *name)
{
	unsigned char raw[ISIZE];
	struct statx sx;

	inode(raw, &sx);
	entry(raw, BODY, index, name);
	return si_inotab_raw_plain(raw, ISIZE, &sx);
}

static void test_no_xattrs(void **state)
{
	unsigned char raw[ISIZE];
	struct statx sx;

	(void)state;
	inode(raw, &sx);
	assert_true(si_inotab_raw_plain(raw, ISIZE, &sx));
	/* A header with no entry after it. */
	put32(raw + BODY, 0xEA020000u);
	assert_true(si_inotab_raw_plain(raw, ISIZE, &sx));
}

/* Anything that differs from what statx saw: the entry may be stale. */
static void test_must_match(void **state)
{
	unsigned char raw[ISIZE];
	struct statx sx;

	(void)state;
	inode(raw, &sx);
	sx.stx_ctime.tv_nsec++;
	assert_false(si_inotab_raw_plain(raw, ISIZE, &sx));
	inode(raw, &sx);
	sx.stx_ctime.tv_sec++;
	assert_false(si_inotab_raw_plain(raw, ISIZE, &sx));
	inode(raw, &sx);
	put32(raw + 0x84, 123456789u << 2 | 1);	/* an epoch past 2038 */
	assert_false(si_inotab_raw_plain(raw, ISIZE, &sx));
	sx.stx_ctime.tv_sec += 1ll << 32;
	assert_true(si_inotab_raw_plain(raw, ISIZE, &sx));
	inode(raw, &sx);
	sx.stx_uid = 70000 & 0xffff;		/* the high half matters */
	assert_false(si_inotab_raw_plain(raw, ISIZE, &sx));
	inode(raw, &sx);
	sx.stx_gid = 1;
	assert_false(si_inotab_raw_plain(raw, ISIZE, &sx));
	inode(raw, &sx);
	sx.stx_mode = S_IFREG | 04644;
	assert_false(si_inotab_raw_plain(raw, ISIZE, &sx));
	inode(raw, &sx);
	sx.stx_mask &= ~STATX_CTIME;
	assert_false(si_inotab_raw_plain(raw, ISIZE, &sx));
}

static void test_xattr_block(void **state)
{
	unsigned char raw[ISIZE];
	struct statx sx;

	(void)state;
	inode(raw, &sx);
	put32(raw + 0x68, 1234);
	assert_false(si_inotab_raw_plain(raw, ISIZE, &sx));
	inode(raw, &sx);
	put16(raw + 0x76, 1);			/* i_file_acl_high */
	assert_false(si_inotab_raw_plain(raw, ISIZE, &sx));
}

static void test_kinds(void **state)
{
	(void)state;
	assert_true(plain_with(1, "note"));
	assert_true(plain_with(1, "containers.override_sta"));
	assert_false(plain_with(1, "containers.override_stat"));
	assert_false(plain_with(2, ""));	/* system.posix_acl_access */
	assert_false(plain_with(3, ""));	/* system.posix_acl_default */
	assert_true(plain_with(4, "overlay.origin"));
	assert_true(plain_with(6, "selinux"));
	assert_true(plain_with(6, "capabilit"));
	assert_false(plain_with(6, "capability"));
	assert_true(plain_with(7, "data"));	/* inline data */
	assert_true(plain_with(9, "c"));	/* encryption context */
	assert_false(plain_with(0, "x"));
	assert_false(plain_with(5, "lma"));
	assert_false(plain_with(8, "richacl"));
}

/* Plain entries before one that is not: the walk must look at them all. */
static void test_later_entry(void **state)
{
	unsigned char raw[ISIZE];
	struct statx sx;
	size_t off;

	(void)state;
	inode(raw, &sx);
	off = entry(raw, BODY, 1, "a");
	off = entry(raw, off, 6, "selinux");
	assert_true(si_inotab_raw_plain(raw, ISIZE, &sx));
	entry(raw, off, 2, "");
	assert_false(si_inotab_raw_plain(raw, ISIZE, &sx));
}

static void test_malformed(void **state)
{
	unsigned char raw[ISIZE];
	struct statx sx;
	size_t off;

	(void)state;
	/* An entry whose name runs past the inode. */
	inode(raw, &sx);
	entry(raw, BODY, 1, "a");
	raw[BODY + 4] = 255;
	assert_false(si_inotab_raw_plain(raw, ISIZE, &sx));
	/* Entries to the last byte, with no end after them. */
	inode(raw, &sx);
	put32(raw + BODY, 0xEA020000u);
	off = BODY + 4;
	while (off + 20 <= ISIZE)
		off = entry(raw, off, 4, "abcd");
	memset(raw + off, 0xff, ISIZE - off);
	assert_false(si_inotab_raw_plain(raw, ISIZE, &sx));
	/* A head cut short by the end of the inode. */
	inode(raw, &sx);
	put32(raw + BODY, 0xEA020000u);
	memset(raw + BODY + 4, 0xff, ISIZE - BODY - 4);
	raw[ISIZE - 8] = 0;
	assert_false(si_inotab_raw_plain(raw, ISIZE, &sx));
	/* i_extra_isize too small for a ctime's nanoseconds, odd, too big. */
	inode(raw, &sx);
	put16(raw + 0x80, 4);
	assert_false(si_inotab_raw_plain(raw, ISIZE, &sx));
	put16(raw + 0x80, 30);
	assert_false(si_inotab_raw_plain(raw, ISIZE, &sx));
	put16(raw + 0x80, ISIZE);
	assert_false(si_inotab_raw_plain(raw, ISIZE, &sx));
	/* 128-byte inodes: no room after the fixed fields. */
	inode(raw, &sx);
	assert_false(si_inotab_raw_plain(raw, 128, &sx));
	/* All the room to the end of the inode: no xattrs there. */
	put16(raw + 0x80, ISIZE - 128);
	assert_true(si_inotab_raw_plain(raw, ISIZE, &sx));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_xattrs),
		cmocka_unit_test(test_must_match),
		cmocka_unit_test(test_xattr_block),
		cmocka_unit_test(test_kinds),
		cmocka_unit_test(test_later_entry),
		cmocka_unit_test(test_malformed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
