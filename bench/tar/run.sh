#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# The tar backend against its floors and peers, side by side in one run,
# on a tar of about 500 MB taken from /usr (GNU tar, posix format):
#   uncompressed  shiftimg vs cat IN > OUT, compared twice:
#                 - page cache only: "shiftimg - < IN > OUT" (a filter
#                   does not sync) vs "cat IN > OUT";
#                 - on disk: "shiftimg -o OUT IN" (temporary file,
#                   fsync, rename, fsync of the directory) vs
#                   "cat IN > OUT && sync OUT" (fsync of the file);
#                 and, for the record, shiftimg -o vs plain cat.
#   tar.gz        shiftimg vs gzip -dc | gzip -6, and pigz on all cores
#   tar.zst       shiftimg vs zstd -dc | zstd -3
#   the route users have today: GNU tar -x as root, then tar -c with
#   --owner-map/--group-map (tar and tar.gz; neither syncs)
#   --json        the cost of the two sha256 digests (tar and tar.gz)
#   memory        shiftimg's peak RSS on the full input and on one a
#                 fifth of its size, beside that of "shiftimg --version"
#                 (the shared libraries alone)
# Before every timed run the previous output is removed and everything
# synced (untimed), so that no run pays for another's writeback or for
# freeing (discarding) an old output's blocks.  The inputs are read once
# before the first round (warm cache).  Each round times every command
# once, in an order that rotates from round to round; the table has
# the medians of wall and CPU (user + system) seconds.  The outputs are
# checked: the same bytes on every route and run, gzip -t, zstd -t, and
# the --json digest against sha256sum.
#
# Usage (root): bench/tar/run.sh [BUILD_DIR]   (default: ./build)
# Environment: BENCH_MB (500), RUNS (5: uncompressed and zstd rounds),
#   GZ_RUNS (3), BENCH_DIR (/var/tmp/shiftimg-bench-tar; the inputs are
#   kept there between runs).  Takes /tmp/shiftimg-bench.lock itself.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
S=$build/shiftimg
MB=${BENCH_MB:-500}
RUNS=${RUNS:-5}
GZ_RUNS=${GZ_RUNS:-3}
W=${BENCH_DIR:-/var/tmp/shiftimg-bench-tar}
MAP="--map 0:100000:65536"
LOCK=/tmp/shiftimg-bench.lock

[ "$(id -u)" = 0 ] || { echo "bench: needs root (tar -x keeps owners)" >&2; exit 1; }
for tool in gzip pigz zstd tar; do
	command -v $tool >/dev/null || { echo "bench: needs $tool" >&2; exit 1; }
done
if [ -z "${SHIFTIMG_BENCH_LOCKED:-}" ]; then
	export SHIFTIMG_BENCH_LOCKED=1
	exec flock "$LOCK" "$0" "$@"
fi
make -C "$build" -s shiftimg >/dev/null 2>&1 || { echo "bench: make failed" >&2; exit 1; }
mkdir -p "$W"
cd "$W"
# A copy, so that a rebuild during the run changes nothing.
cp "$S" shiftimg
S=$W/shiftimg
NPROC=$(nproc)

# mk NAME MB: NAME.tar, NAME.tar.gz (gzip -6), NAME.tar.zst (zstd -3)
# from whole files of /usr in path order, MB megabytes of data.
mk() {
	[ -s "$1.tar.zst" ] && [ "$(cat "$1.mb" 2>/dev/null)" = "$2" ] && return
	find /usr -xdev -printf '%s %y %p\n' 2>/dev/null | sort -k3 |
		awk -v max=$(($2 << 20)) '{ if ($2 == "f") t += $1; if (t > max) exit
			print substr($0, index($0, "/") + 1) }' > "$1.list"
	tar -C / --no-recursion --format=posix -cf "$1.tar" -T "$1.list"
	gzip -6 -c "$1.tar" > "$1.tar.gz"
	zstd -q -3 -c "$1.tar" > "$1.tar.zst"
	echo "$2" > "$1.mb"
}
mk usr "$MB"
mk small $((MB / 5))
# The owner and group maps of the extract-and-recreate route: every id
# in the archive, moved like --map moves it.
tar -tvf usr.tar --numeric-owner | awk '{ split($2, a, "/"); u[a[1]]; g[a[2]] }
	END { for (i in u) print "+" i, "+" i + 100000 > "owners"
	      for (i in g) print "+" i, "+" i + 100000 > "groups" }'
cat usr.tar usr.tar.gz usr.tar.zst > /dev/null

