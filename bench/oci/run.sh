#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# A whole OCI image against the routes a user has today, side by side:
#   shiftimg      shiftimg --map MAP LAYOUT (every layer, the metadata,
#                 the renames and syncs, the old blobs removed): by
#                 default (the layers' own matches used again), and
#                 with the gzip made anew at --level 6 and --level 1
#                 (igzip), with the layout's size after each and the
#                 peak RSS
#   umoci route   umoci unpack as root, fuidshift the rootfs, umoci
#                 repack (which also adds a layer: the image grows)
#   layers        the sum of "shiftimg -o OUT LAYER" over the image's
#                 layers, one after another: the floor a whole-image run
#                 is measured against; and the same with --json,
#                 which computes the digests and diff_id an image needs
# Two images, each timed the five ways:
#   large  a debootstrap --variant=minbase bookworm tree (cached in
#          /var/tmp/shiftimg-bench-tree/minbase, made if missing) as the
#          first layer, and two more layers each holding another copy of
#          its /usr: about 500 MB uncompressed in three gzip layers made
#          by umoci;
#   many   the same tree's /usr cut into 32 small gzip layers (its
#          entries dealt round-robin), about 200 MB in all, where a run's
#          fixed costs per layer show.
# Every timed run starts from a fresh copy of the layout (copied and
# synced, untimed).  The tables have the medians of wall and CPU seconds.
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
	rm -rf "$L" "$B/bundle" && mkdir -p "$B"
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
M=$B/many
if [ ! -e "$M/index.json" ]; then
	rm -rf "$M" && mkdir -p "$B"
	umoci init --layout "$M"
	umoci new --image "$M:bench"
	# Every entry under usr, dealt round-robin: 32 layers of one kind.
	(cd "$TREE" && find usr -mindepth 1 | sort | split -n r/32 -d -a 2 - "$B/many.list.")
	for list in "$B"/many.list.*; do
		tar -C "$TREE" --numeric-owner --no-recursion -cf "$B/many.tar" -T "$list"
		umoci raw add-layer --image "$M:bench" "$B/many.tar"
	done
	rm -f "$B/many.tar" "$B"/many.list.*
fi

W=$B/work
# timed NAME CMD...: wall and CPU seconds of CMD, appended to $B/NAME.
timed() {
	name=$1
	shift
	/usr/bin/time -f "%e %U %S %M" -o "$B/t" "$@" >/dev/null 2>"$B/err" ||
		{ cat "$B/err" >&2; exit 1; }
	awk '{ printf "%s %.2f %d\n", $1, $2 + $3, $4 / 1024 }' "$B/t" >>"$B/$name"
}
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
col() { cut -d' ' -f"$2" "$B/$1" | median; }

# bench LAYOUT [many]: the three routes on it, RUNS times, and the table.
bench() {
	lay=$1 kind=$2
	layers=$(skopeo inspect --raw "oci:$lay:bench" |
		python3 -c 'import json,sys; print(" ".join(l["digest"][7:] for l in json.load(sys.stdin)["layers"]))')
	set -- $layers
	[ $# -ge 3 ] || { echo "the image has $# layers" >&2; exit 1; }
	mb=$(for l in $layers; do gzip -dc "$lay/blobs/sha256/$l"; done | wc -c)
	echo "image ${lay##*/}: $# gzip layers, $((mb / 1000000)) MB uncompressed, $(du -sm "$lay" | cut -f1) MB in the layout"
	rm -f "$B/shiftimg" "$B/six" "$B/fast" "$B/umoci" "$B/layers" "$B/layersj"
	for r in $(seq "$RUNS"); do
		fresh "$lay"
		timed shiftimg "$S" --map $MAP "$W"
		skopeo inspect "oci:$W:bench" >/dev/null
		du -sm "$W" | cut -f1 >"$B/size"
		fresh "$lay"
		timed six "$S" --map $MAP --level 6 "$W"
		skopeo inspect "oci:$W:bench" >/dev/null
		du -sm "$W" | cut -f1 >"$B/size6"
		fresh "$lay"
		timed fast "$S" --map $MAP --level 1 "$W"
		skopeo inspect "oci:$W:bench" >/dev/null
		du -sm "$W" | cut -f1 >"$B/size1"
		fresh "$lay"
		# One clock around the whole loop: 32 runs timed one by one
		# would add up 32 roundings to 10 ms.
		timed layers sh -c "for l in $layers; do '$S' --map $MAP -o '$W/out' '$W/blobs/sha256/'\$l || exit 1; rm -f '$W/out'; done"
		timed layersj sh -c "for l in $layers; do '$S' --json --map $MAP -o '$W/out' '$W/blobs/sha256/'\$l || exit 1; rm -f '$W/out'; done"
		fresh "$lay"
		rm -rf "$W.bundle"
		timed umoci sh -c "$(command -v umoci) unpack --image '$W:bench' '$W.bundle' && fuidshift '$W.bundle/rootfs' b:0:100000:65536 && $(command -v umoci) repack --image '$W:bench' '$W.bundle' && sync"
		rm -rf "$W.bundle"
	done
	rm -rf "$W"
	printf '%-36s %8s %8s %8s\n' route wall cpu "RSS MB"
	for n in shiftimg six fast layers layersj umoci; do
		case $n in
		shiftimg) label="shiftimg LAYOUT ($(cat "$B/size") MB)" ;;
		six) label="shiftimg --level 6 ($(cat "$B/size6") MB)" ;;
		fast) label="shiftimg --level 1 ($(cat "$B/size1") MB)" ;;
		layers) label="sum of shiftimg -o per layer" ;;
		layersj) label="the same with --json (digests)" ;;
		umoci) label="umoci unpack+fuidshift+repack" ;;
		esac
		printf '%-36s %8s %8s %8s\n' "$label" "$(col $n 1)" "$(col $n 2)" "$(col $n 3)"
	done
	awk -v s="$(col shiftimg 1)" -v six="$(col six 1)" -v f="$(col fast 1)" -v l="$(col layers 1)" -v j="$(col layersj 1)" -v u="$(col umoci 1)" -v many="$kind" 'BEGIN {
		printf "shiftimg / sum of layers: %.3f (target %s)\n", s / l, many ? "< 1" : "<= 1.05"
		printf "shiftimg / sum with digests: %.3f\n", s / j
		printf "umoci route / shiftimg:   %.1fx (target >= 10x)\n", u / s
		printf "umoci route / --level 6:  %.1fx\n", u / six
		printf "umoci route / --level 1:  %.1fx\n", u / f
	}'
}
fresh() { rm -rf "$W" && cp -a "$1" "$W" && sync; }

bench "$L" ""
echo
bench "$M" many
