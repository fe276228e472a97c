# SPDX-License-Identifier: GPL-2.0-or-later
# Shell helpers for the test scripts: source it.
#   skip REASON       exit 77 (a failure under CI=true, see tests/run-test)
#   fail MESSAGE      exit 1
#   need_root         skip unless root
#   scratch           a fresh directory in $T, removed on success only
#   scratch_fs [MB]   a loop-mounted ext4 (with ACLs) in $T/fs: idmapped
#                     mounts need a filesystem that supports them
#   loop_fs NAME MB [MKFS-OPTION...]   the same in $T/NAME, made with
#                     mkfs.ext4's options (scratch_fs: no journal)
#   mount_idmapped MAP SRC DST   idmapped bind mount (MAP: I:O:N, both kinds)
#   at_exit CMD       run CMD (in reverse order) when the script ends
set -u
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${top_builddir:=$top_srcdir}"
: "${SHIFTIMG:=$top_builddir/shiftimg}"
IDMOUNT=$top_builddir/tests/tools/idmount
LSID=$top_builddir/tests/tools/lsid
export LC_ALL=C TZ=UTC

_exit_cmds=
at_exit() { _exit_cmds="$*; $_exit_cmds"; }
_on_exit() {
	rc=$?
	trap - EXIT
	eval "$_exit_cmds" >/dev/null 2>&1
	if [ "$rc" = 0 ] && [ -n "${T:-}" ]; then
		rm -rf "$T"
	elif [ -n "${T:-}" ]; then
		echo "(scratch kept in $T)" >&2
	fi
	exit "$rc"
}
trap _on_exit EXIT

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }
need_root() { [ "$(id -u)" = 0 ] || skip "needs root"; }

scratch() {
	T=$(mktemp -d "${TMPDIR:-/tmp}/shiftimg-test.XXXXXX")
}

scratch_fs() {
	loop_fs fs "${1:-256}" -O ^has_journal -E lazy_itable_init=1
}

loop_fs() {
	_name=$1 _mb=$2
	shift 2
	truncate -s "${_mb}M" "$T/$_name.img"
	mkfs.ext4 -q -F "$@" "$T/$_name.img" || fail "mkfs.ext4 $*"
	mkdir -p "$T/$_name"
	mount -o loop,acl,user_xattr "$T/$_name.img" "$T/$_name" ||
		skip "no loop mount"
	at_exit "umount -l '$T/$_name'"
}

mount_idmapped() {
	mkdir -p "$3"
	"$IDMOUNT" -r --map "$1" "$2" "$3" || skip "no idmapped mounts"
	at_exit "umount -l '$3'"
}

# Recipe helpers.
mksock() { python3 -c 'import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$1"; }
# deep DIR N NAME: N nested directories below DIR, each called NAME, and
# a file owned by 1000 at the bottom (past PATH_MAX if N * NAME is long)
deep() {
	python3 - "$@" <<'PY'
import os, sys
d, n, name = sys.argv[1], int(sys.argv[2]), sys.argv[3]
fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
for _ in range(n):
    os.mkdir(name, dir_fd=fd)
    nfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
    os.close(fd)
    fd = nfd
f = os.open("file", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
os.write(f, b"bottom\n")
os.fchown(f, 1000, 1000)
os.close(f)
PY
}