# The commands, by name; each writes out.NAME (or the tree x.NAME).
cmd() {
	case $1 in
	cat)		echo "cat usr.tar > out.cat" ;;
	sh_stdio)	echo "$S $MAP - < usr.tar > out.sh_stdio" ;;
	cat_sync)	echo "cat usr.tar > out.cat_sync && sync out.cat_sync" ;;
	sh_o)		echo "$S $MAP -o out.sh_o usr.tar" ;;
	sh_o_json)	echo "$S $MAP --json -o out.sh_o_json usr.tar > json.tar" ;;
	gzip)		echo "gzip -dc usr.tar.gz | gzip -6 > out.gzip" ;;
	pigz)		echo "pigz -dc usr.tar.gz | pigz -6 -p $NPROC > out.pigz" ;;
	sh_gz)		echo "$S $MAP -o out.sh_gz usr.tar.gz" ;;
	sh_gz_json)	echo "$S $MAP --json -o out.sh_gz_json usr.tar.gz > json.gz" ;;
	zstd)		echo "zstd -q -dc usr.tar.zst | zstd -q -3 > out.zstd" ;;
	sh_zst)		echo "$S $MAP -o out.sh_zst usr.tar.zst" ;;
	recreate)	echo "mkdir x.recreate && tar -xpf usr.tar -C x.recreate &&
			      tar -C x.recreate --format=posix --owner-map=owners --group-map=groups -cf out.recreate usr" ;;
	recreate_gz)	echo "mkdir x.recreate_gz && tar -xpzf usr.tar.gz -C x.recreate_gz &&
			      tar -C x.recreate_gz --format=posix --owner-map=owners --group-map=groups -czf out.recreate_gz usr" ;;
	esac
}

# one NAME: one timed run, its "wall cpu" appended to t.NAME, to the
# millisecond (bash's time: /usr/bin/time's %e has 10 ms steps, near a
# tenth of cat's time here)
one() {
	rm -rf "out.$1" "x.$1"
	sync
	bash -c 'TIMEFORMAT="%3R %3U %3S"; { time sh -c "$1" 2>&3; } 3>&2 2> time.out' \
		time "$(cmd "$1")" || { echo "bench: $1 failed" >&2; exit 1; }
	awk '{ printf "%s %.3f\n", $1, $2 + $3 }' time.out >> "t.$1"
}

