// SPDX-License-Identifier: GPL-2.0-or-later
/* shiftimg(1): the command line, and nothing else. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shiftimg.h"

/* Exit codes, as in shiftimg(1). */
#define EXIT_FAILED	1	/* a target could not be (fully) shifted */
#define EXIT_USAGE	2
#define EXIT_UNMAPPED	3	/* unmapped ids refused; nothing was changed */

static const char *progname = "shiftimg";

static void usage(FILE *out)
{
	fprintf(out,
"usage: %s [-nqrv] [-m map] [-u map] [-g map] [--uid-map-file file]\n"
"       [--gid-map-file file] [--subid user] [--from-map map]\n"
"       [--from-uid-map map] [--from-gid-map map] [--from-uid-map-file file]\n"
"       [--from-gid-map-file file] [--from-subid user]\n"
"       [--from-subuid-file file] [--from-subgid-file file]\n"
"       [--from-subid-range start:count]\n"
"       [--unmapped=fail|keep|overflow] [--cross-mounts] [-o output]\n"
"       [--offset bytes] [--names=clear|keep] [--level n] [--journal file]\n"
"       [--force] [--allow-privileged] [-j threads] [--json]\n"
"       [--stamp|--no-stamp] [--sync] [--keep-blobs] target ...\n"
"       %s --status | --rollback [--journal file] target ...\n",
		progname, progname);
}

static void die(int code, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", progname);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(code);
}

struct cli {
	struct shiftimg *h;
	uint64_t flags;
	/* --from-subid: looked up once the files to look in are known. */
	const char *from_subid, *from_subuid, *from_subgid;
	bool json, verbose, quiet, output;
	bool status, rollback;
	bool tty;
	FILE *out;	/* reports: stdout, or stderr when "-" is a target */
	double last, start;
	/* With --json, what the list callback reported, for the target's object. */
	char **listed;
	size_t nr_listed;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void json_string(FILE *out, const char *s);

static void list_cb(void *arg, const char *path, const char *what)
{
	struct cli *c = arg;
	char **l, *s;

	if (!c->json) {
		fprintf(c->out, "%s: %s\n", path, what);
		return;
	}
	/* Lines would break the JSON document: kept for json_target(). */
	l = realloc(c->listed, (c->nr_listed + 2) * sizeof(*l));
	if (!l)
		die(EXIT_FAILED, "out of memory");
	c->listed = l;
	s = strdup(path);
	l[c->nr_listed++] = s;
	l[c->nr_listed++] = strdup(what);
	if (!s || !l[c->nr_listed - 1])
		die(EXIT_FAILED, "out of memory");
}

/* The list of a target, and the notice: per image digests of a layout. */
static void json_listed(struct cli *c)
{
	size_t i;

	if (*shiftimg_notice(c->h)) {
		fprintf(c->out, ",\n   \"notice\": ");
		json_string(c->out, shiftimg_notice(c->h));
	}
	if (!c->nr_listed)
		return;
	fprintf(c->out, ",\n   \"listed\": [");
	for (i = 0; i < c->nr_listed; i += 2) {
		fprintf(c->out, "%s\n    {\"path\": ", i ? "," : "");
		json_string(c->out, c->listed[i]);
		fprintf(c->out, ", \"what\": ");
		json_string(c->out, c->listed[i + 1]);
		fprintf(c->out, "}");
		free(c->listed[i]);
		free(c->listed[i + 1]);
	}
	fprintf(c->out, "]");
	c->nr_listed = 0;
}

/* A progress line on a terminal, five times a second at most. */
static void progress_cb(void *arg, uint64_t done, uint64_t total)
{
	struct cli *c = arg;
	double t = now(), rate;

	if (t - c->last < 0.2)
		return;
	c->last = t;
	rate = (double)done / (t - c->start > 0 ? t - c->start : 1e-9);
	fprintf(stderr, "\r%s: %llu objects, %.0f/s", progname,
		(unsigned long long)done, rate);
	if (total > done && rate > 0)
		fprintf(stderr, ", %.0f s left", (double)(total - done) / rate);
	fputs("   ", stderr);
}

static unsigned int parse_threads(const char *s)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < 1 || v > 256)
		die(EXIT_USAGE, "-j %s: expected a number from 1 to 256", s);
	return (unsigned int)v;
}

