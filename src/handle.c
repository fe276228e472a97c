// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The handle: maps, options, errors, and the driver that picks a
 * backend and runs its passes.
 */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "journal.h"

struct shiftimg *shiftimg_new(void)
{
	struct shiftimg *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	pthread_mutex_init(&h->lock, NULL);
	si_tally_init(&h->tally);
	return h;
}

void shiftimg_free(struct shiftimg *h)
{
	size_t i;

	if (!h)
		return;
	for (i = 0; i < h->nr_opts; i++) {
		free(h->opts[i].key);
		free(h->opts[i].value);
	}
	free(h->opts);
	si_tally_free(&h->tally);
	pthread_mutex_destroy(&h->lock);
	free(h);
}

/*
 * A handle for one part of a whole, run on a thread of its own: the
 * parent's maps, rules, flags and threads, a copy of its options, and
 * its own tally, error and lock.  The callbacks come along only when
 * the parts run one at a time (they would interleave); the journal,
 * the pass state and the commit hook never do, as a part has none.
 */
struct shiftimg *si_handle_fork(const struct shiftimg *h, bool callbacks)
{
	struct shiftimg *c = malloc(sizeof(*c));
	size_t i;

	if (!c)
		return NULL;
	*c = *h;
	if (!callbacks)
		c->list_fn = NULL, c->progress_fn = NULL;
	c->opts = NULL;
	c->nr_opts = 0;
	c->journal = NULL;
	c->pass_state = NULL;
	c->pass_state_free = NULL;
	c->commit_fn = NULL;
	c->planned = 0;
	si_tally_init(&c->tally);
	si_tally_init(&c->checked);
	c->err[0] = c->notice[0] = '\0';
	c->digest_output[0] = c->digest_diff_id[0] = '\0';
	pthread_mutex_init(&c->lock, NULL);
	for (i = 0; i < h->nr_opts; i++)
		if (shiftimg_set_option(c, h->opts[i].key, h->opts[i].value)) {
			si_handle_fork_free(c);
			return NULL;
		}
	return c;
}

void si_handle_fork_free(struct shiftimg *c)
{
	if (!c)
		return;
	si_tally_free(&c->checked);
	shiftimg_free(c);
}

/* ---- errors ---- */

