#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Tree benchmark: shiftimg against fuidshift and the physical floor (a
# bare fstatat + fchownat walk, bench/tree/floor.c; also the floor of a
# run that looks at everything before it changes anything: a statx +
# llistxattr pass, then a chown pass, alone and then synced, as
# shiftimg's run with --sync must be; and the same without the listing,
# the floor of a checked run that learns from ext4's inode tables which
# inodes have no xattrs, as shiftimg does), side by side in one run, on
#   - a 200,000-file tree over 2,000 directories (ACLs, capabilities,
#     setuid files, hard links: bench/tree/mktree.py), and
#   - a Debian minbase rootfs from debootstrap (cached in $B/minbase).
# Every tool works on its own copy of the tree, so no timed run waits
# for a fresh copy: shiftimg's copy is put back by shiftimg --reverse,
# fuidshift's by a fresh copy of shiftimg's, and the floor's by the floor with the
# opposite delta (its copy loses capabilities and setuid bits, which
# the floor does not care about).  All untimed.  Each round times every
# tool once, in an order that rotates from round to round, so that the
# noise of a shared machine falls on all of them alike; the table has
# the medians of wall and CPU (user + system) seconds.  Cache: warm, the
# trees are read before the first round and synced before every run.
#
# Also: the entries that differ from the kernel's idmapped view of the
# original, for fuidshift and shiftimg (ext4 only: tmpfs has no
# idmapped mounts), and shiftimg's peak RSS on 200k and 400k files
# (two copies of the tree in one target).  The price of each syscall of
# the mix is measured on the floor's copy (floor OPS, one thread).
#
# Usage (root): bench/tree/run.sh [BUILD_DIR]   (default: ./build)
# Environment: FILES (200000), DIRS (2000), RUNS (5), FS (loop: a fresh
#   ext4 image; tmpfs; dir: $B itself), TREES ("t200k minbase"; also
#   t200kplain, the same tree without ACLs, capabilities or setuid files),
#   BENCH_DIR, MIRROR, KEEP=1 keeps the image.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
S=$build/shiftimg
FILES=${FILES:-200000}
DIRS=${DIRS:-2000}
RUNS=${RUNS:-5}
FS=${FS:-loop}
TREES=${TREES:-t200k minbase}
MAP=0:100000:65536
MAP2=0:300000:65536
B=${BENCH_DIR:-/var/tmp/shiftimg-bench-tree}
M=$B/mnt

[ "$(id -u)" = 0 ] || { echo "bench: needs root" >&2; exit 1; }
command -v fuidshift >/dev/null || { echo "bench: needs fuidshift (lxd-tools)" >&2; exit 1; }
make -C "$build" -s shiftimg tests/tools/lsid tests/tools/idmount >/dev/null
mkdir -p "$B" "$M" "$B/view"
cc -O2 -o "$B/floor" "$top/bench/tree/floor.c" -lpthread

cleanup() {
	umount "$B/view" 2>/dev/null || true
	[ "$FS" = dir ] || umount "$M" 2>/dev/null || true
	[ "${KEEP:-}" = 1 ] || rm -rf "$B/fs.img"
}
trap cleanup EXIT
case $FS in
loop)
	# Room for five 200k trees: mke2fs's default ratio gives 512k inodes.
	# Tables zeroed now, not by the kernel in the background of the runs.
	rm -f "$B/fs.img"
	truncate -s 16G "$B/fs.img"
	mkfs.ext4 -q -F -N 1500000 -E lazy_itable_init=0,lazy_journal_init=0 "$B/fs.img"
	mount -o loop "$B/fs.img" "$M"
	;;
