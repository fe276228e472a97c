#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# What the journal costs, side by side in one run:
#   ext4 images: shiftimg in place with SHIFTIMG_JOURNAL=off, with the
#     journal (the default), and the floor (bench/ext4/floor.c: read and
#     write back the used inode-table blocks, fsync), on an image of
#     200,000 files in 262,144 inodes and one of 1,000,000 files in
#     1,048,576 inodes (bench/ext4/populate.py: empty files, 100 owners,
#     1% with an ACL).  Every run ends with its data on disk.  Cache:
#     warm; before each timed run the image is copied fresh from its
#     pristine copy and synced.
#   a directory tree: shiftimg with and without the journal on a tree of
#     200,000 files (bench/tree/mktree.py: ACLs, capabilities, setuid,
#     hard links) in a loop-mounted ext4 image, and without the journal
#     followed by sync -f, since the journaled run ends with a syncfs
#     (the journal goes only once the tree is on disk).  Each timed run
#     is undone by an untimed --reverse; the tree is synced before each.
# Each round times every tool once, in an order that rotates from round
# to round, so that the noise of a shared machine falls on all alike;
# the tables have the medians of wall and CPU (user + system) seconds.
#
# Usage (root): flock /tmp/shiftimg-bench.lock bench/journal/run.sh [BUILD_DIR]
# Environment: RUNS (5), SETS ("200k 1m tree"), TREE_FILES (200000),
#   TREE_DIRS (2000), BENCH_DIR (/var/tmp/shiftimg-bench-journal),
#   KEEP=1 keeps the pristine images and the tree for the next run.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
S=$build/shiftimg
RUNS=${RUNS:-5}
SETS=${SETS:-200k 1m tree}
TREE_FILES=${TREE_FILES:-200000}
TREE_DIRS=${TREE_DIRS:-2000}
MAP=0:100000:65536
B=${BENCH_DIR:-/var/tmp/shiftimg-bench-journal}

[ "$(id -u)" = 0 ] || { echo "bench: needs root (loop mounts)" >&2; exit 1; }
make -C "$build" -s shiftimg >/dev/null
mkdir -p "$B/mnt" "$B/tmnt"
cc -O2 -o "$B/floor" "$top/bench/ext4/floor.c" -lext2fs -lcom_err