static void json_string(FILE *out, const char *s)
{
	putc('"', out);
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			fprintf(out, "\\%c", ch);
		else if (ch < 0x20)
			fprintf(out, "\\u%04x", ch);
		else
			putc(ch, out);
	}
	putc('"', out);
}

/* The digests of a tar run, for a pipeline's manifest. */
static void json_digests(struct cli *c)
{
	const char *o = shiftimg_digest(c->h, "output");
	const char *d = shiftimg_digest(c->h, "diff_id");

	if (o) {
		fprintf(c->out, ",\n   \"sha256\": ");
		json_string(c->out, o);
	}
	if (d) {
		fprintf(c->out, ", \"diff_id\": ");
		json_string(c->out, d);
	}
}

/* The map the last run applied to the ids on disk (reused buffer). */
static const char *applied_map(struct cli *c)
{
	static char *buf;
	int n = shiftimg_map_format(c->h, SHIFTIMG_APPLIED, NULL, 0);
	char *p = realloc(buf, (size_t)n + 1);

	if (!p)
		die(EXIT_FAILED, "out of memory");
	buf = p;
	shiftimg_map_format(c->h, SHIFTIMG_APPLIED, buf, (size_t)n + 1);
	return buf;
}

static void json_target(struct cli *c, const char *target, int err, bool first)
{
	const struct shiftimg_stats *s = shiftimg_stats(c->h);

	fprintf(c->out, "%s\n  {\"target\": ", first ? "" : ",");
	json_string(c->out, target);
	fprintf(c->out, ", \"backend\": ");
	json_string(c->out, shiftimg_backend(c->h));
	fprintf(c->out, ", \"ok\": %s, \"dry_run\": %s", err ? "false" : "true",
	       c->flags & SHIFTIMG_DRY_RUN ? "true" : "false");
	fprintf(c->out, ",\n   \"map\": ");
	json_string(c->out, applied_map(c));
	if (err) {
		fprintf(c->out, ", \"error\": ");
		json_string(c->out, shiftimg_error(c->h));
	}
	fprintf(c->out, ",\n   \"objects\": %llu, \"changed\": %llu, \"hardlinks\": %llu, "
	       "\"acls\": %llu, \"caps\": %llu, \"override_stat\": %llu,\n"
	       "   \"flags_cleared\": %llu, \"unmapped\": %llu, "
	       "\"skipped_mounts\": %llu, \"errors\": %llu, \"seconds\": %.3f",
	       (unsigned long long)s->objects, (unsigned long long)s->changed,
	       (unsigned long long)s->hardlinks, (unsigned long long)s->acls,
	       (unsigned long long)s->caps,
	       (unsigned long long)s->override_stat,
	       (unsigned long long)s->flags_cleared,
	       (unsigned long long)s->unmapped,
	       (unsigned long long)s->skipped_mounts,
	       (unsigned long long)s->errors, s->seconds);
	fprintf(c->out, ",\n   \"unmapped_ids\": [");
	for (unsigned int i = 0;; i++) {
		unsigned int kind;
		uint32_t id;
		uint64_t count;

		if (shiftimg_unmapped_id(c->h, i, &kind, &id, &count) < 0)
			break;
		fprintf(c->out, "%s{\"kind\": \"%s\", \"id\": %u, \"count\": %llu}",
		       i ? ", " : "", kind == SHIFTIMG_GID ? "gid" : "uid", id,
		       (unsigned long long)count);
	}
	fprintf(c->out, "]");
	json_digests(c);
	json_listed(c);
	fprintf(c->out, "}");
}

/* Shifts one target; returns its exit code. */
static int run_one(struct cli *c, const char *target, bool first)
{
	int err;

	c->start = now();
	c->last = c->start;
	err = shiftimg_run(c->h, target);
	if (c->tty)
		fputs("\r\033[K", stderr);
	if (c->json)
		json_target(c, target, err, first);
	if (*shiftimg_notice(c->h) && !c->quiet)
		fprintf(stderr, "%s: %s\n", progname, shiftimg_notice(c->h));
	if (!err) {
		const struct shiftimg_stats *s = shiftimg_stats(c->h);

		bool dry = c->flags & SHIFTIMG_DRY_RUN;

		/* A re-shift applies neither map given: say what it does. */
		if ((c->verbose || dry) &&
		    shiftimg_map_format(c->h, SHIFTIMG_FROM, NULL, 0))
			fprintf(stderr, "%s: %s: ids on disk %s: %s\n", progname,
				target, dry ? "would go" : "went",
				applied_map(c));
		if (c->verbose || dry)
			fprintf(stderr, "%s: %s: %llu objects, %llu %s, %llu unmapped\n",
				progname, target,
				(unsigned long long)s->objects,
				(unsigned long long)s->changed,
				dry ? "would change" : "changed",
				(unsigned long long)s->unmapped);
		return 0;
	}
	fprintf(stderr, "%s: %s\n", progname, shiftimg_error(c->h));
	if (err == -ERANGE) {
		if (c->verbose)
			shiftimg_unmapped_report(c->h, stderr);
		return EXIT_UNMAPPED;
	}
	return EXIT_FAILED;
}

