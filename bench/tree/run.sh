#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Tree benchmark: shiftimg against fuidshift and the physical floor (a
# bare fstatat + fchownat walk), side by side in one run, on
#   - a 200,000-file tree over 2,000 directories (ACLs, capabilities,
#     setuid files, hard links), and
#   - a Debian minbase rootfs from debootstrap.
# Each tool shifts the tree forward (timed); shiftimg --reverse puts it
# back (untimed).  The floor runs on a copy, since a bare chown drops
# capabilities and setuid bits.  Also counts, for fuidshift and
# shiftimg, the entries that differ from the kernel's idmapped view.
#
# Usage (root): bench/tree/run.sh [BUILD_DIR]   (default: ./build)
# Environment: FILES (200000), DIRS (2000), RUNS (3), KEEP=1 keeps $B.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
S=$build/shiftimg
FILES=${FILES:-200000}
DIRS=${DIRS:-2000}
RUNS=${RUNS:-3}
MAP=0:100000:65536
B=${BENCH_DIR:-/var/tmp/shiftimg-bench-tree}

[ "$(id -u)" = 0 ] || { echo "bench: needs root" >&2; exit 1; }
command -v fuidshift >/dev/null || { echo "bench: needs fuidshift (lxd-tools)" >&2; exit 1; }
make -C "$build" -s shiftimg tests/tools/lsid tests/tools/idmount >/dev/null
mkdir -p "$B"
cc -O2 -o "$B/floor" "$top/bench/tree/floor.c" -lpthread

cleanup() {
	umount "$B/view" 2>/dev/null || true
	umount "$B/mnt" 2>/dev/null || true
	[ "${KEEP:-}" = 1 ] || rm -rf "$B/fs.img" "$B/view"
}
trap cleanup EXIT
truncate -s 8G "$B/fs.img"
mkfs.ext4 -q -F "$B/fs.img"
mkdir -p "$B/mnt" "$B/view"
mount -o loop "$B/fs.img" "$B/mnt"

echo "building a $FILES-file tree over $DIRS directories..."
python3 "$top/bench/tree/mktree.py" "$B/mnt/t200k" "$FILES" "$DIRS"
if [ ! -d "$B/minbase/usr" ]; then
	echo "debootstrap --variant=minbase bookworm (cached in $B/minbase)..."
	debootstrap --variant=minbase bookworm "$B/minbase" \
		"${MIRROR:-http://deb.debian.org/debian}" >"$B/debootstrap.log" 2>&1
fi
cp -a "$B/minbase" "$B/mnt/minbase"
# Debian's rootfs has no ACLs or ids above 65535; give it a few.
setfacl -m u:1000:rwx,g:100:rx "$B/mnt/minbase/var/log"
chown -R 1000:1000 "$B/mnt/minbase/home" 2>/dev/null || true

