#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Migrations against what users do today, side by side in one run, on a
# Debian minbase rootfs from debootstrap (cached as bench/tree caches it):
#   LXC        an unprivileged container (lxc.idmap at 100000) moved to
#              200000 and back: "shiftimg --map ... CONTAINER" (rootfs,
#              config and directory in one journaled run) vs fuidshift
#              on the rootfs plus sed on the config (what the LXC docs
#              and scripts do; fuidshift does not shift ACL qualifiers
#              right, so its result is not the same, only its cost).
#   store      a rootless podman vfs store of a test user holding IMAGES
#              images made from the rootfs (different contents, so no
#              layer is shared) and a container of each, its owner's
#              range moved: "shiftimg --from-subid-range ... --subid"
#              vs "podman system reset" + "podman load" of the images
#              saved beforehand (the usual advice: delete the store and
#              pull again; loading from a local archive is its lower
#              bound: no network), both with podman's own namespace
#              moved (podman system migrate) untimed.
#   rootful    a rootful podman vfs store with IMAGES images, each with
#              a container made for a user namespace (podman create
#              --uidmap: a mapped copy of the image's layer) and one
#              without, moved to a new range: "shiftimg --from-map ...
#              --map ... STORE" vs removing the mapped containers and
#              creating them again with the new map (podman copies and
#              chowns the image's layer again; its own way to a new
#              map), on a second store made the same way.
# Each round times every route once, in an order that alternates; the
# table has the medians of wall and CPU seconds and the ratios.
#
# Usage (root): bench/migrate/run.sh [BUILD_DIR]   (default: ./build)
# Environment: RUNS (3), IMAGES (3), BENCH_DIR, MIRROR.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
S=$build/shiftimg
RUNS=${RUNS:-3}
IMAGES=${IMAGES:-3}
B=${BENCH_DIR:-/var/tmp/shiftimg-bench-migrate}
CACHE=/var/tmp/shiftimg-bench-tree

[ "$(id -u)" = 0 ] || { echo "bench: needs root" >&2; exit 1; }
for t in fuidshift podman debootstrap; do
	command -v $t >/dev/null || { echo "bench: needs $t" >&2; exit 1; }
done
make -C "$build" -s shiftimg >/dev/null
mkdir -p "$B" "$CACHE"
chmod 755 "$B"
if [ ! -d "$CACHE/minbase/usr" ]; then
	echo "debootstrap --variant=minbase bookworm (cached in $CACHE/minbase)..."
	rm -rf "$CACHE/minbase.tmp"
	debootstrap --variant=minbase bookworm "$CACHE/minbase.tmp" \
		"${MIRROR:-http://deb.debian.org/debian}" >"$CACHE/debootstrap.log" 2>&1 || {
		echo "bench: debootstrap failed, see $CACHE/debootstrap.log" >&2; exit 1; }
	mv "$CACHE/minbase.tmp" "$CACHE/minbase"
fi

secs() { /usr/bin/time -f '%e %U %S' -o "$B/time" "$@" >/dev/null 2>"$B/err" || {
	cat "$B/err" >&2; return 1; }; awk '{printf "%s %.2f", $1, $2 + $3}' "$B/time"; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
med() { awk -v k="$1" '$1 == k {print $2}' "$B/times" | median; }
cpu() { awk -v k="$1" '$1 == k {print $3}' "$B/times" | median; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.1fx", a / b; else print "n/a" }'; }
: >"$B/times"

# ---- LXC ----
C=$B/lxc/web
rm -rf "$B/lxc" && mkdir -p "$C"
cp -a "$CACHE/minbase" "$C/rootfs"
setfacl -m u:1000:rwx,g:100:rx "$C/rootfs/var/log"
cat >"$C/config" <<EOF
lxc.net.0.type = empty
lxc.idmap = u 0 100000 65536
lxc.idmap = g 0 100000 65536
lxc.rootfs.path = dir:$C/rootfs
lxc.uts.name = web
EOF
"$S" -q --map 0:100000:65536 "$C/rootfs"	# as lxc-create would leave it
getfattr -h --absolute-names -d -m trusted.shiftimg "$C/rootfs" >/dev/null 2>&1 &&
	setfattr -h -x trusted.shiftimg.map "$C/rootfs"
n=$(find "$C/rootfs" | wc -l)
# fuidshift works on its own copy: what it does to ACLs would make the
# next run of either tool start from another tree.
F=$B/lxc/fu
cp -a "$C" "$F" && sed -i "s|$C/rootfs|$F/rootfs|" "$F/config"
printf '%s\n' 'fuidshift "$1/rootfs" b:$2:$3:65536 >/dev/null &&' \
	'	sed -i "s/^lxc.idmap = \([ug]\) 0 $2 65536$/lxc.idmap = \1 0 $3 65536/" "$1/config"' >"$B/fuid.sh"
sync
for r in $(seq "$RUNS"); do
	for route in $( [ $((r % 2)) = 1 ] && echo "shiftimg fuidshift" || echo "fuidshift shiftimg"); do
		sync
		case $route in
		shiftimg) echo "lxc-shiftimg $(secs "$S" -q --map 0:200000:65536 "$C")"
			"$S" -q --map 0:100000:65536 "$C" ;;
		fuidshift) echo "lxc-fuidshift $(secs sh "$B/fuid.sh" "$F" 100000 200000)"
			sh "$B/fuid.sh" "$F" 200000 100000 ;;
		esac
	done
