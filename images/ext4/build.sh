#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# build.sh kernel IMG MNT MKE2FS-OPTIONS...
#     makes IMG with mke2fs, mounts it on MNT (-t ext4, so ext2/ext3
#     images are written by the same driver) and fills it with tree.sh
#     through the kernel: the kernel lays out the xattrs, shares EA
#     blocks and keeps the quota.
# build.sh mkfs-d IMG SRC MKE2FS-OPTIONS...
#     makes IMG with mke2fs -d from the tree SRC (libext2fs lays it out).
# Needs root.  The size is 48 MiB.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
method=$1 img=$2 dir=$3
shift 3
feats=
case " $* " in *ea_inode*) feats="$feats ea_inode" ;; esac
case " $* " in *casefold*) feats="$feats casefold" ;; esac

rm -f "$img"
truncate -s 48M "$img"
case $method in
kernel)
	mke2fs -q -F "$@" "$img"
	mkdir -p "$dir"
	mount -t ext4 -o loop,acl,user_xattr "$img" "$dir"
	if ! "$here/tree.sh" "$dir" $feats socket; then
		umount "$dir"
		exit 1
	fi
	umount "$dir"
	;;
mkfs-d)
	mke2fs -q -F "$@" -d "$dir" "$img"
	# mke2fs -d (1.47.0) leaves quota usage unset and miscounts the
	# blocks of EA inodes: let e2fsck put those right.
	case " $* " in *quota*|*ea_inode*) e2fsck -fy "$img" >/dev/null 2>&1 || true ;; esac
	;;
*)
	echo "build.sh: unknown method $method" >&2
	exit 2
	;;
esac
