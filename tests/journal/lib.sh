# SPDX-License-Identifier: GPL-2.0-or-later
# Helpers for the journal tests: source it after tests/lib.sh.
#   mk_tree DIR       a small rootfs with every kind of object shiftimg
#                     changes (ACLs, capabilities, setuid, immutable and
#                     append-only files, hard links, devices, a fifo)
#   fault_points CMD  runs CMD once with SHIFTIMG_FAULT_LOG and prints
#                     "write W sync S", the points a full run passes
#   samples TOTAL MAX every N from 1 to TOTAL, or MAX of them spread out
#                     (always 1, 2, the last two, and what lies between)

mk_tree() {
	(
	set -e
	mkdir -p "$1" && cd "$1"
	mkdir -p etc usr/bin home/user/shared var/log var/locked dev run
	echo root:x:0:0 >etc/passwd
	ln -s ../etc/passwd etc/rel && chown -h 1000:1000 etc/rel
	echo ping >usr/bin/ping && chmod 4755 usr/bin/ping
	ln usr/bin/ping usr/bin/ping6
	echo wall >usr/bin/wall && chgrp 5 usr/bin/wall && chmod 2755 usr/bin/wall
	echo v2 >usr/bin/capv2 && setcap cap_net_raw+ep usr/bin/capv2
	echo v3 >usr/bin/capv3 && setcap -n 1000 cap_net_bind_service+ep usr/bin/capv3
	echo both >usr/bin/suidcap && chown 0:5 usr/bin/suidcap &&
		chmod 6755 usr/bin/suidcap && setcap cap_sys_admin+p usr/bin/suidcap
	echo data >home/user/file
	setfattr -n user.containers.override_stat -v 1000:1000:0644 home/user/file
	setfattr -n user.note -v keep-me home/user/file
	setfacl -m u:1000:rwx,u:2000:r,g:100:rx,m:rwx home/user/shared
	setfacl -d -m u:1000:rwx,g:1000:rx home/user/shared
	for i in 1 2 3 4 5 6 7 8; do echo "$i" >home/user/shared/f$i; done
	chown -R 1000:1000 home/user
	mkfifo run/fifo && chown 33:33 run/fifo && setfacl -m u:1000:rw run/fifo
	mknod dev/null c 1 3 && mknod dev/loop0 b 7 0 && chgrp 6 dev/loop0
	echo imm >etc/immutable && chown 1000:1000 etc/immutable && chattr +i etc/immutable
	echo log >var/log/append && chattr +a var/log/append
	echo in >var/locked/inside && chattr +i var/locked
	)
}

# Undoes mk_tree's flags so that the tree can be removed.
unpin_tree() {
	chattr -i "$1/etc/immutable" "$1/var/locked" 2>/dev/null
	chattr -a "$1/var/log/append" 2>/dev/null
	true
}

fault_points() {
	SHIFTIMG_FAULT_LOG=$T/points "$@" >/dev/null 2>&1 || return 1
	cat "$T/points"
}

samples() {
	python3 - "$1" "$2" <<'PY'
import sys
total, most = int(sys.argv[1]), int(sys.argv[2])
if total <= most:
    picks = range(1, total + 1)
else:
    step = (total - 1) / (most - 1)
    picks = sorted({1, 2, total - 1, total} | {1 + round(i * step) for i in range(most)})
print(" ".join(str(n) for n in picks if 1 <= n <= total))
PY
}
