#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# spill.sh DIR CASE: fills DIR (an ext4 mounted through the kernel, as
# root, with ACLs; 256-byte inodes unless CASE says otherwise) with
# files whose xattr areas are full to the last byte, so that a value
# the shift grows (security.capability v2 -> v3: 4 bytes more;
# override_stat with longer ids) no longer fits where the kernel put it.
# Every area is filled through the kernel: the largest user.* value it
# still accepts there.  CASEs:
#   spill      what a shift must handle (tests/ext4/spill.test):
#              new/     full inode bodies and no EA block: a1-a3 with
#                       the same capability, b another one, ov an
#                       override_stat, both (only with inodes large
#                       enough for it) a capability and an override_stat
#              own/u    a full body and an unshared EA block with room
#              some/    s1-s6 have full bodies and share an EA block (one
#                       large ACL); s1-s3 have the same capability
#              all/     t1-t4 share an EA block and all have full bodies
#                       with the same capability
#              pull/p   the capability in a full unshared EA block, the
#                       body with room
#              plain/   a capability and ACLs with room to grow
#   full-unshared  f: full body, capability in its full unshared EA block
#   full-shared    f1-f4: full bodies with a capability, one shared full
#                  EA block
#   grown-shared   f1-f4: full bodies, the capability inside their one
#                  shared, full EA block
#   full-128       f: (128-byte inodes) the capability in its full EA block
set -eu
cd "$1"
case=$2

# fill FILE NAME HOW: sets NAME on FILE to the largest value (a multiple
# of 4 bytes) that stays in the inode body (HOW=body: no EA block
# appears) or that the kernel accepts at all (HOW=any).
fill() {
	python3 - "$@" <<'PY'
import errno, os, sys
path, name, how = sys.argv[1], sys.argv[2], sys.argv[3]
base = os.stat(path).st_blocks
if how == "body" and base:
    sys.exit("fill: %s: has an EA block or data, the body fill cannot be told from them" % path)

def fits(n):
    try:
        os.setxattr(path, name, b"f" * n)
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.E2BIG):
            return False
        raise
    ok = how == "any" or os.stat(path).st_blocks == base
    os.removexattr(path, name)
    return ok

lo, hi = 0, 65536 // 4
if not fits(0):
    sys.exit("fill: %s: no room for %s at all" % (path, name))
while hi - lo > 1:
    mid = (lo + hi) // 2
    if fits(mid * 4):
        lo = mid
    else:
        hi = mid
os.setxattr(path, name, b"f" * (lo * 4))
PY
}

# One large ACL, identical on every file given: ext4 shares its block.
big_acl() {
	for f; do
		setfacl -m "u:3001:r,u:3002:r,u:3003:r,u:3004:r,u:3005:r,u:3006:r,g:3001:r,g:3002:r,g:3003:r,g:3004:r,g:3005:r" "$f"
	done
}

# Empty files: a block count above zero is an EA block.
mkfile() { : >"$1"; }

# Files sharing one full EA block: the first is filled, the others get
# the same values, and the kernel's mbcache finds the block.
share_full() {
	name=$1
	shift
	fill "$1" "$name" any
	python3 -c 'import os, sys
v = os.getxattr(sys.argv[2], sys.argv[1])
for f in sys.argv[3:]:
    os.setxattr(f, sys.argv[1], v)' "$name" "$@"
}

case $case in
spill)
	mkdir new own some all pull plain
	for f in new/a1 new/a2 new/a3; do
		mkfile $f
		setcap cap_net_raw+ep $f
		fill $f user.fill body
	done
	mkfile new/b
	setcap cap_sys_admin+ep new/b
	fill new/b user.fill body
	mkfile new/ov
	setfattr -n user.containers.override_stat -v 0:0:0755 new/ov
	fill new/ov user.fill body
	# (chown drops capabilities: owners first.)
	mkfile new/both
	chown 1000:1000 new/both
	setcap cap_net_admin+ep new/both
	setfattr -n user.containers.override_stat -v 1000:0:0755 new/both
	# Both fit in the body of larger inodes only (-I 512).
	if [ "$(stat -c %b new/both)" = 0 ]; then
		fill new/both user.fill body
	else
		rm new/both
	fi

	mkfile own/u
	chown 2000:2000 own/u
	setcap cap_net_raw+ep own/u
	fill own/u user.fill body
	setfattr -n user.big -v "0x$(head -c 600 /dev/zero | tr '\0' b | od -v -An -tx1 | tr -d ' \n')" own/u

	for i in 1 2 3 4 5 6; do
		mkfile some/s$i
		chown $((4000 + i)):4000 some/s$i
		[ $i -le 3 ] && setcap cap_net_raw+ep some/s$i
		# Full bodies keep the ACL out of them, whatever the inode size.
		fill some/s$i user.fill body
	done
	(cd some && big_acl s1 s2 s3 s4 s5 s6 && chmod 640 s1 s2 s3 s4 s5 s6)
	for i in 1 2 3 4; do
		mkfile all/t$i
		setcap cap_net_bind_service+ep all/t$i
		fill all/t$i user.fill body
	done
	(cd all && big_acl t1 t2 t3 t4 && setfacl -m u:5000:rw t1 t2 t3 t4)

	mkfile pull/p
	chown 3000:3000 pull/p
	fill pull/p user.fill body
	setcap cap_net_raw+ep pull/p
	fill pull/p user.bfill any
	setfattr -x user.fill pull/p

	mkfile plain/ping
	setcap cap_net_raw+ep plain/ping
	mkfile plain/acl
	setfacl -m u:1000:rw,g:2000:r plain/acl
	;;
full-unshared)
	mkfile f
	fill f user.fill body
	setcap cap_net_raw+ep f
	fill f user.bfill any
	;;
full-shared)
	for f in f1 f2 f3 f4; do
		mkfile $f
		setcap cap_net_raw+ep $f
		fill $f user.fill body
	done
	share_full user.blk f1 f2 f3 f4
	;;
grown-shared)
	for f in f1 f2 f3 f4; do
		mkfile $f
		fill $f user.fill body
	done
	for f in f1 f2 f3 f4; do setcap cap_net_raw+ep $f; done
	share_full user.bfill f1 f2 f3 f4
	;;
full-128)
	mkfile f
	setcap cap_net_raw+ep f
	fill f user.bfill any
	;;
*)
	echo "spill.sh: unknown case $case" >&2
	exit 2
	;;
esac
