#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# ext4 image benchmark, side by side in one run:
#   shiftimg (in place, SHIFTIMG_JOURNAL=off and the journaled default),
#   loop mount + fuidshift + umount, debugfs `sif` scripting (on a
#   subset, extrapolated: it is far too slow for every inode), and the
#   floor (bench/ext4/floor.c: read and write back the used inode-table
#   blocks, fsync).
# Images (bench/ext4/populate.py: empty files, 100 owners, 1% with ACLs):
#   small  200,000 files in a 2 GiB image with 262,144 inodes
#   large  200,000 files in an 8 GiB image with 1,048,576 inodes (4x
#          the groups and inode tables): time must follow used inodes,
#          not image size
#   1m     1,000,000 files in the same 8 GiB, 1,048,576-inode layout
# Cache policy: warm.  Before every timed run the image is copied fresh
# from its pristine copy and synced, so each tool starts with the whole
# image in the page cache and nothing dirty.  Every timed run ends with
# its data on disk (fsync, or umount for the mount-based tools).
#
# Usage (root): bench/ext4/run.sh [BUILD_DIR]   (default: ./build)
# Environment: RUNS (3), SIF_N (all: how many files debugfs
#   shifts; fewer are extrapolated to all),
#   SETS ("small large 1m"), BENCH_DIR, KEEP=1 keeps the images.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
S=$build/shiftimg
RUNS=${RUNS:-3}
SIF_N=${SIF_N:-0}
SETS=${SETS:-small large 1m}
MAP=0:100000:65536
B=${BENCH_DIR:-/var/tmp/shiftimg-bench-ext4}

[ "$(id -u)" = 0 ] || { echo "bench: needs root" >&2; exit 1; }
for t in fuidshift debugfs mke2fs; do
	command -v $t >/dev/null || { echo "bench: needs $t" >&2; exit 1; }
done
make -C "$build" -s shiftimg >/dev/null
mkdir -p "$B/mnt"
cc -O2 -o "$B/floor" "$top/bench/ext4/floor.c" -lext2fs -lcom_err

