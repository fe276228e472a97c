/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Just enough JSON for OCI image metadata, as pure functions on a
 * buffer: values are found as spans of the original bytes, and changes
 * are splices of new text over some spans, so that every byte not
 * changed (key order, spacing, number forms, escapes) stays as it was
 * and a document with nothing to change keeps its digest.
 */
#ifndef SHIFTIMG_OCIJSON_H
#define SHIFTIMG_OCIJSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct si_json_span {
	size_t off, len;
};

/*
 * Skips blanks and one value from *pos; sets v to its span and *pos past
 * it.  Returns 0, or -1 if the bytes are not JSON (or nest too deep).
 */
int si_json_value(const char *b, size_t n, size_t *pos, struct si_json_span *v);
/* The whole buffer as one value (blanks around it allowed). */
int si_json_doc(const char *b, size_t n, struct si_json_span *v);

/*
 * The value of member key in object obj, and its index among the
 * members (index may be NULL).  Returns 1 if found, 0 if not, -1 if obj
 * is not a well-formed object.
 */
int si_json_member(const char *b, struct si_json_span obj, const char *key,
		   struct si_json_span *val, size_t *index);
/*
 * Array elements one by one: *iter starts at 0.  Returns 1 with elem
 * set, 0 past the last, -1 on bad input.
 */
int si_json_elem(const char *b, struct si_json_span arr, size_t *iter,
		 struct si_json_span *elem);
/* The members of an object the same way, with their keys. */
int si_json_next_member(const char *b, struct si_json_span obj, size_t *iter,
			struct si_json_span *key, struct si_json_span *val);

bool si_json_is(const char *b, struct si_json_span v, char type);
/*
 * A string value without its quotes into out (NUL-terminated).  Only
 * strings without escapes are taken: every string OCI metadata names
 * (digests, media types, references) is plain.  Returns 0 or -1.
 */
int si_json_str(const char *b, struct si_json_span v, char *out, size_t size);
/* A non-negative integer value.  Returns 0 or -1. */
int si_json_u64(const char *b, struct si_json_span v, uint64_t *out);

/* One splice: len bytes at off become text (malloc'ed, owned by the list). */
struct si_json_edit {
	size_t off, len;
	char *text;
};

struct si_json_edits {
	struct si_json_edit *e;
	size_t nr, alloc;
};

/* Adds a splice (text is copied); returns 0 or -1 (out of memory). */
int si_json_edit_add(struct si_json_edits *l, size_t off, size_t len,
		     const char *text);
void si_json_edits_free(struct si_json_edits *l);
/*
 * Splices that remove the items (elements or members) i of array or
 * object c for which i < nr and drop[i], commas with them, every other
 * byte kept.  Returns 0 or -1.
 */
int si_json_cut_items(const char *b, struct si_json_span c, const bool *drop,
		      size_t nr, struct si_json_edits *l);
/*
 * Applies the splices to b: a new malloc'ed buffer in *out.  Splices
 * may come in any order but must not overlap; one inside a span cut
 * by another is dropped with it.  Returns 0 or -1.
 */
int si_json_splice(const char *b, size_t n, struct si_json_edits *l,
		   char **out, size_t *outlen);

/*
 * Splices that make annotation key of object obj be value (a plain
 * string), or remove it when value is NULL (and the whole
 * "annotations" member when it was its only one), leaving every other
 * byte.  Returns 0 or -1.
 */
int si_json_set_annotation(const char *b, struct si_json_span obj,
			   const char *key, const char *value,
			   struct si_json_edits *l);

#endif /* SHIFTIMG_OCIJSON_H */