done >>"$B/times"
for c in "$C" "$F"; do
	grep -q '^lxc.idmap = u 0 100000 65536$' "$c/config" ||
		{ echo "bench: $c did not come back to its map" >&2; exit 1; }
done

# ---- a rootless store ----
U_=sibench
id "$U_" >/dev/null 2>&1 || useradd -m -s /bin/sh "$U_"
U=$(id -u "$U_")
H=$(getent passwd "$U_" | cut -d: -f6)
RUN=/run/user/$U
mkdir -p "$RUN" && chown "$U:$U" "$RUN" && chmod 700 "$RUN"
for f in /etc/subuid /etc/subgid; do
	touch "$f"
	sed -i "/^$U_:/d" "$f" && echo "$U_:2100000:65536" >>"$f"
done
as_user() { (cd / && setpriv --reuid="$U" --regid="$U" --init-groups \
	env HOME="$H" XDG_RUNTIME_DIR="$RUN" "$@"); }
range() { sed -i "s/^$U_:[0-9]*:/$U_:$1:/" /etc/subuid /etc/subgid
	as_user podman --storage-driver vfs system migrate >/dev/null 2>&1; }
P="podman --storage-driver vfs"
as_user $P system reset -f >/dev/null 2>&1 || true
range 2100000
for i in $(seq "$IMAGES"); do
	rm -rf "$B/img" && cp -a "$CACHE/minbase" "$B/img" && echo "$i" >"$B/img/etc/image-$i"
	tar -C "$B/img" --numeric-owner --acls --xattrs -cf "$B/img.tar" . && chmod 644 "$B/img.tar"
	as_user $P import "$B/img.tar" localhost/img$i >/dev/null
	as_user $P create --name c$i localhost/img$i /bin/true >/dev/null
done
rm -rf "$B/img" "$B/img.tar"
rm -f "$H/images.tar"
as_user $P save -m -o "$H/images.tar" $(seq -f 'localhost/img%g' 1 "$IMAGES") >/dev/null
chmod 644 "$H/images.tar"
st=$H/.local/share/containers/storage
sn=$(find "$st" | wc -l)
size=$(du -sm "$st" | cut -f1)
cur=2100000
for r in $(seq "$RUNS"); do
	for route in $( [ $((r % 2)) = 1 ] && echo "shiftimg podman" || echo "podman shiftimg"); do
		new=$((cur + 100000))
		range $new
		sync
		case $route in
		shiftimg) echo "store-shiftimg $(secs "$S" -q --from-subid-range $cur:65536 --subid "$U_" "$st")" ;;
		podman) echo "store-podman $(secs setpriv --reuid="$U" --regid="$U" --init-groups \
			env HOME="$H" XDG_RUNTIME_DIR="$RUN" sh -c "cd / && $P system reset -f && $P load -i '$H/images.tar'")"
			# (the containers are gone with the store; made again, untimed)
			for i in $(seq "$IMAGES"); do as_user $P create --name c$i localhost/img$i /bin/true >/dev/null; done ;;
		esac
		cur=$new
	done
done >>"$B/times"
as_user $P image ls >/dev/null || { echo "bench: the store does not work after the runs" >&2; exit 1; }

