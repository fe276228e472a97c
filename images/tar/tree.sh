#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Builds the tree the tar tests archive: tree.sh DIR (as root, on a
# filesystem with ACLs and xattrs).  It holds every kind of entry and
# every place an id lives: owners small and above 2,097,151 (the
# largest 7-digit octal), ACLs with user and group entries (some stored
# out of id order), file
# capabilities (v2 and v3), setuid/setgid files, hard links, symlinks,
# names and link targets past 100 bytes, devices, a FIFO, a sparse file,
# user.containers.override_stat and an OCI whiteout.
set -eu
d=$1
mkdir -p "$d"
cd "$d"

mkdir -p etc usr/bin home/alice var/empty
echo root > etc/passwd
chmod 644 etc/passwd
echo alice > home/alice/notes
chown -R 1000:1000 home/alice

# setuid/setgid survive the shift (the kernel's chown would clear them)
printf '#!/bin/sh\n' > usr/bin/su
chmod 4755 usr/bin/su
printf '#!/bin/sh\n' > usr/bin/wall
chown 0:5 usr/bin/wall
chmod 2755 usr/bin/wall

# capabilities: v2 (root-owned) and v3 with a namespaced root
printf '\177ELF' > usr/bin/ping
setcap cap_net_raw+ep usr/bin/ping
printf '\177ELF' > usr/bin/nsping
setcap -n 1000 cap_net_admin+ep usr/bin/nsping

# ACLs: access and default, user and group entries, ids small and large
echo acl > home/alice/shared
setfacl -m u:1000:rw,u:2000:r,g:1000:r,g:3000005:rw,m::rw home/alice/shared
mkdir home/alice/proj
setfacl -m u:1000:rwx home/alice/proj
setfacl -d -m u:1000:rwx,g:2000:rx,u:3000001:r home/alice/proj

# ACLs stored out of id order, as a raw setxattr (and some restore
# tools) leave them: named entries for bin (2), root (0) and daemon (1),
# groups bin and root, so that libacl's text (names, sorted by id)
# and the binary ACL (this order) differ in order, not in content.
ooo=0x0200000001000600ffffffff
ooo=${ooo}020006000200000002000400000000000200010001000000
ooo=${ooo}04000400ffffffff08000400020000000800060000000000
ooo=${ooo}10000700ffffffff20000400ffffffff
echo ooo > home/alice/unsorted
setfattr -n system.posix_acl_access -v "$ooo" home/alice/unsorted
mkdir home/alice/unsorted.d
setfattr -n system.posix_acl_access -v "$ooo" home/alice/unsorted.d
setfattr -n system.posix_acl_default -v "$ooo" home/alice/unsorted.d

# ids that do not fit 7 octal digits
echo big > var/big
chown 3000000:3000002 var/big
mkdir var/bigdir
chown 3000001:3000001 var/bigdir

# hard links, symlinks, long names and targets
echo linked > usr/bin/one
ln usr/bin/one usr/bin/two
ln -s ../etc/passwd usr/pw
chown -h 1000:1000 usr/pw
long=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
mkdir -p "home/$long/bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
echo deep > "home/$long/bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb/file-with-a-long-name-$long"
chown -R 2000:2000 "home/$long"
ln -s "home/$long/bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb" longlink
ln "home/$long/bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb/file-with-a-long-name-$long" hardlong

# devices, a FIFO, a sparse file
mkdir dev
mknod dev/null c 1 3
mknod dev/loop9 b 7 9
chown 0:6 dev/loop9
mkfifo var/fifo
chown 1000:1000 var/fifo
truncate -s 8M var/sparse
printf 'middle' | dd of=var/sparse bs=1 seek=4194304 conv=notrunc 2>/dev/null
printf 'end' | dd of=var/sparse bs=1 seek=8388605 conv=notrunc 2>/dev/null
chown 1000:1000 var/sparse

# fuse-overlayfs/containers-storage ownership, and an OCI whiteout
echo os > var/override
setfattr -n user.containers.override_stat -v 1000:1000:0100644 var/override
: > var/.wh.removed
: > var/.wh..wh..opq
chown 1000:1000 var/.wh.removed var/.wh..wh..opq

# fixed times, so that archives of two copies of the tree are equal
find . -exec touch -h -d '2024-01-02 03:04:05' {} +