# rounds N NAME...: N rounds, the order rotating by one each round
rounds() {
	n=$1
	shift
	for r in $(seq "$n"); do
		first=$(((r - 1) % $# + 1))
		i=0
		for name in "$@"; do
			i=$((i + 1))
			if [ $i -ge $first ]; then one "$name"; fi
		done
		i=0
		for name in "$@"; do
			i=$((i + 1))
			if [ $i -lt $first ]; then one "$name"; fi
		done
	done
}

# med NAME FIELD: the median of a column of t.NAME
med() { awk -v f="$2" '{ print $f }' "t.$1" | sort -n |
	awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else printf "n/a" }'; }
row() { printf '  %-52s %7.3f %7.3f\n' "$2" "$(med "$1" 1)" "$(med "$1" 2)"; }
rss() { /usr/bin/time -f %M -o mem "$@" > /dev/null 2>&1 < /dev/null || {
	echo "bench: $* failed" >&2; exit 1; }; cat mem; }

rm -f t.* out.* json.*
rm -rf x.*
load0=$(cut -d' ' -f1-3 /proc/loadavg)
rounds "$RUNS" cat sh_stdio cat_sync sh_o sh_o_json
rounds "$GZ_RUNS" gzip pigz sh_gz sh_gz_json
rounds "$RUNS" zstd sh_zst
rounds 1 recreate recreate_gz
rm -rf x.*

# The outputs: one result whatever the route, valid and reproducible.
cmp -s out.sh_stdio out.sh_o || { echo "bench: stdio and -o outputs differ" >&2; exit 1; }
cmp -s out.sh_o out.sh_o_json || { echo "bench: --json changed the output" >&2; exit 1; }
gzip -t out.sh_gz || { echo "bench: gzip -t refuses the output" >&2; exit 1; }
cmp -s out.sh_gz out.sh_gz_json || { echo "bench: two gzip runs differ" >&2; exit 1; }
gzip -dc out.sh_gz | cmp -s - out.sh_o || { echo "bench: gzip output is another tar" >&2; exit 1; }
zstd -q -t out.sh_zst || { echo "bench: zstd -t refuses the output" >&2; exit 1; }
zstd -q -dc out.sh_zst | cmp -s - out.sh_o || { echo "bench: zstd output is another tar" >&2; exit 1; }
for z in o:tar gz:gz; do
	sum=$(sha256sum < "out.sh_${z%:*}_json" | cut -d' ' -f1)
	grep -q "\"sha256\": \"sha256:$sum\"" "json.${z#*:}" ||
		{ echo "bench: --json digest of the ${z#*:} output is wrong" >&2; exit 1; }
done

# Peak RSS (KB) at two input sizes.
base=$(rss "$S" --version)
for z in tar tar.gz tar.zst; do
	eval "rss_small_$(echo $z | tr . _)=\$(rss \"\$S\" \$MAP -o out.rss small.$z)"
	eval "rss_usr_$(echo $z | tr . _)=\$(rss \"\$S\" \$MAP -o out.rss usr.$z)"
done
rm -f out.*

sz() { echo $(($(stat -c %s "$1") >> 20)); }
printf 'input: %s MB tar (%s entries), %s MB tar.gz, %s MB tar.zst; %s cores; %s\n' \
	"$(sz usr.tar)" "$(tar -tf usr.tar | wc -l)" "$(sz usr.tar.gz)" "$(sz usr.tar.zst)" \
	"$NPROC" "$(uname -r)"
printf 'medians of %s rounds (tar.gz: %s; extract-recreate: 1); load average %s before, %s after\n\n' \
	"$RUNS" "$GZ_RUNS" "$load0" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '  %-52s %7s %7s\n' "" "wall s" "cpu s"
echo "uncompressed, page cache only (neither syncs):"
row cat "cat IN > OUT"
row sh_stdio "shiftimg - < IN > OUT"
echo "uncompressed, on disk when done:"
row cat_sync "cat IN > OUT && sync OUT"
row sh_o "shiftimg -o OUT IN (temp file, fsync, rename)"
row sh_o_json "shiftimg --json -o OUT IN (+ sha256)"
echo "tar.gz (gzip -6):"
row gzip "gzip -dc IN | gzip -6 > OUT"
row pigz "pigz -dc IN | pigz -6 -p $NPROC > OUT"
row sh_gz "shiftimg -o OUT IN"
row sh_gz_json "shiftimg --json -o OUT IN (+ 2 sha256)"
echo "tar.zst (zstd -3):"
row zstd "zstd -dc IN | zstd -3 > OUT"
row sh_zst "shiftimg -o OUT IN"
echo "extract and recreate (GNU tar -x as root, tar -c --owner-map; no sync):"
row recreate "tar"
row recreate_gz "tar.gz"

echo
echo "ratios:"
echo "  uncompressed, page cache: shiftimg takes $(ratio "$(med sh_stdio 1)" "$(med cat 1)")x the wall time of cat, $(ratio "$(med sh_stdio 2)" "$(med cat 2)")x its CPU (target <= 1.3)"
echo "  uncompressed, on disk:    shiftimg -o takes $(ratio "$(med sh_o 1)" "$(med cat_sync 1)")x the wall time of cat && sync (target <= 1.3)"
echo "                            (and $(ratio "$(med sh_o 1)" "$(med cat 1)")x that of cat alone, which leaves the data in the page cache)"
echo "  tar.gz:  shiftimg is $(ratio "$(med gzip 1)" "$(med sh_gz 1)")x faster than gzip -dc | gzip -6 (target >= 1.6), $(ratio "$(med pigz 1)" "$(med sh_gz 1)")x pigz"
echo "  tar.zst: shiftimg takes $(ratio "$(med sh_zst 1)" "$(med zstd 1)")x the wall time of zstd -dc | zstd -3 (target <= 1.3)"
echo "  extract and recreate is $(ratio "$(med recreate 1)" "$(med sh_o 1)")x slower than shiftimg -o (tar), $(ratio "$(med recreate_gz 1)" "$(med sh_gz 1)")x (tar.gz)"
echo "  --json (sha256 in the same pass): $(ratio "$(med sh_o_json 1)" "$(med sh_o 1)")x the wall time without on tar, $(ratio "$(med sh_gz_json 1)" "$(med sh_gz 1)")x on tar.gz"
echo
printf 'peak RSS of shiftimg (KB; shiftimg --version alone: %s):\n' "$base"
printf '  %-10s %12s %12s\n' "" "$(sz small.tar) MB tar" "$(sz usr.tar) MB tar"
printf '  %-10s %12s %12s\n' tar "$rss_small_tar" "$rss_usr_tar"
printf '  %-10s %12s %12s\n' tar.gz "$rss_small_tar_gz" "$rss_usr_tar_gz"
printf '  %-10s %12s %12s\n' tar.zst "$rss_small_tar_zst" "$rss_usr_tar_zst"
