#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
# populate.py DIR N: N empty files in directories of 1000, owned by a
# spread of ids below 65536, one in a hundred with a two-entry ACL.
import os
import sys

root, n = sys.argv[1], int(sys.argv[2])
acl = (b"\x02\x00\x00\x00" + b"\x01\x00\x06\x00\xff\xff\xff\xff" +
       b"\x02\x00\x06\x00\xe8\x03\x00\x00" + b"\x04\x00\x04\x00\xff\xff\xff\xff" +
       b"\x10\x00\x06\x00\xff\xff\xff\xff" + b"\x20\x00\x04\x00\xff\xff\xff\xff")
d = None
for i in range(n):
    if i % 1000 == 0:
        d = os.path.join(root, "d%04d" % (i // 1000))
        os.mkdir(d)
    p = os.path.join(d, "f%04d" % (i % 1000))
    fd = os.open(p, os.O_WRONLY | os.O_CREAT, 0o644)
    os.fchown(fd, 1000 + i % 100, 1000 + i % 50)
    if i % 100 == 0:
        os.setxattr(fd, "system.posix_acl_access", acl)
    os.close(fd)
