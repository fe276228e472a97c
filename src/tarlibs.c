// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The tar backend's libraries, loaded on first use (see tarlibs.h).
 *
 * Each function the backend calls is listed once below, with its
 * prototype as the library's header declares it; the list generates
 * the slot its address is kept in, its dlsym(3) lookup, and a function
 * of the same name that calls through the slot.  The headers are
 * included, so the compiler checks every prototype against them.
 */
#include <archive.h>
#include <archive_entry.h>
#include <dlfcn.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "tarlibs.h"

/* F(library, name, return type, parameters, arguments) */
#define ARCHIVE_FNS(F) \
	F(SI_LIBARCHIVE, archive_read_new, struct archive *, (void), ()) \
	F(SI_LIBARCHIVE, archive_read_free, int, (struct archive *a), (a)) \
	F(SI_LIBARCHIVE, archive_read_support_filter_all, int, (struct archive *a), (a)) \
	F(SI_LIBARCHIVE, archive_read_support_format_raw, int, (struct archive *a), (a)) \
	F(SI_LIBARCHIVE, archive_read_open, int, \
	  (struct archive *a, void *arg, archive_open_callback *o, \
	   archive_read_callback *r, archive_close_callback *c), (a, arg, o, r, c)) \
	F(SI_LIBARCHIVE, archive_read_next_header, int, \
	  (struct archive *a, struct archive_entry **e), (a, e)) \
	F(SI_LIBARCHIVE, archive_read_data, la_ssize_t, \
	  (struct archive *a, void *p, size_t n), (a, p, n)) \
	F(SI_LIBARCHIVE, archive_read_data_block, int, \
	  (struct archive *a, const void **p, size_t *n, la_int64_t *off), (a, p, n, off)) \
	F(SI_LIBARCHIVE, archive_error_string, const char *, (struct archive *a), (a)) \
	F(SI_LIBARCHIVE, archive_filter_bytes, la_int64_t, (struct archive *a, int i), (a, i)) \
	F(SI_LIBARCHIVE, archive_filter_code, int, (struct archive *a, int i), (a, i)) \
	F(SI_LIBARCHIVE, archive_filter_count, int, (struct archive *a), (a)) \
	F(SI_LIBARCHIVE, archive_filter_name, const char *, (struct archive *a, int i), (a, i)) \
	F(SI_LIBARCHIVE, archive_write_new, struct archive *, (void), ()) \
	F(SI_LIBARCHIVE, archive_write_free, int, (struct archive *a), (a)) \
	F(SI_LIBARCHIVE, archive_write_fail, int, (struct archive *a), (a)) \
	F(SI_LIBARCHIVE, archive_write_close, int, (struct archive *a), (a)) \
	F(SI_LIBARCHIVE, archive_write_add_filter, int, (struct archive *a, int code), (a, code)) \
	F(SI_LIBARCHIVE, archive_write_set_format_raw, int, (struct archive *a), (a)) \
	F(SI_LIBARCHIVE, archive_write_set_bytes_in_last_block, int, \
	  (struct archive *a, int n), (a, n)) \
	F(SI_LIBARCHIVE, archive_write_set_filter_option, int, \
	  (struct archive *a, const char *m, const char *o, const char *v), (a, m, o, v)) \
	F(SI_LIBARCHIVE, archive_write_open, int, \
	  (struct archive *a, void *arg, archive_open_callback *o, \
	   archive_write_callback *w, archive_close_callback *c), (a, arg, o, w, c)) \
	F(SI_LIBARCHIVE, archive_write_header, int, \
	  (struct archive *a, struct archive_entry *e), (a, e)) \
	F(SI_LIBARCHIVE, archive_write_data, la_ssize_t, \
	  (struct archive *a, const void *p, size_t n), (a, p, n)) \
	F(SI_LIBARCHIVE, archive_entry_new, struct archive_entry *, (void), ()) \
	F(SI_LIBARCHIVE, archive_read_support_format_tar, int, (struct archive *a), (a)) \
	F(SI_LIBARCHIVE, archive_read_open_fd, int, \
	  (struct archive *a, int fd, size_t bs), (a, fd, bs)) \
	F(SI_LIBARCHIVE, archive_read_data_into_fd, int, (struct archive *a, int fd), (a, fd)) \
	F(SI_LIBARCHIVE, archive_entry_pathname, const char *, (struct archive_entry *e), (e)) \
	F(SI_LIBARCHIVE, archive_entry_filetype, __LA_MODE_T, (struct archive_entry *e), (e)) \
	F(SI_LIBARCHIVE, archive_entry_perm, __LA_MODE_T, (struct archive_entry *e), (e)) \
	F(SI_LIBARCHIVE, archive_entry_mtime, time_t, (struct archive_entry *e), (e)) \
	F(SI_LIBARCHIVE, archive_entry_symlink, const char *, (struct archive_entry *e), (e)) \
	F(SI_LIBARCHIVE, archive_write_set_format_pax_restricted, int, (struct archive *a), (a)) \
	F(SI_LIBARCHIVE, archive_write_open_fd, int, (struct archive *a, int fd), (a, fd))

