/* SPDX-License-Identifier: GPL-2.0-only */
/* Shared by the in-VM test programs: checks, text buffers, namespaces. */
#ifndef VMTEST_H
#define VMTEST_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* The map every test container uses: inside 0..65535 is 100000.. out. */
#define VT_MAP_INSIDE	0u
#define VT_MAP_OUTSIDE	100000u
#define VT_MAP_COUNT	65536u

extern int vt_failures;

/* Prints "ok - ..." or "not ok - ..." and counts failures. */
bool vt_check(bool ok, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Fatal setup error: the suite cannot go on. */
void vt_die(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));

struct vt_buf {
	char *s;
	size_t len, cap;
};

void vt_printf(struct vt_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void vt_buf_free(struct vt_buf *b);
/* Logs "what: 0" or "what: EPERM" and returns rc unchanged. */
int vt_log_rc(struct vt_buf *b, const char *what, int rc);

/* Writes and reads whole small files. */
int vt_write_file(const char *path, const char *data, size_t len);
char *vt_read_file(const char *path, size_t *len);
bool vt_file_is(const char *path, const char *want);

/*
 * Runs fn(arg) in a child inside a new user namespace with the test map
 * (as its root, with a private mount namespace created after the user
 * namespace, so the child may mount).  before_go, if set, runs in the
 * parent once the namespace exists (it gets the userns fd), before the
 * child goes on.  Returns the child's exit status (0 = fine).
 */
int vt_in_userns(int (*fn)(void *), void *arg,
		 int (*before_go)(int userns_fd, void *), void *parg);

/* The same, staying in the parent's mount namespace (not owned by it). */
#define VT_KEEP_MNTNS	(1u << 0)
int vt_in_userns_flags(unsigned int flags, int (*fn)(void *), void *arg,
		       int (*before_go)(int userns_fd, void *), void *parg);

/* Forks, switches to uid/gid (in the current namespace), runs fn. */
int vt_as_user(uid_t uid, gid_t gid, int (*fn)(void *), void *arg);

/* Lists a tree: one sorted line per object, ids as this process sees. */
#define VT_LIST_NO_USER_XATTR	(1u << 0)
/* Reads ACLs with a 4096-byte buffer too; prints "bigbuf-mismatch". */
#define VT_LIST_BIGBUF		(1u << 1)
char *vt_list_tree(const char *root, unsigned int flags);
/* Compares two texts, printing the first differing lines. */
bool vt_same_text(const char *what, const char *a, const char *b);

#endif /* VMTEST_H */
