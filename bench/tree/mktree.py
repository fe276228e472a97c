#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Builds the benchmark tree: FILES files over DIRS directories (two
levels), one file in 50 with a multi-entry ACL, one in 100 with a file
capability, one in 200 setuid, some owned by 1000, a few hard links.
With "plain" after DIRS: no ACLs, capabilities or setuid files, so that
a shift is only chowns (the floor's work)."""
import os, struct, subprocess, sys

root, files, dirs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
plain = sys.argv[4:] == ["plain"]
per = files // dirs
acl, cap = [], []
for d in range(dirs):
    dp = os.path.join(root, "d%02d" % (d % 40), "s%04d" % d)
    os.makedirs(dp, exist_ok=True)
    for f in range(per):
        p = os.path.join(dp, "f%04d" % f)
        with open(p, "w") as fh:
            fh.write("x")
        n = d * per + f
        if n % 7 == 0:
            os.chown(p, 1000, 1000)
        if not plain and n % 200 == 0:
            os.chmod(p, 0o4755)
        if not plain and n % 50 == 0:
            acl.append(p)
        if not plain and n % 100 == 1:
            cap.append(p)
        if n % 1000 == 3:
            os.link(p, p + ".link")
def batch(cmd, paths):
    for i in range(0, len(paths), 500):
        subprocess.run(cmd + paths[i:i + 500], check=True)
batch(["setfacl", "-m", "u:1000:rwx,u:2000:r,g:100:rx,g:3000:w"], acl)
# security.capability values: v2 (root's) and v3 with rootid 1000.
v2 = struct.pack("<IIIII", 0x02000001, 1 << 13, 0, 0, 0)
v3 = struct.pack("<IIIIII", 0x03000001, 1 << 10, 0, 0, 0, 1000)
for i, p in enumerate(cap):
    os.setxattr(p, "security.capability", v2 if i % 2 else v3)
