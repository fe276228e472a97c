#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# tree.sh DIR [FEATURE...]: fills DIR (on a real kernel filesystem with
# ACLs, as root) with what a container image holds and a shift must get
# right: owners across the id range (above 65535 too), setuid/setgid,
# POSIX ACLs (access and default, named users and groups), file
# capabilities v2 (rootid 0) and v3 (rootid 1000), override_stat, hard
# links, symlinks, devices, fifos, immutable and append-only files, a
# set of files with one identical large ACL (ext4 shares their EA block),
# and large xattr values.  FEATUREs: ea_inode (values larger than a
# block), casefold (a casefolded directory), socket.
set -eu
cd "$1"
shift
feats=" $* "
want() { case $feats in *" $1 "*) return 0 ;; esac; return 1; }

mkdir -p etc bin usr/bin home/alice home/bob srv/shared var/log data/deep/er
echo root:x:0:0 > etc/passwd
chmod 644 etc/passwd

# Owners: root, ordinary users, ids above 16 bits, the overflow id.
echo alice > home/alice/notes
echo bob > home/bob/notes
chown -R 1000:1000 home/alice
chown -R 70000:70001 home/bob
echo big > data/high
chown 150000:150001 data/high
echo n > data/nobody
chown 65534:65534 data/nobody
chown 1000:2000 data/deep
chmod 2775 data/deep
chown 199999:0 data/deep/er

# setuid/setgid executables, owned by root and by a user.
printf '#!/bin/sh\n' > bin/su
chmod 4755 bin/su
printf '#!/bin/sh\n' > usr/bin/wall
chgrp 5 usr/bin/wall
chmod 2755 usr/bin/wall
printf '#!/bin/sh\n' > home/alice/mine
chown 1000:1000 home/alice/mine
chmod 6755 home/alice/mine

# Capabilities: v2 (the kernel writes v2 for init-namespace root) and v3.
printf '#!/bin/sh\n' > bin/ping
setcap cap_net_raw+ep bin/ping
printf '#!/bin/sh\n' > home/alice/v3cap
chown 1000:1000 home/alice/v3cap
setfattr -n security.capability \
	-v 0x0100000300200000000000000000000000000000e8030000 home/alice/v3cap

# ACLs: access with named users and groups on both sides of 65536,
# default ACLs on a shared directory.
echo acl > data/acl
setfacl -m u:1000:rwx,u:70000:r,g:2000:rx,g:150001:r,m::rwx data/acl
chown 1000:2000 srv/shared
setfacl -m u:1001:rwx,g:2001:rx srv/shared
setfacl -d -m u:1001:rwx,g:2001:rx,u:100:r srv/shared
echo inherit > srv/shared/file

# One ACL too large for the inode body, identical on many files: the
# kernel keeps one EA block for all of them (h_refcount > 1).
i=0
while [ $i -lt 24 ]; do
	echo $i > srv/s$i
	chown $((3000 + i)):3000 srv/s$i
	setfacl -m u:1001:r,u:1002:r,u:1003:r,u:1004:r,u:1005:r,u:1006:r,g:2001:r,g:2002:r,g:2003:r,g:2004:r,g:2005:r srv/s$i
	i=$((i + 1))
done

# user.containers.override_stat, as fuse-overlayfs and podman write it.
echo ov > data/override
setfattr -n user.containers.override_stat -v 1000:1000:0755 data/override
mkdir data/ovdir
setfattr -n user.containers.override_stat -v 0:0:040755:dir data/ovdir
echo other > data/ovother
setfattr -n user.o -v k data/ovother
setfattr -n user.containers.override_stat -v 70000:2000:0600 data/ovother

# Links, special files.
ln home/alice/notes home/alice/notes.hard
ln home/alice/notes data/notes.hard2
ln -s ../home/alice/notes data/link
chown -h 1000:1000 data/link
ln -s "$(printf 'x%.0s' $(seq 1 100))" data/longlink
chown -h 70000:70000 data/longlink
mknod data/null c 1 3
chown 1000:1000 data/null
mknod data/loop7 b 7 7
mkfifo data/fifo
chown 2000:2000 data/fifo
want socket && python3 -c 'import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' data/sock

# Flags the kernel would refuse a chown on.
echo imm > data/immutable
chown 1000:1000 data/immutable
chattr +i data/immutable
echo app > var/log/append
chown 1000:1000 var/log/append
chattr +a var/log/append

# Large values: one that needs an EA block, and (ea_inode) one that
# needs its own inode; ACLs beside them must still be shifted.
echo val > data/bigxattr
setfattr -n user.big -v "0x$(head -c 600 /dev/zero | od -v -An -tx1 | tr -d ' \n' | tr 0 a)" data/bigxattr
setfacl -m u:1000:r data/bigxattr
if want ea_inode; then
	echo huge > data/hugexattr
	setfattr -n user.huge -v "0x$(head -c 9000 /dev/zero | od -v -An -tx1 | tr -d ' \n' | tr 0 b)" data/hugexattr
	setfacl -m u:1000:rw,g:70000:r data/hugexattr
	chown 1000:1000 data/hugexattr
fi

if want casefold; then
	mkdir data/fold
	chattr +F data/fold
	echo CamelCase > data/fold/MixedCase
	chown 1000:1000 data/fold data/fold/MixedCase
fi

# Some bulk: small files over the id range.
mkdir bulk
i=0
while [ $i -lt 100 ]; do
	echo $i > bulk/f$i
	chown $((i * 1999 % 200000)):$((i * 997 % 200000)) bulk/f$i
	i=$((i + 1))
done