enum {
	OPT_UID_MAP_FILE = 256, OPT_GID_MAP_FILE, OPT_SUBID, OPT_UNMAPPED,
	OPT_CROSS_MOUNTS, OPT_OFFSET, OPT_NAMES, OPT_LEVEL, OPT_JOURNAL,
	OPT_FORCE, OPT_JSON, OPT_ALLOW_PRIV, OPT_STATUS, OPT_ROLLBACK,
	OPT_STAMP, OPT_NO_STAMP, OPT_SYNC, OPT_FROM_MAP, OPT_FROM_UID_MAP,
	OPT_FROM_GID_MAP, OPT_FROM_UID_MAP_FILE, OPT_FROM_GID_MAP_FILE,
	OPT_FROM_SUBID, OPT_FROM_SUBUID_FILE, OPT_FROM_SUBGID_FILE,
	OPT_FROM_SUBID_RANGE, OPT_KEEP_BLOBS,
};

static const struct option longopts[] = {
	{ "map", required_argument, NULL, 'm' },
	{ "uid-map", required_argument, NULL, 'u' },
	{ "gid-map", required_argument, NULL, 'g' },
	{ "uid-map-file", required_argument, NULL, OPT_UID_MAP_FILE },
	{ "gid-map-file", required_argument, NULL, OPT_GID_MAP_FILE },
	{ "subid", required_argument, NULL, OPT_SUBID },
	{ "from-map", required_argument, NULL, OPT_FROM_MAP },
	{ "from-uid-map", required_argument, NULL, OPT_FROM_UID_MAP },
	{ "from-gid-map", required_argument, NULL, OPT_FROM_GID_MAP },
	{ "from-uid-map-file", required_argument, NULL, OPT_FROM_UID_MAP_FILE },
	{ "from-gid-map-file", required_argument, NULL, OPT_FROM_GID_MAP_FILE },
	{ "from-subid", required_argument, NULL, OPT_FROM_SUBID },
	{ "from-subuid-file", required_argument, NULL, OPT_FROM_SUBUID_FILE },
	{ "from-subgid-file", required_argument, NULL, OPT_FROM_SUBGID_FILE },
	{ "from-subid-range", required_argument, NULL, OPT_FROM_SUBID_RANGE },
	{ "reverse", no_argument, NULL, 'r' },
	{ "dry-run", no_argument, NULL, 'n' },
	{ "unmapped", required_argument, NULL, OPT_UNMAPPED },
	{ "cross-mounts", no_argument, NULL, OPT_CROSS_MOUNTS },
	{ "output", required_argument, NULL, 'o' },
	{ "offset", required_argument, NULL, OPT_OFFSET },
	{ "names", required_argument, NULL, OPT_NAMES },
	{ "level", required_argument, NULL, OPT_LEVEL },
	{ "journal", required_argument, NULL, OPT_JOURNAL },
	{ "force", no_argument, NULL, OPT_FORCE },
	{ "status", no_argument, NULL, OPT_STATUS },
	{ "rollback", no_argument, NULL, OPT_ROLLBACK },
	{ "stamp", no_argument, NULL, OPT_STAMP },
	{ "no-stamp", no_argument, NULL, OPT_NO_STAMP },
	{ "keep-blobs", no_argument, NULL, OPT_KEEP_BLOBS },
	{ "sync", no_argument, NULL, OPT_SYNC },
	{ "allow-privileged", no_argument, NULL, OPT_ALLOW_PRIV },
	{ "threads", required_argument, NULL, 'j' },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "verbose", no_argument, NULL, 'v' },
	{ "quiet", no_argument, NULL, 'q' },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ NULL, 0, NULL, 0 },
};