# secs CMD...: the wall time of one run, and its CPU time (user + system,
# less disturbed than wall time when other work shares the machine).
secs() { /usr/bin/time -f '%e %U %S' -o "$B/time" "$@" >/dev/null 2>"$B/err" || {
	cat "$B/err" >&2; return 1; }; awk '{printf "%s %.2f", $1, $2 + $3}' "$B/time"; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
peak_kb() { /usr/bin/time -f %M -o "$B/mem" "$@" >/dev/null 2>&1; cat "$B/mem"; }
restore() { "$S" -q --reverse --map $MAP "$1" >/dev/null; }

# fuidshift takes the directory first and the ranges after.
printf '#!/bin/sh\nexec fuidshift "$1" b:%s\n' "$MAP" >"$B/fuidshift-wrap"
chmod +x "$B/fuidshift-wrap"

# fresh TREE: puts the pristine copy back (after tools that damage it).
fresh() {
	rm -rf "$1"
	cp -a "$1.pristine" "$1"
	sync
}

# Entries whose listing differs from the original seen through an
# idmapped mount, after CMD... TREE.
mismatches() {	# tree cmd...
	tree=$1
	shift
	"$@" "$tree" >/dev/null 2>&1 || true
	"$build/tests/tools/idmount" -r --map $MAP "$tree.pristine" "$B/view"
	"$build/tests/tools/lsid" --no-times --no-override-stat "$B/view" >"$B/want"
	umount "$B/view"
	"$build/tests/tools/lsid" --no-times --no-override-stat "$tree" >"$B/got"
	fresh "$tree"
	diff "$B/want" "$B/got" | grep -c '^>' || true
}

# One timed run of each tool per round, RUNS rounds, so that the noise
# of a shared machine falls on all of them alike; medians are printed.
rounds() {	# tree
	tree=$1
	: >"$B/times"
	for r in $(seq "$RUNS"); do
		sync
		echo "shiftimg $(secs "$S" -q --map $MAP "$tree")" >>"$B/times"
		restore "$tree"
		sync
		echo "keep $(secs "$S" -q --unmapped=keep --map $MAP "$tree")" >>"$B/times"
		restore "$tree"
		sync
		echo "j1 $(secs "$S" -q -j1 --unmapped=keep --map $MAP "$tree")" >>"$B/times"
		restore "$tree"
		sync
		echo "fuidshift $(secs "$B/fuidshift-wrap" "$tree")" >>"$B/times"
		fresh "$tree"	# fuidshift's result does not reverse cleanly
		# The floor drops capabilities and setuid bits: fresh copy after.
		echo "floor1 $(secs "$B/floor" 1 100000 "$tree")" >>"$B/times"
		fresh "$tree"
		echo "floor2 $(secs "$B/floor" 2 100000 "$tree")" >>"$B/times"
		fresh "$tree"
	done
}
med() { awk -v k="$1" '$1 == k {print $2}' "$B/times" | median; }
cpu() { awk -v k="$1" '$1 == k {print $3}' "$B/times" | median; }

report() {	# tree label
	tree=$B/mnt/$1
	cp -a "$tree" "$tree.pristine"
	n=$(find "$tree" | wc -l)
	echo
	echo "== $2: $n objects, median of $RUNS rounds"
	rounds "$tree"
	f1=$(med floor1) f2=$(med floor2) fu=$(med fuidshift)
	si=$(med shiftimg) sk=$(med keep) s1=$(med j1)
	mem=$(peak_kb "$S" -q --map $MAP "$tree"); restore "$tree"
	mf=$(mismatches "$tree" "$B/fuidshift-wrap")
	ms=$(mismatches "$tree" "$S" -q --map $MAP)
	printf '%-44s %8s %10s\n' "" "wall s" "cpu s"
	printf '%-44s %8s %10s\n' "floor, 1 thread (fstatat+fchownat)" "$f1" "$(cpu floor1)" \
		"floor, 2 threads" "$f2" "$(cpu floor2)" \
		"fuidshift" "$fu" "$(cpu fuidshift)" \
		"shiftimg (default: check pass + shift)" "$si" "$(cpu shiftimg)" \
		"shiftimg --unmapped=keep (one pass)" "$sk" "$(cpu keep)" \
		"shiftimg --unmapped=keep -j1" "$s1" "$(cpu j1)"
	awk -v fu="$fu" -v si="$si" -v sk="$sk" -v f2="$f2" 'BEGIN {
		printf "ratio fuidshift / shiftimg:            %6.1fx (keep: %.1fx)\n", fu / si, fu / sk
		printf "ratio shiftimg / 2-thread floor:       %6.2fx (keep: %.2fx)\n", si / f2, sk / f2
	}'
	echo "shiftimg peak memory: $mem KB"
	echo "entries differing from the kernel's idmapped view: fuidshift $mf, shiftimg $ms"
	rm -rf "$tree.pristine"
}

report t200k "200k-file tree"
report minbase "Debian minbase rootfs"
