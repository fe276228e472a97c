#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# ext4 image benchmark, side by side in one run:
#   - shiftimg in place, with its crash journal (the default) and with
#     SHIFTIMG_JOURNAL=off;
#   - loop mount + fuidshift (lxd-tools) + umount;
#   - debugfs `sif` scripting, one sif for the uid and one for the gid
#     of each regular file (ACLs untouched), on the first SIF_N files
#     and extrapolated linearly to every used inode: it is far too slow
#     to run on all of them;
#   - the floor (bench/ext4/floor.c): read the used part of every inode
#     table and write it back, in the same runs shiftimg uses, then
#     fsync.  No parsing, no checksums.
# Images (bench/ext4/populate.py: empty files, 100 owners, 1% with a
# two-entry ACL), filled through the kernel:
#   small  200,000 files in a 2 GiB image with 262,144 inodes
#   large  the same 200,000 files in a sparse 64 GiB image with
#          4,194,304 inodes (16x the groups and inode tables): time must
#          follow used inodes, not image size
#   1m     1,000,000 files in an 8 GiB image with 1,048,576 inodes
# Cache: warm.  Before every timed run the image is copied afresh from
# its pristine copy and synced, so each tool starts with the image in
# the page cache and nothing dirty; every timed run ends with its data
# on disk (fsync, or umount).  Each round times every tool once, so the
# noise of a shared machine falls on all of them alike; the table has
# medians of wall and CPU (user + system) seconds.
#
# Usage (root): bench/ext4/run.sh [BUILD_DIR]   (default: ./build)
# Environment: RUNS (3), SIF_N (20000; 0: every file), SETS ("small
#   large 1m"), BENCH_DIR (/var/tmp/shiftimg-bench-ext4), BUILD_ONLY=1
#   makes the pristine images and stops, CLEAN=1 removes them at the
#   end (they are kept and reused otherwise).
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
S=$build/shiftimg
RUNS=${RUNS:-3}
SIF_N=${SIF_N:-20000}
SETS=${SETS:-small large 1m}
MAP=0:100000:65536
B=${BENCH_DIR:-/var/tmp/shiftimg-bench-ext4}

[ "$(id -u)" = 0 ] || { echo "bench: needs root" >&2; exit 1; }
# Loop mounts in a mount namespace of our own: a copy of one in another
# namespace would outlive umount and keep writing to the image.
if [ -z "${BENCH_PRIVATE_NS:-}" ]; then
	BENCH_PRIVATE_NS=1 exec unshare -m --propagation private sh "$0" "$@"
fi
for t in fuidshift debugfs mke2fs dumpe2fs python3; do
	command -v $t >/dev/null || { echo "bench: needs $t" >&2; exit 1; }
done
make -C "$build" -s shiftimg >/dev/null
mkdir -p "$B/mnt"
cc -O2 -o "$B/floor" "$top/bench/ext4/floor.c" -lext2fs -lcom_err

