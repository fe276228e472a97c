#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# A whole OCI image against the routes a user has today, side by side:
#   shiftimg      shiftimg --map MAP LAYOUT (every layer, the metadata,
#                 the renames and syncs, the old blobs removed)
#   umoci route   umoci unpack as root, fuidshift the rootfs, umoci
#                 repack (which also adds a layer: the image grows)
#   layers        the sum of "shiftimg -o OUT LAYER" over the image's
#                 layers, one after another: the floor a whole-image run
#                 is measured against
# The image: a debootstrap --variant=minbase bookworm tree (cached in
# /var/tmp/shiftimg-bench-tree/minbase, made if missing) as the first
# layer, and two more layers each holding another copy of its /usr,
# about 500 MB uncompressed in three gzip layers made by umoci.  Every
# timed run starts from a fresh copy of the layout (copied and synced,
# untimed).  The table has the medians of wall and CPU seconds.
#
# Usage (root): bench/oci/run.sh [BUILD_DIR]   (default: ./build)
# Environment: RUNS (3), BENCH_DIR (/var/tmp/shiftimg-bench-oci; the
#   layout is kept there between runs).
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
S=$build/shiftimg
RUNS=${RUNS:-3}
B=${BENCH_DIR:-/var/tmp/shiftimg-bench-oci}
TREE=/var/tmp/shiftimg-bench-tree/minbase
MAP=0:100000:65536
export LC_ALL=C
for tool in umoci skopeo fuidshift python3; do
	command -v $tool >/dev/null || { echo "$tool is missing" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "run it as root" >&2; exit 1; }
exec 9>/tmp/shiftimg-bench.lock
flock 9

if [ ! -d "$TREE/usr" ]; then
	mkdir -p "$(dirname "$TREE")"
	debootstrap --variant=minbase bookworm "$TREE" >/dev/null
fi

L=$B/image
if [ ! -e "$L/index.json" ]; then
	rm -rf "$B" && mkdir -p "$B"
	umoci init --layout "$L"
	umoci new --image "$L:bench"
	umoci unpack --image "$L:bench" "$B/bundle" >/dev/null
	cp -a "$TREE/." "$B/bundle/rootfs/"
	umoci repack --refresh-bundle --image "$L:bench" "$B/bundle" >/dev/null
	for copy in a b; do
		mkdir -p "$B/bundle/rootfs/opt/$copy"
		cp -a "$TREE/usr" "$B/bundle/rootfs/opt/$copy/"
		umoci repack --refresh-bundle --image "$L:bench" "$B/bundle" >/dev/null
	done
	rm -rf "$B/bundle"
fi
layers=$(skopeo inspect --raw "oci:$L:bench" |
	python3 -c 'import json,sys; print(" ".join(l["digest"][7:] for l in json.load(sys.stdin)["layers"]))')
set -- $layers
[ $# -ge 3 ] || { echo "the image has $# layers" >&2; exit 1; }
mb=$(for l in $layers; do gzip -dc "$L/blobs/sha256/$l"; done | wc -c)
echo "image: $# gzip layers, $((mb / 1000000)) MB uncompressed, $(du -sm "$L" | cut -f1) MB in the layout"

W=$B/work
fresh() { rm -rf "$W" && cp -a "$L" "$W" && sync; }
# timed NAME CMD...: wall and CPU seconds of CMD, appended to $B/NAME.
timed() {
	name=$1
	shift
	/usr/bin/time -f "%e %U %S" -o "$B/t" "$@" >/dev/null 2>"$B/err" ||
		{ cat "$B/err" >&2; exit 1; }
	awk '{ printf "%s %.2f\n", $1, $2 + $3 }' "$B/t" >>"$B/$name"
}
layer_sum() {
	for l in $layers; do
		/usr/bin/time -f "%e %U %S" -a -o "$B/lt" \
			"$S" --map $MAP -o "$W/out" "$W/blobs/sha256/$l" || exit 1
		rm -f "$W/out"
	done
}

rm -f "$B/shiftimg" "$B/umoci" "$B/layers"
for r in $(seq "$RUNS"); do
	fresh
	timed shiftimg "$S" --map $MAP "$W"
	skopeo inspect "oci:$W:bench" >/dev/null
	fresh
	rm -f "$B/lt"
	layer_sum
	awk '{ w += $1; c += $2 + $3 } END { printf "%.2f %.2f\n", w, c }' "$B/lt" >>"$B/layers"
	fresh
	rm -rf "$W.bundle"
	timed umoci sh -c "$(command -v umoci) unpack --image '$W:bench' '$W.bundle' && fuidshift '$W.bundle/rootfs' b:0:100000:65536 && $(command -v umoci) repack --image '$W:bench' '$W.bundle' && sync"
	rm -rf "$W.bundle"
done
rm -rf "$W"

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
col() { cut -d' ' -f"$2" "$B/$1" | median; }
printf '%-34s %8s %8s\n' route wall cpu
for n in shiftimg layers umoci; do
	case $n in
	shiftimg) label="shiftimg LAYOUT" ;;
	layers) label="sum of shiftimg -o per layer" ;;
	umoci) label="umoci unpack+fuidshift+repack" ;;
	esac
	printf '%-34s %8s %8s\n' "$label" "$(col $n 1)" "$(col $n 2)"
done
awk -v s="$(col shiftimg 1)" -v l="$(col layers 1)" -v u="$(col umoci 1)" 'BEGIN {
	printf "shiftimg / sum of layers: %.3f (target <= 1.05)\n", s / l
	printf "umoci route / shiftimg:   %.1fx (target >= 10x)\n", u / s
}'
