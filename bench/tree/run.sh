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

# secs CMD...: the wall time of one run.
secs() { /usr/bin/time -f %e -o "$B/time" "$@" >/dev/null 2>"$B/err" || {
	cat "$B/err" >&2; return 1; }; cat "$B/time"; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
peak_kb() { /usr/bin/time -f %M -o "$B/mem" "$@" >/dev/null 2>&1; cat "$B/mem"; }
restore() { "$S" -q --reverse --map $MAP "$1" >/dev/null; }

# fuidshift takes the directory first and the ranges after.
printf '#!/bin/sh\nexec fuidshift "$1" b:%s\n' "$MAP" >"$B/fuidshift-wrap"
chmod +x "$B/fuidshift-wrap"

bench_tool() {	# tree cmd...: the median of RUNS timed forward shifts
	tree=$1
	shift
	for i in $(seq "$RUNS"); do
		sync
		secs "$@" "$tree"
		restore "$tree"
	done | median
}

# Entries whose listing differs from the original seen through an
# idmapped mount.
mismatches() {	# tree cmd...
	tree=$1
	shift
	cp -a "$tree" "$tree.orig"
	"$@" "$tree" >/dev/null 2>&1 || true
	"$build/tests/tools/idmount" -r --map $MAP "$tree.orig" "$B/view"
	"$build/tests/tools/lsid" --no-times --no-override-stat "$B/view" >"$B/want"
	umount "$B/view"
	"$build/tests/tools/lsid" --no-times --no-override-stat "$tree" >"$B/got"
	rm -rf "$tree"
	mv "$tree.orig" "$tree"
	diff "$B/want" "$B/got" | grep -c '^>' || true
}

floor() {	# threads tree
	cp -a "$2" "$2.floor"
	sync
	t=$(secs "$B/floor" "$1" 100000 "$2.floor")
	rm -rf "$2.floor"
	echo "$t"
}

report() {	# tree label
	tree=$B/mnt/$1
	n=$(find "$tree" | wc -l)
	echo
	echo "== $2: $n objects"
	f1=$(floor 1 "$tree")
	f2=$(floor 2 "$tree")
	fu=$(bench_tool "$tree" "$B/fuidshift-wrap")
	si=$(bench_tool "$tree" "$S" -q --map $MAP)
	sk=$(bench_tool "$tree" "$S" -q --unmapped=keep --map $MAP)
	s1=$(bench_tool "$tree" "$S" -q -j1 --unmapped=keep --map $MAP)
	mem=$(peak_kb "$S" -q --map $MAP "$tree"); restore "$tree"
	mf=$(mismatches "$tree" "$B/fuidshift-wrap")
	ms=$(mismatches "$tree" "$S" -q --map $MAP)
	printf '%-44s %8s s\n' "floor, 1 thread (fstatat+fchownat)" "$f1" \
		"floor, 2 threads" "$f2" \
		"fuidshift" "$fu" \
		"shiftimg (default: check pass + shift)" "$si" \
		"shiftimg --unmapped=keep (one pass)" "$sk" \
		"shiftimg --unmapped=keep -j1" "$s1"
	awk -v fu="$fu" -v si="$si" -v sk="$sk" -v f2="$f2" 'BEGIN {
		printf "ratio fuidshift / shiftimg:            %6.1fx (keep: %.1fx)\n", fu / si, fu / sk
		printf "ratio shiftimg / 2-thread floor:       %6.2fx (keep: %.2fx)\n", si / f2, sk / f2
	}'
	echo "shiftimg peak memory: $mem KB"
	echo "entries differing from the kernel's idmapped view: fuidshift $mf, shiftimg $ms"
}

report t200k "200k-file tree"
report minbase "Debian minbase rootfs"