static void option(struct cli *c, const char *key, const char *value)
{
	if (shiftimg_set_option(c->h, key, value) < 0)
		die(EXIT_USAGE, "%s", shiftimg_error(c->h));
}

static void map_result(struct cli *c, int err)
{
	if (err < 0)
		die(EXIT_USAGE, "%s", shiftimg_error(c->h));
}

#define FROM	SHIFTIMG_FROM

/* --from-subid-range START:COUNT: a subordinate range, as 0:START:COUNT. */
static void from_range(struct cli *c, const char *arg)
{
	char spec[64];

	if (strchr(arg, ':') != strrchr(arg, ':') || !strchr(arg, ':') ||
	    snprintf(spec, sizeof(spec), "0:%s", arg) >= (int)sizeof(spec))
		die(EXIT_USAGE, "--from-subid-range '%s': not START:COUNT", arg);
	map_result(c, shiftimg_map_parse(c->h, FROM | SHIFTIMG_BOTH, spec));
}

static void parse_args(struct cli *c, int argc, char **argv)
{
	int ch;

	while ((ch = getopt_long(argc, argv, "m:u:g:rno:j:vqhV", longopts,
				 NULL)) != -1) {
		switch (ch) {
		case 'm':
			map_result(c, shiftimg_map_parse(c->h, SHIFTIMG_BOTH, optarg));
			break;
		case 'u':
			map_result(c, shiftimg_map_parse(c->h, SHIFTIMG_UID, optarg));
			break;
		case 'g':
			map_result(c, shiftimg_map_parse(c->h, SHIFTIMG_GID, optarg));
			break;
		case OPT_UID_MAP_FILE:
			map_result(c, shiftimg_map_load(c->h, SHIFTIMG_UID, optarg));
			break;
		case OPT_GID_MAP_FILE:
			map_result(c, shiftimg_map_load(c->h, SHIFTIMG_GID, optarg));
			break;
		case OPT_SUBID:
			map_result(c, shiftimg_map_subid(c->h, SHIFTIMG_BOTH, optarg,
							 getenv("SHIFTIMG_SUBUID"),
							 getenv("SHIFTIMG_SUBGID")));
			break;
		case OPT_FROM_MAP:
			map_result(c, shiftimg_map_parse(c->h, FROM | SHIFTIMG_BOTH, optarg));
			break;
		case OPT_FROM_UID_MAP:
			map_result(c, shiftimg_map_parse(c->h, FROM | SHIFTIMG_UID, optarg));
			break;
		case OPT_FROM_GID_MAP:
			map_result(c, shiftimg_map_parse(c->h, FROM | SHIFTIMG_GID, optarg));
			break;
		case OPT_FROM_UID_MAP_FILE:
			map_result(c, shiftimg_map_load(c->h, FROM | SHIFTIMG_UID, optarg));
			break;
		case OPT_FROM_GID_MAP_FILE:
			map_result(c, shiftimg_map_load(c->h, FROM | SHIFTIMG_GID, optarg));
			break;
		case OPT_FROM_SUBID:
			c->from_subid = optarg;
			break;
		case OPT_FROM_SUBID_RANGE:
			from_range(c, optarg);
			break;
		case OPT_FROM_SUBUID_FILE:
			c->from_subuid = optarg;
			break;
		case OPT_FROM_SUBGID_FILE:
			c->from_subgid = optarg;
			break;
		case 'r':
			c->flags |= SHIFTIMG_REVERSE;
			break;
		case 'n':
			c->flags |= SHIFTIMG_DRY_RUN;
			break;
		case OPT_UNMAPPED:
			if (!strcmp(optarg, "fail"))
				shiftimg_set_unmapped(c->h, SHIFTIMG_UNMAPPED_FAIL);
			else if (!strcmp(optarg, "keep"))
				shiftimg_set_unmapped(c->h, SHIFTIMG_UNMAPPED_KEEP);
			else if (!strcmp(optarg, "overflow"))
				shiftimg_set_unmapped(c->h, SHIFTIMG_UNMAPPED_OVERFLOW);
			else
				die(EXIT_USAGE, "--unmapped=%s: expected fail, keep or overflow",
				    optarg);
			break;
		case OPT_CROSS_MOUNTS:
			c->flags |= SHIFTIMG_CROSS_MOUNTS;
			break;
		case 'o':
			option(c, "output", optarg);
			c->output = true;
			break;
		case OPT_OFFSET:
			option(c, "offset", optarg);
			break;
		case OPT_NAMES:
			option(c, "names", optarg);
			break;
		case OPT_LEVEL:
			option(c, "level", optarg);
			break;
		case OPT_JOURNAL:
			option(c, "journal", optarg);
			break;
		case OPT_FORCE:
			c->flags |= SHIFTIMG_FORCE;
			break;
		case OPT_STATUS:
			c->status = true;
			break;
		case OPT_ROLLBACK:
			c->rollback = true;
			break;
		case OPT_STAMP:
			c->flags |= SHIFTIMG_STAMP;
			break;
		case OPT_KEEP_BLOBS:
			c->flags |= SHIFTIMG_KEEP_BLOBS;
			break;
		case OPT_NO_STAMP:
			c->flags &= ~SHIFTIMG_STAMP;
			break;
		case OPT_SYNC:
			c->flags |= SHIFTIMG_SYNC;
			break;
		case OPT_ALLOW_PRIV:
			c->flags |= SHIFTIMG_ALLOW_PRIVILEGED;
			break;
		case 'j':
			shiftimg_set_threads(c->h, parse_threads(optarg));
			break;
		case OPT_JSON:
			c->json = true;
			break;
		case 'v':
			c->verbose = true;
			break;
		case 'q':
			c->quiet = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case 'V':
			printf("%s %s\n", progname, PACKAGE_VERSION);
			exit(0);
		default:
			usage(stderr);
			exit(EXIT_USAGE);
		}
	}
	if ((c->from_subuid || c->from_subgid) && !c->from_subid)
		die(EXIT_USAGE, "--from-subuid-file and --from-subgid-file go with --from-subid");
	if (c->from_subid)
		map_result(c, shiftimg_map_subid(c->h, FROM | SHIFTIMG_BOTH,
						 c->from_subid, c->from_subuid,
						 c->from_subgid));
}

