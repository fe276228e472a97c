#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Owner, mode and xattrs of objects outside the raced tree.

  snapshot.py [-r] PATH...     one line per object, sorted: its path, uid,
                               gid, mode and every xattr (ACLs and
                               security.capability included) in hex;
                               after -r, each PATH is listed with
                               everything below it on its filesystem.
                               Nothing is followed.
  snapshot.py --cmp OLD NEW    the objects listed in both whose line
                               changed (objects that other processes
                               created or removed meanwhile are not
                               judged); exit 1 if there are any.
"""
import os
import stat
import sys


def describe(path):
    st = os.lstat(path)
    try:
        names = sorted(os.listxattr(path, follow_symlinks=False))
    except OSError:
        names = []
    xa = []
    for n in names:
        try:
            xa.append("%s=%s" % (n, os.getxattr(path, n,
                                                follow_symlinks=False).hex()))
        except OSError:
            pass
    return "%d:%d %o %s" % (st.st_uid, st.st_gid, st.st_mode, " ".join(xa))


def walk(top, out):
    dev = os.lstat(top).st_dev
    todo = [top]
    while todo:
        d = todo.pop()
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for n in names:
            p = os.path.join(d, n)
            try:
                st = os.lstat(p)
                out[p] = describe(p)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode) and st.st_dev == dev:
                todo.append(p)


def load(path):
    lines = {}
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            p, _, rest = line.rstrip("\n").partition("\t")
            lines[p] = rest
    return lines


def main():
    if sys.argv[1] == "--cmp":
        old, new = load(sys.argv[2]), load(sys.argv[3])
        bad = [p for p in sorted(old) if p in new and old[p] != new[p]]
        for p in bad[:20]:
            print("%s\n  was: %s\n  now: %s" % (p, old[p], new[p]))
        sys.exit(1 if bad else 0)
    out = {}
    deep = False
    for path in sys.argv[1:]:
        if path == "-r":
            deep = True
            continue
        out[path] = describe(path)
        if deep:
            walk(path, out)
    sys.stdout.reconfigure(errors="surrogateescape")
    for p in sorted(out):
        print("%s\t%s" % (repr(p)[1:-1], out[p]))


if __name__ == "__main__":
    main()