cleanup() {
	umount "$B/mnt" 2>/dev/null || true
	rm -f "$B"/*.img "$B"/*.img.shiftimg-journal
	[ "${CLEAN:-}" = 1 ] && rm -f "$B"/*.pristine "$B"/*.sif "$B"/*.sifn "$B"/*.made
	return 0
}
trap cleanup EXIT

# make_image NAME SIZE INODES FILES: a pristine image of FILES files
# (kept while its parameters stay the same), and the debugfs script
# that shifts the first SIF_N of them.
make_image() {
	name=$1 size=$2 inodes=$3 files=$4
	p=$B/$name.pristine
	if [ ! -s "$p" ] || [ "$(cat "$B/$name.made" 2>/dev/null)" != "$size $inodes $files" ]; then
		echo "building $name: $files files, $inodes inodes, $size..."
		rm -f "$p" "$B/$name.made"
		truncate -s "$size" "$p"
		mke2fs -q -F -t ext4 -N "$inodes" -E lazy_itable_init=1 "$p"
		# noinit_itable: no zeroing of the unused inode tables behind our back.
		mount -o loop,acl,noinit_itable "$p" "$B/mnt"
		python3 "$top/bench/ext4/populate.py" "$B/mnt" "$files"
		umount "$B/mnt"
		e2fsck -fn "$p" >"$B/fsck" 2>&1 || { cat "$B/fsck"; echo "bench: $name not clean" >&2; exit 1; }
		echo "$size $inodes $files" >"$B/$name.made"
	fi
	[ -s "$B/$name.sif" ] && [ "$(cat "$B/$name.sifn" 2>/dev/null)" = "$SIF_N $(cat "$B/$name.made")" ] &&
		return 0
	# debugfs's set_inode_field takes the full 32-bit uid and gid.
	mount -o loop,ro "$p" "$B/mnt"
	find "$B/mnt" -xdev -type f -printf '%i %U %G\n' |
		{ if [ "$SIF_N" -gt 0 ]; then head -n "$SIF_N"; else cat; fi; } |
		awk '{printf "sif <%s> uid %d\nsif <%s> gid %d\n", $1, $2 + 100000, $1, $3 + 100000}' \
		>"$B/$name.sif"
	umount "$B/mnt"
	echo "$SIF_N $(cat "$B/$name.made")" >"$B/$name.sifn"
}

# fresh NAME: the image as built, in the page cache, nothing dirty.
fresh() {
	rm -f "$B/$1.img.shiftimg-journal"
	cp --sparse=always --reflink=never "$B/$1.pristine" "$B/$1.img"
	sync
}

# secs CMD...: wall and CPU (user + system) seconds of one run, to the
# millisecond (bash's time: /usr/bin/time's %e has 10 ms steps, a sixth
# of the floor at 200k inodes).
secs() {
	bash -c 'TIMEFORMAT="%3R %3U %3S"; { time "$@" >/dev/null 2>"$0.err"; } 2>"$0"' \
		"$B/time" "$@" || { cat "$B/time.err" >&2; return 1; }
	awk '{printf "%s %.3f", $1, $2 + $3}' "$B/time"
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
	t=$(secs "$@") || { echo "bench: $tool failed on $name" >&2; exit 1; }
	echo "$name $tool $t" >>"$B/times"
}

# A shifted image must be shifted (a run that did nothing would be fast
# for nothing), and clean (checked in the first round).
verify() {
	[ "$3" != 1 ] || e2fsck -fn "$B/$1.img" >"$B/fsck" 2>&1 ||
		{ cat "$B/fsck"; echo "bench: e2fsck after shiftimg ($2) on $1" >&2; exit 1; }
	ino=$(head -n 1 "$B/$1.sif" | awk '{print $2}')
	debugfs -R "stat $ino" "$B/$1.img" 2>/dev/null | grep -q 'User: *1[0-9][0-9][0-9][0-9][0-9] ' ||
		{ echo "bench: shiftimg ($2) left $ino of $1 unshifted" >&2; exit 1; }
}

rounds() {	# name
	img=$B/$1.img
	for r in $(seq "$RUNS"); do
		timed "$1" floor "$B/floor" "$img"
		timed "$1" off env SHIFTIMG_JOURNAL=off "$S" -q --map $MAP "$img"
		verify "$1" "journal off" "$r"
		timed "$1" on "$S" -q --map $MAP "$img"
		verify "$1" "journal on" "$r"
		timed "$1" fuidshift "$B/mount-fuidshift" "$img"
		timed "$1" sif debugfs -w -f "$B/$1.sif" "$img"
	done
}

median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
med() { awk -v s="$1" -v k="$2" -v f="$3" '$1 == s && $2 == k {print $f}' "$B/times" | median; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2f", a / b; else printf "n/a"}'; }
cell() { printf '%s (%s)' "$(med "$1" "$2" 3)" "$(med "$1" "$2" 4)"; }
# Used inodes, from the superblock.
used_inodes() { dumpe2fs -h "$1" 2>/dev/null | awk -F: '/^Inode count/ {n = $2} /^Free inodes/ {f = $2} END {print n - f}'; }
inode_count() { dumpe2fs -h "$1" 2>/dev/null | awk -F: '/^Inode count/ {print $2 + 0}'; }

for set in $SETS; do
	case $set in
	small) make_image small 2G 262144 200000 ;;
	large) make_image large 64G 4194304 200000 ;;
	1m) make_image 1m 8G 1048576 1000000 ;;
	*) echo "bench: unknown set $set" >&2; exit 2 ;;
	esac
done
[ "${BUILD_ONLY:-}" = 1 ] && exit 0

: >"$B/times"
for set in $SETS; do
	echo "timing $set ($RUNS rounds)..."
	fresh "$set"
	# A first untimed run, so that no tool pays for the others' start.
	SHIFTIMG_JOURNAL=off "$S" -q --map $MAP "$B/$set.img" >/dev/null
	rounds "$set"
done

echo
echo "ext4 images, warm cache, in place; median of $RUNS; seconds wall (cpu)"
printf '%-6s %8s %8s %5s | %-12s %-12s %-12s %-14s %-10s\n' \
	image used inodes size floor "shiftimg" "journal off" mount+fuid "sif*"
for set in $SETS; do
	p=$B/$set.pristine
	n=$(used_inodes "$p")
	nsif=$(($(wc -l <"$B/$set.sif") / 2))
	si=$(med "$set" sif 3)
	# debugfs ran on nsif files: scaled to every used inode.
	six=$(awk -v t="$si" -v k="$nsif" -v n="$n" 'BEGIN {printf "%.1f", t * n / k}')
	echo "$set $six" >>"$B/times.sif"
	printf '%-6s %8s %8s %5s | %-12s %-12s %-12s %-14s %-10s\n' \
		"$set" "$n" "$(inode_count "$p")" "$(du --apparent-size -h "$p" | cut -f1)" \
		"$(cell "$set" floor)" "$(cell "$set" on)" "$(cell "$set" off)" \
		"$(cell "$set" fuidshift)" "$six"
done
echo
echo "ratios (wall)        shiftimg/floor   fuidshift/shiftimg   sif/shiftimg"
echo "targets                  <= 1.5             >= 30"
for set in $SETS; do
	fl=$(med "$set" floor 3) on=$(med "$set" on 3) off=$(med "$set" off 3)
	fu=$(med "$set" fuidshift 3)
	six=$(awk -v s="$set" '$1 == s {print $2}' "$B/times.sif")
	printf '%-6s journal on     %8s %18s %16s\n' "$set" "$(ratio "$on" "$fl")" "$(ratio "$fu" "$on")" "$(ratio "$six" "$on")"
	printf '%-6s journal off    %8s %18s %16s\n' "$set" "$(ratio "$off" "$fl")" "$(ratio "$fu" "$off")" "$(ratio "$six" "$off")"
done
rm -f "$B/times.sif"
if [ -n "$(echo "$SETS" | grep -w small)" ] && [ -n "$(echo "$SETS" | grep -w large)" ]; then
	echo
	echo "time follows used inodes: large/small (same files, 16x the inodes and 32x the size):" \
		"journal on $(ratio "$(med large on 3)" "$(med small on 3)")," \
		"off $(ratio "$(med large off 3)" "$(med small off 3)")," \
		"floor $(ratio "$(med large floor 3)" "$(med small floor 3)")"
fi
if [ -n "$(echo "$SETS" | grep -w small)" ] && [ -n "$(echo "$SETS" | grep -w 1m)" ]; then
	echo "scaling: 1m/small (5x the files): journal on $(ratio "$(med 1m on 3)" "$(med small on 3)")," \
		"off $(ratio "$(med 1m off 3)" "$(med small off 3)")," \
		"floor $(ratio "$(med 1m floor 3)" "$(med small floor 3)")," \
		"fuidshift $(ratio "$(med 1m fuidshift 3)" "$(med small fuidshift 3)")"
fi
echo
echo "shiftimg = the default (crash journal: the old bytes journaled and synced"
echo "before the in-place writes); journal off = SHIFTIMG_JOURNAL=off."
echo "* debugfs sif ran on $SIF_N files (0: all) of each image and is extrapolated"
echo "  linearly to every used inode."