cleanup() {
	umount "$B/mnt" 2>/dev/null || true
	[ "${KEEP:-}" = 1 ] || rm -f "$B"/*.img "$B"/*.pristine "$B"/*.sif
}
trap cleanup EXIT

# make_image NAME SIZE INODES FILES: a pristine image of FILES files,
# and the debugfs script that shifts them (the first SIF_N, if set).
make_image() {
	name=$1 size=$2 inodes=$3 files=$4
	p=$B/$name.pristine
	if [ ! -s "$p" ] || [ "$(cat "$B/$name.made" 2>/dev/null)" != "$size $inodes $files" ]; then
		echo "building $name: $files files in $size..."
		rm -f "$p"
		truncate -s "$size" "$p"
		mke2fs -q -F -t ext4 -N "$inodes" "$p"
		mount -o loop,acl "$p" "$B/mnt"
		python3 "$top/bench/ext4/populate.py" "$B/mnt" "$files"
		umount "$B/mnt"
		echo "$size $inodes $files" >"$B/$name.made"
	fi
	# debugfs's set_inode_field takes the full 32-bit uid and gid.
	mount -o loop,ro "$p" "$B/mnt"
	find "$B/mnt" -xdev -type f -printf '%i %U %G\n' |
		{ if [ "$SIF_N" -gt 0 ]; then head -n "$SIF_N"; else cat; fi; } |
		awk '{printf "sif <%s> uid %d\nsif <%s> gid %d\n", $1, $2 + 100000, $1, $3 + 100000}' \
		>"$B/$name.sif"
	umount "$B/mnt"
}

# fresh NAME: the image as built, in the page cache, nothing dirty.
fresh() {
	cp --sparse=always --reflink=never "$B/$1.pristine" "$B/$1.img"
	sync
}

# secs CMD...: wall and CPU (user + system) seconds of one run.
secs() {
	/usr/bin/time -f '%e %U %S' -o "$B/time" "$@" >/dev/null 2>"$B/err" ||
		{ cat "$B/err" >&2; return 1; }
	awk '{printf "%s %.2f", $1, $2 + $3}' "$B/time"
}

# The whole mount-based route, as one command for time(1).
printf '#!/bin/sh\nset -e\nmount -o loop,acl "$1" "%s"\nfuidshift "%s" b:%s\numount "%s"\n' \
	"$B/mnt" "$B/mnt" "$MAP" "$B/mnt" >"$B/mount-fuidshift"
chmod +x "$B/mount-fuidshift"

# timed NAME TOOL CMD...: a fresh image, one timed run, its line in times.
timed() {
	name=$1 tool=$2
	shift 2
	fresh "$name"
	t=$(secs "$@") || { echo "bench: $tool failed" >&2; exit 1; }
	echo "$name $tool $t" >>"$B/times"
}

# One timed run of each tool per round, so that the noise of a shared
# machine falls on all of them alike; medians are printed.
rounds() {	# name
	img=$B/$1.img
	for r in $(seq "$RUNS"); do
		timed "$1" floor "$B/floor" "$img"
		timed "$1" shiftimg env SHIFTIMG_JOURNAL=off "$S" -q --map $MAP "$img"
		e2fsck -fn "$img" >"$B/fsck" 2>&1 ||
			{ cat "$B/fsck"; echo "bench: e2fsck after shiftimg" >&2; exit 1; }
		timed "$1" journaled "$S" -q --map $MAP "$img"
		timed "$1" fuidshift "$B/mount-fuidshift" "$img"
		timed "$1" sif debugfs -w -f "$B/$1.sif" "$img"
	done
}

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
med() { awk -v s="$1" -v k="$2" -v f="$3" '$1 == s && $2 == k {print $f}' "$B/times" | median; }

# Used inodes and image size, for the table.
used_inodes() { dumpe2fs -h "$1" 2>/dev/null | awk -F: '/^Inode count/ {n=$2} /^Free inodes/ {f=$2} END {print n - f}'; }

: >"$B/times"
for set in $SETS; do
	case $set in
	small) make_image small 2G 262144 200000 ;;
	large) make_image large 8G 1048576 200000 ;;
	1m) make_image 1m 8G 1048576 1000000 ;;
	*) echo "bench: unknown set $set" >&2; exit 2 ;;
	esac
done
for set in $SETS; do
	echo "timing $set ($RUNS rounds)..."
	fresh "$set"
	# A first untimed run of each, so that no tool pays for the others' start.
	SHIFTIMG_JOURNAL=off "$S" -q --map $MAP "$B/$set.img" >/dev/null
	rounds "$set"
done

echo
echo "ext4 images, warm cache (fresh copy, synced, before each run); median of $RUNS; seconds wall (cpu)"
printf '%-6s %8s %6s | %-13s %-13s %-13s %-13s %-20s | %9s %9s %9s %9s\n' \
	image inodes size floor shiftimg journaled mount+fuid "debugfs sif" \
	shift/flr journ/flr fuid/shift sif/shift
for set in $SETS; do
	p=$B/$set.pristine
	n=$(used_inodes "$p")
	size=$(du --apparent-size -h "$p" | cut -f1)
	nsif=$(($(wc -l <"$B/$set.sif") / 2))
	fl=$(med "$set" floor 3) sh=$(med "$set" shiftimg 3) jo=$(med "$set" journaled 3)
	fu=$(med "$set" fuidshift 3) si=$(med "$set" sif 3)
	# debugfs ran on nsif of the files: scale to all used inodes.
	six=$(awk -v t="$si" -v k="$nsif" -v n="$n" 'BEGIN {printf "%.2f", t * n / k}')
	cell() { printf '%s (%s)' "$(med "$set" "$1" 3)" "$(med "$set" "$1" 4)"; }
	ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", b > 0 ? a / b : 0}'; }
	printf '%-6s %8s %6s | %-13s %-13s %-13s %-13s %-20s | %9s %9s %9s %9s\n' \
		"$set" "$n" "$size" "$(cell floor)" "$(cell shiftimg)" "$(cell journaled)" \
		"$(cell fuidshift)" "${six}*" \
		"$(ratio "$sh" "$fl")" "$(ratio "$jo" "$fl")" "$(ratio "$fu" "$sh")" "$(ratio "$six" "$sh")"
done
echo "* debugfs: one sif for the uid and one for the gid of each regular file (ACLs"
echo "  untouched); when run on fewer files (SIF_N) it is extrapolated linearly to"
echo "  every used inode."
echo "shiftimg = SHIFTIMG_JOURNAL=off; journaled = the default (old blocks read back, journal fsynced)."
echo "Targets: shift/flr <= 1.5, fuid/shift >= 30; large ~ small (time follows used inodes),"
echo "1m ~ 5x small."