/* --status and --rollback: the journal names the map. */
static int journal_cmd(struct cli *c, const char *target)
{
	int err = c->status ? shiftimg_status(c->h, target, stdout) :
			      shiftimg_rollback(c->h, target);

	if (err) {
		fprintf(stderr, "%s: %s\n", progname, shiftimg_error(c->h));
		return EXIT_FAILED;
	}
	if (*shiftimg_notice(c->h) && !c->quiet)
		fprintf(stderr, "%s: %s\n", progname, shiftimg_notice(c->h));
	return 0;
}

int main(int argc, char **argv)
{
	struct cli c = { .flags = SHIFTIMG_STAMP };
	int i, code = 0, rc;

	c.h = shiftimg_new();
	if (!c.h)
		die(EXIT_FAILED, "out of memory");
	parse_args(&c, argc, argv);
	if (optind == argc) {
		usage(stderr);
		exit(EXIT_USAGE);
	}
	if (c.status && c.rollback)
		die(EXIT_USAGE, "--status and --rollback: give one of them");
	if (c.status || c.rollback) {
		for (i = optind; i < argc; i++) {
			rc = journal_cmd(&c, argv[i]);
			if (rc > code)
				code = rc;
		}
		shiftimg_free(c.h);
		return code;
	}
	if (!shiftimg_map_format(c.h, 0, NULL, 0))
		die(EXIT_USAGE, "no map given (--map, --uid-map, --gid-map, --subid)");
	if (c.output && argc - optind > 1)
		die(EXIT_USAGE, "-o names one output: give one target with it");

	/* "-" writes the archive to standard output: reports go to stderr. */
	c.out = stdout;
	for (i = optind; i < argc; i++)
		if (!strcmp(argv[i], "-"))
			c.out = stderr;
	if (c.json)
		c.flags |= SHIFTIMG_DIGEST;
	shiftimg_set_flags(c.h, c.flags);
	if (c.verbose || (c.flags & SHIFTIMG_DRY_RUN))
		shiftimg_set_list(c.h, list_cb, &c);
	c.tty = !c.quiet && !c.json && isatty(STDERR_FILENO);
	if (c.tty)
		shiftimg_set_progress(c.h, progress_cb, &c);

	if (c.json)
		fprintf(c.out, "{\"targets\": [");
	for (i = optind; i < argc; i++) {
		rc = run_one(&c, argv[i], i == optind);
		if (rc > code)
			code = rc;
	}
	if (c.json)
		fprintf(c.out, "\n]}\n");
	free(c.listed);
	shiftimg_free(c.h);
	return code;
}