cleanup() {
	umount "$B/mnt" 2>/dev/null || true
	umount "$B/tmnt" 2>/dev/null || true
	rm -f "$B"/*.img.shiftimg-journal
	[ "${KEEP:-}" = 1 ] || rm -f "$B"/*.img "$B"/*.pristine "$B"/*.made
}
trap cleanup EXIT

# secs CMD...: wall and CPU (user + system) seconds of one run, to the
# millisecond (bash's time: /usr/bin/time's %e has 10 ms steps, a sixth
# of the floor at 200k inodes).
secs() {
	bash -c 'TIMEFORMAT="%3R %3U %3S"; { time "$@" >/dev/null 2>"$0.err"; } 2>"$0"' \
		"$B/time" "$@" || { cat "$B/time.err" >&2; return 1; }
	awk '{printf "%s %.3f", $1, $2 + $3}' "$B/time"
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# med SET TOOL FIELD: the median of field 3 (wall) or 4 (cpu).
med() { awk -v s="$1" -v k="$2" -v f="$3" '$1 == s && $2 == k {print $f}' "$B/times" | median; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {print (b > 0 ? sprintf("%.2f", a / b) : "n/a")}'; }
# rotate R WORDS...: the words turned left R - 1 times.
rotate() {
	r=$1
	shift
	while [ "$r" -gt 1 ]; do
		set -- "$@" "$1"
		shift
		r=$((r - 1))
	done
	echo "$@"
}

# ---- ext4 images ----

# make_image NAME INODES FILES SIZE: the pristine image, built once.
make_image() {
	p=$B/$1.pristine
	if [ ! -s "$p" ] || [ "$(cat "$B/$1.made" 2>/dev/null)" != "$4 $2 $3" ]; then
		echo "building $1: $3 files in $2 inodes ($4)..."
		rm -f "$p"
		truncate -s "$4" "$p"
		mke2fs -q -F -t ext4 -N "$2" "$p"
		mount -o loop,acl "$p" "$B/mnt"
		python3 "$top/bench/ext4/populate.py" "$B/mnt" "$3"
		umount "$B/mnt"
		echo "$4 $2 $3" >"$B/$1.made"
	fi
}

# One timed run of TOOL on a fresh copy of image NAME.
image_run() {	# name tool
	img=$B/$1.img
	cp --sparse=always --reflink=never "$B/$1.pristine" "$img"
	sync
	case $2 in
	floor) t=$(secs "$B/floor" "$img") ;;
	off) t=$(secs env SHIFTIMG_JOURNAL=off "$S" -q --map $MAP "$img") ;;
	journal) t=$(secs "$S" -q --map $MAP "$img") ;;
	esac || { echo "bench: $2 failed on $1" >&2; exit 1; }
	echo "$1 $2 $t" >>"$B/$log"
	if [ "$2" != floor ]; then
		e2fsck -fn "$img" >"$B/fsck" 2>&1 ||
			{ cat "$B/fsck"; echo "bench: e2fsck after $2" >&2; exit 1; }
		[ ! -e "$img.shiftimg-journal" ] || { echo "bench: a journal was left" >&2; exit 1; }
	fi
}

image_set() {	# name
	echo "timing $1 ($RUNS rounds)..."
	# A first untimed run of each, so that no tool pays for the others' start.
	log=untimed
	for tool in floor off journal; do image_run "$1" $tool; done
	log=times
	for r in $(seq "$RUNS"); do
		for tool in $(rotate "$r" floor off journal); do
			image_run "$1" $tool
		done
	done
}

image_table() {
	echo
	echo "ext4 images, warm cache, each run ends on disk; median of $RUNS; seconds wall (cpu)"
	printf '%-5s %9s | %-15s %-15s %-15s | %13s %13s %11s\n' \
		image inodes floor "journal off" journal \
		journal/floor off/floor journal/off
	for set in $SETS; do
		[ "$set" = tree ] && continue
		n=$(dumpe2fs -h "$B/$set.pristine" 2>/dev/null |
			awk -F: '/^Inode count/ {n=$2} /^Free inodes/ {f=$2} END {print n - f}')
		fl=$(med "$set" floor 3) of=$(med "$set" off 3) jo=$(med "$set" journal 3)
		cell() { printf '%s (%s)' "$(med "$set" "$1" 3)" "$(med "$set" "$1" 4)"; }
		printf '%-5s %9s | %-15s %-15s %-15s | %13s %13s %11s\n' \
			"$set" "$n" "$(cell floor)" "$(cell off)" "$(cell journal)" \
			"$(ratio "$jo" "$fl")" "$(ratio "$of" "$fl")" "$(ratio "$jo" "$of")"
	done
	echo "Targets (issues 3 and 5): journal/floor <= 1.5 (the default run, journal included)."
}

# ---- the tree ----

make_tree() {
	rm -f "$B/tree.img"
	truncate -s 8G "$B/tree.img"
	mkfs.ext4 -q -F -N $((TREE_FILES * 3)) "$B/tree.img"
	mount -o loop "$B/tree.img" "$B/tmnt"
	echo "building the tree: $TREE_FILES files in $TREE_DIRS directories..."
	python3 "$top/bench/tree/mktree.py" "$B/tmnt/t" "$TREE_FILES" "$TREE_DIRS"
	sync
}

# One timed run of TOOL on the tree, and the untimed run that undoes it.
tree_run() {	# tool
	tree=$B/tmnt/t
	sync
	case $1 in
	off) t=$(secs env SHIFTIMG_JOURNAL=off "$S" -q --map $MAP "$tree") ;;
	offsync) t=$(secs sh -c 'SHIFTIMG_JOURNAL=off "$0" -q --map "$1" "$2" && sync -f "$2"' \
		"$S" $MAP "$tree") ;;
	journal) t=$(secs "$S" -q --map $MAP "$tree") ;;
	esac || { echo "bench: $1 failed on the tree" >&2; exit 1; }
	echo "tree $1 $t" >>"$B/$log"
	[ ! -e "$tree.shiftimg-journal" ] || { echo "bench: a journal was left" >&2; exit 1; }
	# Journaled, so that it also removes the stamp the journaled run left.
	"$S" -q --reverse --allow-privileged --map $MAP "$tree" >/dev/null
}

tree_set() {
	make_tree
	tn=$(find "$B/tmnt/t" | wc -l)
	echo "timing the tree, $tn objects ($RUNS rounds)..."
	log=untimed
	for tool in off journal; do tree_run $tool; done
	log=times
	for r in $(seq "$RUNS"); do
		for tool in $(rotate "$r" off offsync journal); do
			tree_run $tool
		done
	done
	umount "$B/tmnt"
	rm -f "$B/tree.img"
}

tree_table() {
	echo
	echo "directory tree, $tn objects on a loop-mounted ext4; median of $RUNS; seconds wall (cpu)"
	printf '%-15s %-15s %-15s | %11s %15s\n' "journal off" "off + sync -f" journal \
		journal/off journal/offsync
	of=$(med tree off 3) os=$(med tree offsync 3) jo=$(med tree journal 3)
	cell() { printf '%s (%s)' "$(med tree "$1" 3)" "$(med tree "$1" 4)"; }
	printf '%-15s %-15s %-15s | %11s %15s\n' "$(cell off)" "$(cell offsync)" "$(cell journal)" \
		"$(ratio "$jo" "$of")" "$(ratio "$jo" "$os")"
	echo "The journaled run ends with a syncfs; off + sync -f ends on disk too."
}

: >"$B/times"
for set in $SETS; do
	case $set in
	200k) make_image 200k 262144 200000 2G ;;
	1m) make_image 1m 1048576 1000000 8G ;;
	tree) ;;
	*) echo "bench: unknown set $set" >&2; exit 2 ;;
	esac
done
for set in $SETS; do
	case $set in
	tree) tree_set ;;
	*) image_set "$set" ;;
	esac
done
case " $SETS " in *" 200k "*|*" 1m "*) image_table ;; esac
case " $SETS " in *" tree "*) tree_table ;; esac
