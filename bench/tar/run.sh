#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# The tar backend against its floors and peers, side by side in one run,
# on a tar of about 500 MB taken from /usr:
#   uncompressed   shiftimg vs cat IN > OUT (the copy floor)
#   tar.gz         shiftimg vs gzip -dc | gzip -6 (and pigz, for reference)
#   tar.zst        shiftimg vs zstd -dc | zstd -3
#   the route users have today: GNU tar -x as root, then
#   tar -c --owner-map/--group-map
# Wall seconds and peak RSS; ratios are peer / shiftimg (> 1: faster).
#
#   bench/tar/run.sh [BUILDDIR]    (as root; BENCH_DIR for the scratch)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
B=${1:-$here/../..}
SHIFTIMG=$B/shiftimg
W=${BENCH_DIR:-/tmp/shiftimg-bench-tar}
MB=${BENCH_MB:-500}
MAP="--map 0:100000:65536"
mkdir -p "$W"
cd "$W"

if [ ! -s usr.tar ]; then
	# Whole files in path order until MB megabytes of data.
	find /usr -xdev -printf '%s %y %p\n' 2>/dev/null | sort -k3 |
		awk -v max=$((MB << 20)) '{ if ($2 == "f") t += $1; if (t > max) exit; print substr($0, index($0, "/") + 1) }' > list
	tar -C / --no-recursion --format=posix -cf usr.tar -T list
	gzip -6 -c usr.tar > usr.tar.gz
	zstd -q -3 -c usr.tar > usr.tar.zst
fi
echo "+0 +100000" > owners
cat usr.tar usr.tar.gz usr.tar.zst > /dev/null	# warm the page cache

# run N NAME CMD...: the best of N runs; prints "NAME seconds rss_kb"
# and keeps them in $NAME_s and $NAME_m
run() {
	n=$1 name=$2
	shift 2
	best=
	for i in $(seq "$n"); do
		sync
		/usr/bin/time -f '%e %M' -o time.out sh -c "$*"
		read -r s m < time.out
		if [ -z "$best" ] || awk -v a="$s" -v b="$best" 'BEGIN { exit !(a < b) }'; then
			best=$s
		fi
	done
	printf '%-30s %7.2f s %8d KB\n' "$name" "$best" "$m"
	eval "${name}_s=$best ${name}_m=$m"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

printf 'input: %s MB tar, %s MB tar.gz, %s MB tar.zst; %s cores\n' \
	$(($(stat -c %s usr.tar) >> 20)) $(($(stat -c %s usr.tar.gz) >> 20)) \
	$(($(stat -c %s usr.tar.zst) >> 20)) "$(nproc)"
# shiftimg fsyncs its output before renaming it into place: cat_fsync
# is the like-for-like floor, plain cat the one the issue names.
run 3 cat "cat usr.tar > out.tar"
run 3 cat_fsync "cat usr.tar > out.tar && sync out.tar"
run 3 shiftimg_tar "$SHIFTIMG $MAP -o out.tar usr.tar"
run 1 gzip "gzip -dc usr.tar.gz | gzip -6 > out.tar.gz"
run 1 pigz "pigz -dc usr.tar.gz | pigz -6 -p $(nproc) > out.tar.gz"
run 1 shiftimg_gz "$SHIFTIMG $MAP -o out.tar.gz usr.tar.gz"
gzip -t out.tar.gz
run 2 zstd "zstd -q -dc usr.tar.zst | zstd -q -3 > out.tar.zst"
run 2 shiftimg_zst "$SHIFTIMG $MAP -o out.tar.zst usr.tar.zst"
rm -rf x
run 1 extract_recreate "mkdir x && tar -xpf usr.tar -C x && tar -C x --format=posix --owner-map=owners --group-map=owners -cf out.tar usr"
rm -rf x
run 1 extract_recreate_gz "mkdir x && tar -xpzf usr.tar.gz -C x && tar -C x --format=posix --owner-map=owners --group-map=owners -czf out.tar.gz usr"
rm -rf x

echo
echo "ratios (peer time / shiftimg time):"
echo "  uncompressed: shiftimg is $(ratio "$shiftimg_tar_s" "$cat_s")x the time of cat (target <= 1.3), $(ratio "$shiftimg_tar_s" "$cat_fsync_s")x cat + fsync"
echo "  tar.gz: shiftimg is $(ratio "$gzip_s" "$shiftimg_gz_s")x faster than gzip -dc | gzip -6 (target >= 1.6); pigz: $(ratio "$pigz_s" "$shiftimg_gz_s")x"
echo "  tar.zst: shiftimg is $(ratio "$shiftimg_zst_s" "$zstd_s")x the time of zstd -dc | zstd -3 (target <= 1.3)"
echo "  extract+recreate: $(ratio "$extract_recreate_s" "$shiftimg_tar_s")x slower (tar), $(ratio "$extract_recreate_gz_s" "$shiftimg_gz_s")x (tar.gz)"
echo "  peak RSS of shiftimg: tar $shiftimg_tar_m KB, gz $shiftimg_gz_m KB, zst $shiftimg_zst_m KB"