tmpfs)	mount -t tmpfs -o size=8G,nr_inodes=2000000 tmpfs "$M" ;;
dir)	rm -rf "$M"/* ;;
*)	echo "bench: FS is loop, tmpfs or dir" >&2; exit 1 ;;
esac

# secs CMD...: "wall cpu" seconds of one run.
secs() { /usr/bin/time -f '%e %U %S' -o "$B/time" "$@" >/dev/null 2>"$B/err" || {
	cat "$B/err" >&2; return 1; }; awk '{printf "%s %.2f", $1, $2 + $3}' "$B/time"; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
peak_kb() { /usr/bin/time -f %M -o "$B/mem" "$@" >/dev/null 2>&1; cat "$B/mem"; }
restore() { "$S" -q --reverse --allow-privileged --map $MAP "$1" >/dev/null; }

# One timed run of tool $1 on tree $2 (logged to $B/times), and the
# untimed run that puts its copy back.
delta=100000
timed() {	# tool tree
	tree=$2
	sync
	case $1 in
	shiftimg) echo "$1 $(secs "$S" -q --map $MAP "$tree")"
		restore "$tree" ;;
	sync) echo "$1 $(secs "$S" -q --sync --map $MAP "$tree")"
		restore "$tree" ;;
	off) echo "$1 $(secs env SHIFTIMG_JOURNAL=off "$S" -q --map $MAP "$tree")"
		restore "$tree" ;;
	onepass) echo "$1 $(secs env SHIFTIMG_JOURNAL=off "$S" -q --unmapped=keep --map $MAP "$tree")"
		restore "$tree" ;;
	# A re-shift (--from-map) of the same tree, shifted with MAP first:
	# the composed map must cost nothing over the plain shift.
	reshift) "$S" -q --map $MAP "$tree" >/dev/null
		echo "$1 $(secs "$S" -q --from-map $MAP --map $MAP2 "$tree")"
		"$S" -q --reverse --allow-privileged --map $MAP2 "$tree" >/dev/null ;;
	fuidshift) echo "$1 $(secs fuidshift "$tree.fu" b:$MAP)"
		# fuidshift -r fails on the ACLs fuidshift wrote: a fresh copy.
		rm -rf "$tree.fu"
		cp -a "$tree" "$tree.fu" ;;
	floor1|floor2) echo "$1 $(secs "$B/floor" "${1#floor}" $delta "$tree.floor")"
		delta=$((-delta)) ;;
	# Look at everything, then change it: the floor of a checked run;
	# floor2passx lists no inode's xattrs.
	floor2pass|floor2passx)
		ops=xl/C
		[ "$1" = floor2pass ] || ops=x/C
		echo "$1 $(secs "$B/floor" 2 $delta "$tree.floor" $ops)"
		delta=$((-delta)) ;;
	# shiftimg --sync ends with its changes on disk (as does its default
	# run where the filesystem has no journal); so do these, and the
	# second is the floor of such a run: checked and durable.
	floor2sync|floor2passsync)
		ops=sc
		[ "$1" = floor2sync ] || ops=xl/C
		echo "$1 $(secs sh -c '"$0" 2 $1 "$2" $3 && sync -f "$2"' "$B/floor" $delta "$tree.floor" $ops)"
		delta=$((-delta)) ;;
	esac >>"$B/times"
}

TOOLS="shiftimg reshift sync off onepass fuidshift floor1 floor2 floor2sync floor2pass floor2passx floor2passsync"
rounds() {
	: >"$B/times"
	for r in $(seq "$RUNS"); do
		set -- $TOOLS
		i=1
		while [ $i -lt $r ]; do	# rotate the order by one each round
			set -- "$@" "$1"
			shift
			i=$((i + 1))
		done
		for tool; do
			timed "$tool" "$TREE"
		done
	done
}
med() { awk -v k="$1" '$1 == k {print $2}' "$B/times" | median; }
cpu() { awk -v k="$1" '$1 == k {print $3}' "$B/times" | median; }

# The original's idmapped view, before any tool has run.
want() {	# tree
	"$build/tests/tools/idmount" -r --map $MAP "$1" "$B/view"
	"$build/tests/tools/lsid" --no-times --no-override-stat "$B/view" >"$B/want"
	umount "$B/view"
}
# Entries of tree's listing that differ from $B/want.
differ() {	# tree
	"$build/tests/tools/lsid" --no-times --no-override-stat "$1" >"$B/got"
	diff "$B/want" "$B/got" | grep -c '^>' || true
}

# The price of each syscall of the mix, per entry, in microseconds of CPU.
prices() {	# objects
	n=$1
	for ops in s x xl sc xlc; do
		for r in 1 2 3; do
			sync
			echo "$ops $(secs "$B/floor" 1 $delta "$TREE.floor" "$ops")"
			case $ops in *c) delta=$((-delta)) ;; esac
		done
	done >"$B/prices"
	for ops in s x xl sc xlc; do
		c=$(awk -v k=$ops '$1 == k {print $3}' "$B/prices" | median)
		printf '  %-4s %6.2f us\n' "$ops" "$(echo "$c $n" | awk '{print $1 * 1e6 / $2}')"
	done
}

report() {	# name label
	TREE=$M/$1
	n=$(find "$TREE" | wc -l)
	cp -a "$TREE" "$TREE.fu"
	cp -a "$TREE" "$TREE.floor"
	mis=n/a
	[ "$FS" = tmpfs ] || want "$TREE"
	cat "$TREE"/* "$TREE.fu"/* "$TREE.floor"/* >/dev/null 2>&1 || true
	echo
	echo "== $2: $n objects on $FS, median of $RUNS rounds"
	rounds
	printf '%-52s %8s %8s\n' "" "wall s" "cpu s"
	printf '%-52s %8s %8s\n' \
		"floor, 1 thread (fstatat + fchownat)" "$(med floor1)" "$(cpu floor1)" \
		"floor, 2 threads" "$(med floor2)" "$(cpu floor2)" \
		"floor, 2 threads, then syncfs (durable)" "$(med floor2sync)" "$(cpu floor2sync)" \
		"floor, 2 threads, statx+llistxattr pass, chown pass" "$(med floor2pass)" "$(cpu floor2pass)" \
		"floor, 2 threads, statx pass, chown pass" "$(med floor2passx)" "$(cpu floor2passx)" \
		"floor, 2 threads, those two passes, then syncfs" "$(med floor2passsync)" "$(cpu floor2passsync)" \
		"fuidshift" "$(med fuidshift)" "$(cpu fuidshift)" \
		"shiftimg (default: check pass, journal, shift)" "$(med shiftimg)" "$(cpu shiftimg)" \
		"shiftimg --from-map MAP --map MAP2 (re-shift)" "$(med reshift)" "$(cpu reshift)" \
		"shiftimg --sync (then syncfs)" "$(med sync)" "$(cpu sync)" \
		"shiftimg, SHIFTIMG_JOURNAL=off (check pass, shift)" "$(med off)" "$(cpu off)" \
		"shiftimg, journal off, --unmapped=keep (one pass)" "$(med onepass)" "$(cpu onepass)"
	for k in med cpu; do
		awk -v k=$k -v f1="$($k floor1)" -v f2="$($k floor2)" -v fs="$($k floor2sync)" -v fu="$($k fuidshift)" \
		    -v si="$($k shiftimg)" -v sy="$($k sync)" -v so="$($k off)" -v s1="$($k onepass)" -v fp="$($k floor2pass)" \
		    -v fq="$($k floor2passsync)" -v fx="$($k floor2passx)" -v rs="$($k reshift)" '
		function r(a, b) { return b > 0 ? sprintf("%.2fx", a / b) : "n/a" }
		BEGIN {
			printf "ratios (%s): fuidshift/floor1 %s, fuidshift/floor2 %s, fuidshift/shiftimg %s (off %s, one pass %s)\n",
				k == "med" ? "wall" : "cpu", r(fu, f1), r(fu, f2), r(fu, si), r(fu, so), r(fu, s1)
			printf "             shiftimg/floor2 %s (off %s, one pass %s), shiftimg/floor1 %s, shiftimg/(floor2 + syncfs) %s\n",
				r(si, f2), r(so, f2), r(s1, f2), r(si, f1), r(si, fs)
			printf "             two-pass floor/floor2 %s, shiftimg/two-pass floor %s (off %s)\n",
				r(fp, f2), r(si, fp), r(so, fp)
			printf "             without listings: two-pass floor/floor2 %s, shiftimg/it %s\n",
				r(fx, f2), r(si, fx)
			printf "             checked and durable (two-pass floor + syncfs): /floor2 %s, fuidshift/it %s, shiftimg --sync/it %s\n",
				r(fq, f2), r(fu, fq), r(sy, fq)
			printf "             fuidshift/(shiftimg --sync) %s, (shiftimg --sync)/floor2 %s\n",
				r(fu, sy), r(sy, f2)
			printf "             re-shift (--from-map)/shiftimg %s\n", r(rs, si)
		}'
	done
	if [ "$FS" != tmpfs ]; then
		"$S" -q --map $MAP "$TREE" >/dev/null
		ms=$(differ "$TREE")
		restore "$TREE"
		rm -rf "$TREE.fu"
		cp -a "$TREE" "$TREE.fu"
		fuidshift "$TREE.fu" b:$MAP >/dev/null 2>&1 || true
		mf=$(differ "$TREE.fu")
		echo "entries differing from the kernel's idmapped view: fuidshift $mf, shiftimg $ms"
	fi
	echo "syscall prices (floor OPS, 1 thread, CPU per entry): s fstatat, x statx, l llistxattr, c fchownat"
	prices "$n"
	m1=$(peak_kb "$S" -q --map $MAP "$TREE")
	restore "$TREE"
	# The floor's copy back to its ids, if shifted an odd number of times.
	[ $delta -gt 0 ] || "$B/floor" 2 $delta "$TREE.floor"
	delta=100000
	# Twice the files (and twice the hard links) in one target.
	mkdir "$TREE.x2"
	mv "$TREE" "$TREE.x2/a"
	mv "$TREE.floor" "$TREE.x2/b"
	m2=$(peak_kb "$S" -q --map $MAP "$TREE.x2")
	restore "$TREE.x2"
	mv "$TREE.x2/a" "$TREE"
	mv "$TREE.x2/b" "$TREE.floor"
	rmdir "$TREE.x2"
	echo "shiftimg peak RSS (default run): $m1 KB for $n objects, $m2 KB for twice as many"
	rm -rf "$TREE.fu" "$TREE.floor"
}

for t in $TREES; do
	case $t in
	t200k)
		echo "building a $FILES-file tree over $DIRS directories..."
		python3 "$top/bench/tree/mktree.py" "$M/t200k" "$FILES" "$DIRS"
		report t200k "$FILES-file tree"
		;;
	t200kplain)
		echo "building a $FILES-file tree over $DIRS directories, without ACLs, capabilities or setuid files..."
		python3 "$top/bench/tree/mktree.py" "$M/t200kplain" "$FILES" "$DIRS" plain
		report t200kplain "$FILES-file tree, only chowns"
		;;
	minbase)
		if [ ! -d "$B/minbase/usr" ]; then
			echo "debootstrap --variant=minbase bookworm (cached in $B/minbase)..."
			rm -rf "$B/minbase.tmp"
			debootstrap --variant=minbase bookworm "$B/minbase.tmp" \
				"${MIRROR:-http://deb.debian.org/debian}" >"$B/debootstrap.log" 2>&1 || {
				echo "bench: debootstrap failed, see $B/debootstrap.log" >&2; exit 1; }
			mv "$B/minbase.tmp" "$B/minbase"
		fi
		cp -a "$B/minbase" "$M/minbase"
		# Debian's rootfs has no ACLs or ids above 65535; give it a few.
		setfacl -m u:1000:rwx,g:100:rx "$M/minbase/var/log"
		chown -R 1000:1000 "$M/minbase/home" 2>/dev/null || true
		report minbase "Debian minbase rootfs"
		;;
	esac
done
