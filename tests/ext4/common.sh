# SPDX-License-Identifier: GPL-2.0-or-later
# Helpers for the ext4 tests (source it after tests/lib.sh).
#   private_mounts      runs the test again in a mount namespace of its
#                       own (call it first): a copy of its loop mounts in
#                       another namespace (the machine's init namespace
#                       keeps some while other tests run) would keep a
#                       filesystem alive, writing to its image, past
#                       our umount
#   small_tree DIR      a few files for mke2fs -d: owners below and above
#                       65536, a named-user ACL, a v2 capability, setuid
#   same_as_idmapped IMG ORIG MAP [MOUNT-OPTS]
#                       IMG mounted plainly lists exactly like ORIG seen
#                       through an idmapped mount with MAP (one I:O:N
#                       range), and its override_stat values hold ORIG's
#                       ids mapped (the kernel does not map those); prints
#                       the difference and fails otherwise
private_mounts() {
	[ -n "${SHIFTIMG_PRIVATE_MOUNTS:-}" ] && return 0
	SHIFTIMG_PRIVATE_MOUNTS=1 exec unshare -m --propagation private sh "$0"
}

small_tree() {
	mkdir -p "$1/etc" "$1/home/alice" "$1/data"
	echo root >"$1/etc/passwd"
	echo alice >"$1/home/alice/notes"
	chown -R 1000:1000 "$1/home/alice"
	echo high >"$1/data/high"
	chown 70000:70001 "$1/data/high"
	echo acl >"$1/data/acl"
	setfacl -m u:1000:rw,g:2000:r "$1/data/acl" || return 1
	printf '#!/bin/sh\n' >"$1/data/ping"
	setcap cap_net_raw+ep "$1/data/ping" || return 1
	printf '#!/bin/sh\n' >"$1/data/su"
	chmod 4755 "$1/data/su"
}

same_as_idmapped() {
	_img=$1 _orig=$2 _map=$3 _opts=${4:-}
	mkdir -p "$T/m.a" "$T/m.b" "$T/m.c"
	mount -t ext4 -o "ro,noload,loop${_opts:+,$_opts}" "$_img" "$T/m.a" || return 1
	mount -t ext4 -o "ro,noload,loop${_opts:+,$_opts}" "$_orig" "$T/m.b" ||
		{ umount "$T/m.a"; return 1; }
	if ! "$IDMOUNT" -r --map "$_map" "$T/m.b" "$T/m.c"; then
		umount "$T/m.a" "$T/m.b"
		skip "no idmapped mounts"
	fi
	"$LSID" --no-override-stat "$T/m.a" >"$T/m.shifted"
	"$LSID" --no-override-stat "$T/m.c" >"$T/m.idmapped"
	"$LSID" "$T/m.a" | _override_stat >"$T/m.ov.got"
	"$LSID" "$T/m.b" | _override_stat "$_map" >"$T/m.ov.want"
	umount "$T/m.c" "$T/m.a" "$T/m.b"
	if ! diff -u "$T/m.idmapped" "$T/m.shifted" >"$T/m.diff"; then
		head -n 30 "$T/m.diff"
		return 1
	fi
	diff -u "$T/m.ov.want" "$T/m.ov.got" >"$T/m.diff" && return 0
	echo "override_stat values:"
	head -n 30 "$T/m.diff"
	return 1
}

# _override_stat [I:O:N]: a listing's override_stat values by path, the
# ids mapped when a range is given.
_override_stat() {
	awk -v map="${1:-}" '
	function m(id) { return (map != "" && id >= r[1] && id < r[1] + r[3]) ? id - r[1] + r[2] : id }
	BEGIN { if (map != "") split(map, r, ":") }
	/user.containers.override_stat=/ {
		v = $0; sub(/.*override_stat=/, "", v); n = split(v, f, ":")
		printf "%s %d:%d", path, m(f[1]), m(f[2])
		for (i = 3; i <= n; i++) printf ":%s", f[i]
		print ""; next }
	/^[^ \t]/ { path = $1 }'
}
