/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libarchive and libcrypto, opened with dlopen(3) the first time a
 * tarball needs them.  Linked in, they and what they pull in (libxml2,
 * ICU, libstdc++) cost every run about 7 ms of relocations at start,
 * ext4 and tree runs included, which never use them.  An uncompressed
 * or gzip tarball needs neither unless --json asks for its sha256.
 *
 * The callers keep calling archive_*() and EVP_*() by their own names:
 * tarlibs.c defines them, each forwarding to the loaded library.
 * Calling one before its library is loaded is a bug (it aborts).
 */
#ifndef SHIFTIMG_TARLIBS_H
#define SHIFTIMG_TARLIBS_H

enum si_tarlib {
	SI_LIBARCHIVE,		/* compressions other than gzip, and their names */
	SI_LIBCRYPTO,		/* sha256 */
};

/* Loads lib (once per process): NULL, or why it cannot be loaded. */
const char *si_tarlib_load(enum si_tarlib lib);

#endif /* SHIFTIMG_TARLIBS_H */