int si_error(struct shiftimg *h, int err, const char *fmt, ...)
{
	va_list ap;

	/* Workers of a parallel walk report too. */
	pthread_mutex_lock(&h->lock);
	if (!h->err[0]) {
		va_start(ap, fmt);
		vsnprintf(h->err, sizeof(h->err), fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&h->lock);
	return -err;
}

void si_error_clear(struct shiftimg *h)
{
	h->err[0] = '\0';
	h->notice[0] = '\0';
}

bool si_has_error(const struct shiftimg *h)
{
	return h->err[0] != '\0';
}

const char *shiftimg_error(const struct shiftimg *h)
{
	return h->err;
}

const char *shiftimg_notice(const struct shiftimg *h)
{
	return h->notice;
}

/* ---- maps ---- */

int shiftimg_map_add(struct shiftimg *h, unsigned int kinds, uint64_t inside,
		     uint64_t outside, uint64_t count)
{
	char msg[256];
	int k;

	bool from = kinds & SHIFTIMG_FROM;

	if (!(kinds & SHIFTIMG_BOTH))
		return si_error(h, EINVAL, "map: no id kind given");
	for (k = 0; k < 2; k++) {
		if (!(kinds & (1u << k)))
			continue;
		if (si_idmap_add(from ? &h->from[k] : &h->given[k], inside,
				 outside, count, msg, sizeof(msg)) < 0)
			return si_error(h, EINVAL, "%s%s map: %s",
					from ? "from-" : "", k ? "gid" : "uid",
					msg);
		if (from)
			h->have_from[k] = true;
		else
			h->have[k] = true;
	}
	return 0;
}

/* Parses a decimal number up to 2^32 (a count may be that large). */
static int parse_num(const char *s, char **end, uint64_t *v)
{
	char *e;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	*v = strtoull(s, &e, 10);
	if (errno || *v > 0x100000000ull)
		return -1;
	*end = e;
	return 0;
}

/* Parses "I<sep>O<sep>N" where sep is ':' or blanks. */
static int parse_triple(const char *s, bool blanks, uint64_t v[3])
{
	char *e = (char *)s;
	int i;

	for (i = 0; i < 3; i++) {
		if (blanks)
			while (*e == ' ' || *e == '\t')
				e++;
		if (parse_num(e, &e, &v[i]) < 0)
			return -1;
		if (i < 2 && !blanks && *e++ != ':')
			return -1;
	}
	if (blanks)
		while (*e == ' ' || *e == '\t' || *e == '\n')
			e++;
	return *e ? -1 : 0;
}

int shiftimg_map_parse(struct shiftimg *h, unsigned int kinds, const char *spec)
{
	uint64_t v[3];
	const char *s = spec;

	if (s[0] && s[1] == ':' && strchr("ugb", s[0])) {
		kinds = (kinds & SHIFTIMG_FROM) |
			(s[0] == 'u' ? SHIFTIMG_UID :
			 s[0] == 'g' ? SHIFTIMG_GID : SHIFTIMG_BOTH);
		s += 2;
	}
	if (parse_triple(s, false, v) < 0)
		return si_error(h, EINVAL,
				"map '%s': expected INSIDE:OUTSIDE:COUNT or [ugb]:INSIDE:OUTSIDE:COUNT",
				spec);
	return shiftimg_map_add(h, kinds, v[0], v[1], v[2]);
}

int shiftimg_map_load(struct shiftimg *h, unsigned int kinds, const char *path)
{
	char line[256];
	unsigned int lineno = 0;
	uint64_t v[3];
	int err = 0;
	FILE *f;

	f = fopen(path, "re");
	if (!f)
		return si_error(h, errno, "%s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		if (line[strspn(line, " \t\n")] == '\0')
			continue;
		if (parse_triple(line, true, v) < 0) {
			err = si_error(h, EINVAL,
				       "%s:%u: expected 'INSIDE OUTSIDE COUNT'",
				       path, lineno);
			goto out_close;
		}
		err = shiftimg_map_add(h, kinds, v[0], v[1], v[2]);
		if (err)
			goto out_close;
	}
	if (ferror(f))
		err = si_error(h, EIO, "%s: read error", path);
out_close:
	fclose(f);
	return err;
}

/* Finds USER's first range in a subuid/subgid file ("name:start:count"). */
static int subid_lookup(struct shiftimg *h, const char *path, const char *user,
			const char *uidstr, uint64_t *start, uint64_t *count)
{
	char line[512];
	size_t ulen = strlen(user), nlen = strlen(uidstr);
	FILE *f;
	int err = -ENOENT;

	f = fopen(path, "re");
	if (!f)
		return si_error(h, errno, "%s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		char *rest = NULL, *e;

		if (!strncmp(line, user, ulen) && line[ulen] == ':')
			rest = line + ulen + 1;
		else if (nlen && !strncmp(line, uidstr, nlen) && line[nlen] == ':')
			rest = line + nlen + 1;
		if (!rest)
			continue;
		if (parse_num(rest, &e, start) < 0 || *e != ':' ||
		    parse_num(e + 1, &e, count) < 0) {
			err = si_error(h, EINVAL, "%s: malformed entry for %s",
				       path, user);
			break;
		}
		err = 0;
		break;
	}
	fclose(f);
	if (err == -ENOENT)
		err = si_error(h, ENOENT, "%s: no subordinate ids for %s", path,
			       user);
	return err;
}

int shiftimg_map_subid(struct shiftimg *h, unsigned int kinds, const char *user,
		       const char *subuid_path, const char *subgid_path)
{
	const char *paths[2] = { subuid_path ? subuid_path : "/etc/subuid",
				 subgid_path ? subgid_path : "/etc/subgid" };
	struct passwd *pw = getpwnam(user);
	char uidstr[16] = "";
	uint64_t start, count;
	int k, err;

	if (pw)
		snprintf(uidstr, sizeof(uidstr), "%u", (unsigned int)pw->pw_uid);
	for (k = 0; k < 2; k++) {
		if (!(kinds & (1u << k)))
			continue;
		err = subid_lookup(h, paths[k], user, uidstr, &start, &count);
		if (err)
			return err;
		err = shiftimg_map_add(h, (1u << k) | (kinds & SHIFTIMG_FROM),
				       0, start, count);
		if (err)
			return err;
	}
	return 0;
}

int shiftimg_map_format(const struct shiftimg *h, unsigned int which,
			char *buf, size_t size)
{
	const struct si_idmap *maps = which & SHIFTIMG_APPLIED ? h->rules.map :
				      which & SHIFTIMG_FROM ? h->from : h->given;
	size_t len = 0;
	unsigned int k, i;

	if (size)
		buf[0] = '\0';
	for (k = 0; k < 2; k++) {
		/* A kind the run left alone has the identity extent only. */
		if ((which & SHIFTIMG_APPLIED) && si_idmap_is_identity(&maps[k]))
			continue;
		for (i = 0; i < maps[k].nr; i++) {
			const struct si_extent *e = &maps[k].ext[i];
			/* Measuring (buf NULL) or truncated: no pointer past buf. */
			int n = snprintf(len < size ? buf + len : NULL,
					 len < size ? size - len : 0,
					 "%s%c:%u:%u:%u", len ? " " : "",
					 k ? 'g' : 'u', e->first, e->target,
					 e->count);

			len += (size_t)n;
		}
	}
	return (int)len;
}

/* ---- settings ---- */

void shiftimg_set_flags(struct shiftimg *h, uint64_t flags)
{
	h->flags = flags;
}

uint64_t shiftimg_get_flags(const struct shiftimg *h)
{
	return h->flags;
}

void shiftimg_set_unmapped(struct shiftimg *h, enum shiftimg_unmapped policy)
{
	h->rules.unmapped = policy;
}

void shiftimg_set_threads(struct shiftimg *h, unsigned int threads)
{
	h->threads = threads;
}

unsigned int si_threads(const struct shiftimg *h)
{
	long n;

	if (h->threads)
		return h->threads;
	n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (n > 64 ? 64 : (unsigned int)n) : 1;
}

void shiftimg_set_list(struct shiftimg *h, shiftimg_list_fn *fn, void *arg)
{
	h->list_fn = fn;
	h->list_arg = arg;
}

void shiftimg_set_progress(struct shiftimg *h, shiftimg_progress_fn *fn,
			   void *arg)
{
	h->progress_fn = fn;
	h->progress_arg = arg;
}

int shiftimg_set_option(struct shiftimg *h, const char *key, const char *value)
{
	struct si_option *o;
	size_t i;

	for (i = 0; i < h->nr_opts; i++) {
		if (!strcmp(h->opts[i].key, key)) {
			char *v = strdup(value);

			if (!v)
				return si_error(h, ENOMEM, "out of memory");
			free(h->opts[i].value);
			h->opts[i].value = v;
			return 0;
		}
	}
	o = realloc(h->opts, (h->nr_opts + 1) * sizeof(*o));
	if (!o)
		return si_error(h, ENOMEM, "out of memory");
	h->opts = o;
	o[h->nr_opts].key = strdup(key);
	o[h->nr_opts].value = strdup(value);
	if (!o[h->nr_opts].key || !o[h->nr_opts].value) {
		free(o[h->nr_opts].key);
		free(o[h->nr_opts].value);
		return si_error(h, ENOMEM, "out of memory");
	}
	h->nr_opts++;
	return 0;
}

const char *si_option(const struct shiftimg *h, const char *key)
{
	size_t i;

	for (i = 0; i < h->nr_opts; i++)
		if (!strcmp(h->opts[i].key, key))
			return h->opts[i].value;
	return NULL;
}

void si_option_unset(struct shiftimg *h, const char *key)
{
	size_t i;

	for (i = 0; i < h->nr_opts; i++) {
		if (strcmp(h->opts[i].key, key))
			continue;
		free(h->opts[i].key);
		free(h->opts[i].value);
		h->opts[i] = h->opts[--h->nr_opts];
		return;
	}
}

void si_list(struct shiftimg *h, const char *path, const char *what)
{
	if (!h->list_fn)
		return;
	pthread_mutex_lock(&h->lock);
	h->list_fn(h->list_arg, path, what);
	pthread_mutex_unlock(&h->lock);
}

void si_progress(struct shiftimg *h, uint64_t done, uint64_t total)
{
	if (!h->progress_fn)
		return;
	pthread_mutex_lock(&h->lock);
	h->progress_fn(h->progress_arg, done, total);
	pthread_mutex_unlock(&h->lock);
}

/* ---- memory ---- */

void *si_alloc_big(size_t *len)
{
	const size_t huge = 2u << 20;
	void *p;

	if (*len < SI_BIG_MIN)
		return malloc(*len ? *len : 1);
	*len = (*len + huge - 1) & ~(huge - 1);
	if (posix_memalign(&p, huge, *len))
		return NULL;
	madvise(p, *len, MADV_HUGEPAGE);
	return p;
}

/* ---- results ---- */

int shiftimg_status(struct shiftimg *h, const char *target, FILE *out)
{
	si_error_clear(h);
	if (si_lxc_probe(target))
		return si_lxc_status(h, target, out);
	if (si_store_probe(target))
		return si_store_status(h, target, out);
	return si_journal_status(h, target, out);
}

int shiftimg_rollback(struct shiftimg *h, const char *target)
{
	si_error_clear(h);
	if (si_lxc_probe(target))
		return si_lxc_rollback(h, target);
	if (si_store_probe(target))
		return si_store_rollback(h, target);
	return si_journal_rollback(h, target);
}

const char *shiftimg_backend(const struct shiftimg *h)
{
	return h->backend ? h->backend->name : "";
}

const struct shiftimg_stats *shiftimg_stats(const struct shiftimg *h)
{
	return &h->tally.st;
}

/* Writes "uid 70000 (3), gid 5 (1)" for the ids kept on the tally. */
static void format_ids(const struct si_tally *t, char *buf, size_t size)
{
	size_t len = 0;
	unsigned int i;

	buf[0] = '\0';
	for (i = 0; i < t->nr_ids && len < size; i++)
		len += (size_t)snprintf(buf + len, size - len, "%s%s %u",
					i ? ", " : "",
					t->ids[i].kind ? "gid" : "uid",
					t->ids[i].id);
	if (t->more_ids && len < size)
		snprintf(buf + len, size - len, " and %llu more",
			 (unsigned long long)t->more_ids);
}

int shiftimg_unmapped_id(const struct shiftimg *h, unsigned int i,
			 unsigned int *kind, uint32_t *id, uint64_t *count)
{
	const struct si_tally *t = &h->tally;

	if (i >= t->nr_ids)
		return -ENOENT;
	*kind = t->ids[i].kind == SI_KGID ? SHIFTIMG_GID : SHIFTIMG_UID;
	*id = t->ids[i].id;
	*count = t->ids[i].count;
	return 0;
}

void shiftimg_unmapped_report(const struct shiftimg *h, FILE *out)
{
	const struct si_tally *t = &h->tally;
	unsigned int i;

	for (i = 0; i < t->nr_ids; i++)
		fprintf(out, "unmapped %s %u: %llu occurrences\n",
			t->ids[i].kind ? "gid" : "uid", t->ids[i].id,
			(unsigned long long)t->ids[i].count);
	if (t->more_ids)
		fprintf(out, "unmapped: %llu more distinct ids\n",
			(unsigned long long)t->more_ids);
	for (i = 0; i < t->nr_examples; i++)
		fprintf(out, "unmapped example: %s\n", t->examples[i]);
}

int si_unmapped_refuse(struct shiftimg *h, const char *target)
{
	const struct si_tally *t = &h->tally;
	char ids[512];

	format_ids(t, ids, sizeof(ids));
	return si_error(h, ERANGE,
			"%s: %llu objects hold ids the map does not cover (%s), e.g. %s%s%s; nothing was changed (see --unmapped)",
			target, (unsigned long long)t->st.unmapped, ids,
			t->nr_examples > 0 ? t->examples[0] : "?",
			t->nr_examples > 1 ? ", " : "",
			t->nr_examples > 1 ? t->examples[1] : "");
}

int si_privileged_refuse(struct shiftimg *h, const char *target)
{
	const struct si_tally *t = &h->tally;
	char ex[768];
	size_t len = 0;
	unsigned int i;

	ex[0] = '\0';
	for (i = 0; i < t->nr_priv && len < sizeof(ex); i++)
		len += (size_t)snprintf(ex + len, sizeof(ex) - len, "%s%s",
					i ? ", " : "", t->priv[i]);
	return si_error(h, EPERM,
			"%s: %llu objects would grant real root after the shift (setuid or setgid root, or root file capabilities), e.g. %s; nothing was changed (see --allow-privileged)",
			target, (unsigned long long)t->privileged, ex);
}

bool si_check_privileged(const struct shiftimg *h)
{
	return !(h->flags & SHIFTIMG_ALLOW_PRIVILEGED) &&
	       si_rules_make_root(&h->rules);
}

/* ---- the driver ---- */

int si_disk_map(struct shiftimg *h, int k, struct si_idmap *out)
{
	if (!h->have_from[k]) {
		*out = h->given[k];
		return 0;
	}
	si_idmap_compose(&h->from[k], &h->given[k], out);
	if (h->keep_outside && si_idmap_keep_outside(out, &h->from[k]) < 0)
		return si_error(h, EINVAL, "the maps have too many ranges");
	return 0;
}

/* The maps a run applies to the ids on disk: si_disk_map(), inverted for --reverse. */
static int build_rules(struct shiftimg *h)
{
	struct si_idmap composed;	/* 8 KB */
	int k, err;

	for (k = 0; k < 2; k++) {
		struct si_idmap *m = &h->rules.map[k];

		if (h->have_from[k] && !h->have[k])
			return si_error(h, EINVAL,
					"a from-map for %s ids needs a map for them to go to (--map, --%s-map)",
					k ? "group" : "user", k ? "gid" : "uid");
		if (!h->have[k]) {
			/* A kind with no map at all is left alone. */
			m->nr = 1;
			m->ext[0] = (struct si_extent){ 0, 0, SI_ID_MAX + 1u };
			continue;
		}
		if (!(h->flags & SHIFTIMG_REVERSE))
			err = si_disk_map(h, k, m);
		else if (!(err = si_disk_map(h, k, &composed)))
			si_idmap_invert(&composed, m);
		if (err)
			return err;
	}
	return 0;
}

static int open_target(struct shiftimg *h, const char *path,
		       struct si_target *t)
{
	memset(t, 0, sizeof(*t));
	t->path = path;
	t->fd = -1;
	if (!strcmp(path, "-")) {
		if (fstat(STDIN_FILENO, &t->st) < 0)
			return si_error(h, errno, "standard input: %s",
					strerror(errno));
		return 0;
	}
	/* The target the user named may be a symlink; nothing below it is followed. */
	t->fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (t->fd < 0)
		return si_error(h, errno, "%s: %s", path, strerror(errno));
	if (fstat(t->fd, &t->st) < 0) {
		int err = errno;

		close(t->fd);
		t->fd = -1;
		return si_error(h, err, "%s: %s", path, strerror(err));
	}
	fcntl(t->fd, F_SETFL, fcntl(t->fd, F_GETFL) & ~O_NONBLOCK);
	return 0;
}

static const struct si_backend *pick_backend(const struct si_target *t)
{
	static const struct si_backend *const order[] = {
		&si_tree_backend, &si_ext4_backend, &si_tar_backend,
	};
	size_t i;

	for (i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		if (order[i]->probe(t))
			return order[i];
	return NULL;
}

/* Every option given must be one the chosen backend uses. */
static int check_options(struct shiftimg *h, const struct si_backend *b,
			 const char *target)
{
	size_t i, j;

	for (i = 0; i < h->nr_opts; i++) {
		bool ok = false;

		for (j = 0; b->options && b->options[j]; j++)
			if (!strcmp(b->options[j], h->opts[i].key))
				ok = true;
		if (!ok)
			return si_error(h, EINVAL,
					"%s: --%s does not apply to a %s target",
					target, h->opts[i].key, b->name);
	}
	return 0;
}

/* Checks a backend that is not atomic before it is changed. */
static int check_first(struct shiftimg *h, const struct si_backend *b,
		       const struct si_target *t)
{
	int err = b->shift(h, t, SI_PASS_CHECK);

	if (err)
		return err;
	if (h->tally.privileged && si_check_privileged(h))
		return si_privileged_refuse(h, t->path);
	if (h->tally.st.unmapped &&
	    h->rules.unmapped == SHIFTIMG_UNMAPPED_FAIL)
		return si_unmapped_refuse(h, t->path);
	h->planned = h->tally.st.objects;	/* for the apply pass's progress */
	/* The apply pass counts again, or adopts these (a tree's plan). */
	si_tally_free(&h->checked);
	h->checked = h->tally;
	si_tally_init(&h->tally);
	return 0;
}

/*
 * An in-place run is journaled (journal.h): a tree is then always
 * checked first, since its check pass writes the plan to the journal.
 */
static int drive(struct shiftimg *h, const struct si_backend *b,
		 const struct si_target *t)
{
	struct si_journal *j;
	int err;

	if (h->flags & SHIFTIMG_DRY_RUN) {
		err = b->shift(h, t, SI_PASS_CHECK);
		if (!err && h->tally.privileged && si_check_privileged(h))
			err = si_privileged_refuse(h, t->path);
		return err;
	}
	err = si_journal_start(h, b, t, &j);
	if (err)
		return err == SI_JOURNAL_NOTHING ? 0 : err;
	h->journal = j;
	if ((h->rules.unmapped == SHIFTIMG_UNMAPPED_FAIL ||
	     si_check_privileged(h) || j) && !(b->flags & SI_BACKEND_ATOMIC)) {
		err = check_first(h, b, t);
		if (!err)
			err = si_journal_planned(j);
	}
	/*
	 * An atomic backend decides both in its one pass, before it puts
	 * its copy in place (si_check_privileged(), si_privileged_refuse()).
	 */
	if (!err)
		err = b->shift(h, t, SI_PASS_APPLY);
	/* What goes with the shift (a container's config) goes before its journal. */
	if (!err && h->commit_fn)
		err = h->commit_fn(h, h->commit_arg);
	h->journal = NULL;
	return si_journal_end(j, err);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

const char *shiftimg_digest(const struct shiftimg *h, const char *which)
{
	const char *v = NULL;

	if (!strcmp(which, "output"))
		v = h->digest_output;
	else if (!strcmp(which, "diff_id"))
		v = h->digest_diff_id;
	return v && *v ? v : NULL;
}

int si_run_path(struct shiftimg *h, const char *target)
{
	const struct si_backend *b;
	struct si_target t;
	double start = now();
	int err;

	err = build_rules(h);
	if (err)
		return err;
	err = open_target(h, target, &t);
	if (err)
		return err;
	b = pick_backend(&t);
	if (!b) {
		err = si_error(h, EINVAL,
			       "%s: not a directory, an ext2/3/4 image or a tar archive",
			       target);
		goto out_close;
	}
	h->backend = b;
	err = check_options(h, b, target);
	if (!err)
		err = drive(h, b, &t);
	h->tally.st.seconds = now() - start;
	if (h->pass_state_free)
		h->pass_state_free(h->pass_state);
	h->pass_state = NULL;
	h->pass_state_free = NULL;
out_close:
	if (t.fd >= 0)
		close(t.fd);
	return err;
}

int shiftimg_run(struct shiftimg *h, const char *target)
{
	si_error_clear(h);
	si_tally_free(&h->tally);
	h->backend = NULL;
	h->planned = 0;
	si_tally_free(&h->checked);
	h->digest_output[0] = h->digest_diff_id[0] = '\0';
	if (!h->have[0] && !h->have[1])
		return si_error(h, EINVAL, "no map given");
	/* A whole that holds targets: its records change with them. */
	if (si_oci_probe(target))
		return si_oci_run(h, target);
	if (si_oci_archive_probe(target))
		return si_oci_archive_run(h, target);
	if (si_lxc_probe(target))
		return si_lxc_run(h, target);
	if (si_store_probe(target))
		return si_store_run(h, target);
	return si_run_path(h, target);
}