# ---- a rootful store with containers made for a user namespace ----
mkstore() {
	rm -rf "$1" && mkdir -p "$1"
	for i in $(seq "$IMAGES"); do
		rm -rf "$B/img" && cp -a "$CACHE/minbase" "$B/img" && echo "$i" >"$B/img/etc/image-$i"
		tar -C "$B/img" --numeric-owner --acls --xattrs -cf "$B/img.tar" .
		podman --root "$1/root" --runroot "$1/run" --storage-driver vfs import "$B/img.tar" localhost/img$i >/dev/null
		podman --root "$1/root" --runroot "$1/run" --storage-driver vfs create --name m$i \
			--uidmap 0:$2:65536 --gidmap 0:$2:65536 localhost/img$i /bin/true >/dev/null
		podman --root "$1/root" --runroot "$1/run" --storage-driver vfs create --name p$i \
			localhost/img$i /bin/true >/dev/null
	done
	rm -rf "$B/img" "$B/img.tar"
}
printf '%s\n' 'P="podman --root $1/root --runroot $1/run --storage-driver vfs"' \
	'for i in $(seq $2); do $P rm m$i && $P create --name m$i --uidmap 0:$3:65536 --gidmap 0:$3:65536 localhost/img$i /bin/true; done' \
	>"$B/recreate.sh"
mkstore "$B/rootful" 3100000
mkstore "$B/rootful-podman" 3100000
rn=$(find "$B/rootful/root" | wc -l)
rsize=$(du -sm "$B/rootful/root" | cut -f1)
cur=3100000
for r in $(seq "$RUNS"); do
	new=$((cur + 100000))
	for route in $( [ $((r % 2)) = 1 ] && echo "shiftimg podman" || echo "podman shiftimg"); do
		sync
		case $route in
		shiftimg) echo "rootful-shiftimg $(secs "$S" -q --from-map 0:$cur:65536 --map 0:$new:65536 "$B/rootful/root")" ;;
		podman) echo "rootful-podman $(secs sh "$B/recreate.sh" "$B/rootful-podman" "$IMAGES" $new)" ;;
		esac
	done
	cur=$new
done >>"$B/times"
[ "$(podman --root "$B/rootful/root" --runroot "$B/rootful/run" --storage-driver vfs inspect m1 \
	--format '{{.HostConfig.IDMappings.UIDMap}}')" = "[0:$cur:65536]" ] ||
	{ echo "bench: the rootful store does not show the new map" >&2; exit 1; }

echo
echo "== migrations, median of $RUNS rounds (minbase: $n objects; store: $IMAGES images + containers, $sn objects, $size MB)"
printf '%-58s %8s %8s\n' "" "wall s" "cpu s"
printf '%-58s %8s %8s\n' \
	"LXC: shiftimg --map CONTAINER (rootfs, config, directory)" "$(med lxc-shiftimg)" "$(cpu lxc-shiftimg)" \
	"LXC: fuidshift rootfs + sed config" "$(med lxc-fuidshift)" "$(cpu lxc-fuidshift)" \
	"store: shiftimg --from-subid-range --subid STORE" "$(med store-shiftimg)" "$(cpu store-shiftimg)" \
	"store: podman system reset + podman load" "$(med store-podman)" "$(cpu store-podman)" \
	"rootful store: shiftimg --from-map --map STORE" "$(med rootful-shiftimg)" "$(cpu rootful-shiftimg)" \
	"rootful store: podman rm + create --uidmap NEW" "$(med rootful-podman)" "$(cpu rootful-podman)"
echo "(rootful store: $IMAGES images, each with a mapped and a plain container, $rn objects, $rsize MB)"
echo "ratios (wall): fuidshift/shiftimg $(ratio "$(med lxc-fuidshift)" "$(med lxc-shiftimg)"), (reset + load)/shiftimg $(ratio "$(med store-podman)" "$(med store-shiftimg)"), (rm + create)/shiftimg $(ratio "$(med rootful-podman)" "$(med rootful-shiftimg)")"
echo "ratios (cpu):  fuidshift/shiftimg $(ratio "$(cpu lxc-fuidshift)" "$(cpu lxc-shiftimg)"), (reset + load)/shiftimg $(ratio "$(cpu store-podman)" "$(cpu store-shiftimg)"), (rm + create)/shiftimg $(ratio "$(cpu rootful-podman)" "$(cpu rootful-shiftimg)")"