#define CRYPTO_FNS(F) \
	F(SI_LIBCRYPTO, EVP_MD_CTX_new, EVP_MD_CTX *, (void), ()) \
	F(SI_LIBCRYPTO, EVP_sha256, const EVP_MD *, (void), ()) \
	F(SI_LIBCRYPTO, EVP_DigestInit_ex, int, \
	  (EVP_MD_CTX *c, const EVP_MD *t, ENGINE *e), (c, t, e)) \
	F(SI_LIBCRYPTO, EVP_DigestUpdate, int, \
	  (EVP_MD_CTX *c, const void *p, size_t n), (c, p, n)) \
	F(SI_LIBCRYPTO, EVP_DigestFinal_ex, int, \
	  (EVP_MD_CTX *c, unsigned char *md, unsigned int *n), (c, md, n))

/* F(library, name, parameters, arguments), for functions returning nothing. */
#define VOID_FNS(F) \
	F(SI_LIBARCHIVE, archive_entry_set_filetype, \
	  (struct archive_entry *e, unsigned int t), (e, t)) \
	F(SI_LIBARCHIVE, archive_entry_set_pathname, \
	  (struct archive_entry *e, const char *p), (e, p)) \
	F(SI_LIBARCHIVE, archive_entry_set_size, \
	  (struct archive_entry *e, la_int64_t n), (e, n)) \
	F(SI_LIBARCHIVE, archive_entry_set_perm, \
	  (struct archive_entry *e, __LA_MODE_T m), (e, m)) \
	F(SI_LIBARCHIVE, archive_entry_set_mtime, \
	  (struct archive_entry *e, time_t t, long ns), (e, t, ns)) \
	F(SI_LIBARCHIVE, archive_entry_set_symlink, \
	  (struct archive_entry *e, const char *p), (e, p))

/* F(library, name, type): destructors, NULL a no-op as in the libraries, loaded or not. */
#define FREE_FNS(F) \
	F(SI_LIBARCHIVE, archive_entry_free, struct archive_entry) \
	F(SI_LIBCRYPTO, EVP_MD_CTX_free, EVP_MD_CTX)

/* F(library, name): variadic, forwarded by hand below. */
#define VARIADIC_FNS(F) \
	F(SI_LIBARCHIVE, archive_set_error)

#define ALL_FNS(F) ARCHIVE_FNS(F) CRYPTO_FNS(F) VOID_FNS(F) FREE_FNS(F) VARIADIC_FNS(F)

enum {
#define ENUM(lib, name, ...) I_##name,
	ALL_FNS(ENUM)
	NR_FNS
};

static const struct {
	enum si_tarlib lib;
	const char *name;
} fns[NR_FNS] = {
#define ENTRY(lib, name, ...) [I_##name] = { lib, #name },
	ALL_FNS(ENTRY)
};

static void *slot[NR_FNS];

static const char *const soname[] = {
	[SI_LIBARCHIVE] = ARCHIVE_SONAME,
	[SI_LIBCRYPTO] = CRYPTO_SONAME,
};

static struct {
	pthread_once_t once;
	char why[256];		/* empty once loaded */
} state[] = {
	[SI_LIBARCHIVE] = { PTHREAD_ONCE_INIT, "" },
	[SI_LIBCRYPTO] = { PTHREAD_ONCE_INIT, "" },
};

/* Every symbol of lib, or why not; the handle is kept for the process. */
static void load(enum si_tarlib lib)
{
	void *dl = dlopen(soname[lib], RTLD_NOW | RTLD_LOCAL);
	char *why = state[lib].why;
	size_t size = sizeof(state[lib].why);

	if (!dl) {
		snprintf(why, size, "%s", dlerror());
		return;
	}
	for (int i = 0; i < NR_FNS; i++) {
		if (fns[i].lib != lib)
			continue;
		slot[i] = dlsym(dl, fns[i].name);
		if (!slot[i]) {
			snprintf(why, size, "%s: no %s", soname[lib], fns[i].name);
			return;
		}
	}
}

static void load_archive(void) { load(SI_LIBARCHIVE); }
static void load_crypto(void) { load(SI_LIBCRYPTO); }

const char *si_tarlib_load(enum si_tarlib lib)
{
	pthread_once(&state[lib].once, lib == SI_LIBARCHIVE ? load_archive : load_crypto);
	return state[lib].why[0] ? state[lib].why : NULL;
}

/* The address of a loaded function; a call before its load is a bug. */
static void *fn(int i)
{
	if (!slot[i])
		abort();
	return slot[i];
}

#define CALL(lib, name, ret, params, args) \
	ret name params { return ((ret (*)params)fn(I_##name))args; }
#define VCALL(lib, name, params, args) \
	void name params { ((void (*)params)fn(I_##name))args; }
#define FCALL(lib, name, type) \
	void name(type *p) { if (p) ((void (*)(type *))fn(I_##name))(p); }
ARCHIVE_FNS(CALL)
CRYPTO_FNS(CALL)
VOID_FNS(VCALL)
FREE_FNS(FCALL)

void archive_set_error(struct archive *a, int err, const char *fmt, ...)
{
	void (*set)(struct archive *, int, const char *, ...) =
		(void (*)(struct archive *, int, const char *, ...))fn(I_archive_set_error);
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	set(a, err, "%s", msg);
}
