#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Keeps changing a tree while shiftimg walks it: racer.py ROOT OUTSIDE STOP.

What a hostile container can do to its own root: swap directories for
symlinks to / and to the outside tree, files for symlinks to outside
files and for FIFOs, move subtrees between directories, hard-link
files inside the tree.  Runs until the file STOP exists; prints how
many changes it made.  RACE_SYSTEM=0 leaves out the symlinks to /,
/etc and /usr/bin (to try the test on a tool that follows symlinks).
"""
import os
import random
import sys
import time


HOLD = [0, 0, 0.0001, 0.001, 0.01]


def swap(path, make, rnd):
    """Puts make(path) where path was for a while, then puts path back."""
    aside = path + ".aside"
    try:
        os.rename(path, aside)
    except OSError:
        return 0
    try:
        make(path)
        time.sleep(rnd.choice(HOLD))
        os.unlink(path)
    except OSError:
        pass
    try:
        os.rename(aside, path)
    except OSError:
        pass
    return 1


def main():
    root, outside, stop = sys.argv[1:4]
    rnd = random.Random(int(os.environ.get("RACE_SEED", "1")))
    targets = [outside, os.path.join(outside, "d"),
               os.path.join(outside, "file"), os.path.join(outside, "suid"),
               "../../../../../../../../" + outside]
    if os.environ.get("RACE_SYSTEM", "1") == "1":
        targets += ["/", "/etc", "/usr/bin", "/etc/passwd", "/dev/null"]
    dirs = sorted(d for d in os.listdir(root) if d.startswith("d"))
    n = 0
    while not os.path.exists(stop):
        d = os.path.join(root, rnd.choice(dirs))
        op = rnd.randrange(6)
        t = rnd.choice(targets)
        if op == 0:
            n += swap(d, lambda p: os.symlink(t, p), rnd)
        elif op == 1:
            f = os.path.join(d, "f%d" % rnd.randrange(50))
            n += swap(f, lambda p: os.symlink(t, p), rnd)
        elif op == 2:
            f = os.path.join(d, "f%d" % rnd.randrange(50))
            n += swap(f, os.mkfifo, rnd)
        elif op == 3:
            # A subtree moves to another directory and back.
            s = os.path.join(d, "sub")
            other = os.path.join(root, rnd.choice(dirs), "moved")
            try:
                os.rename(s, other)
                os.rename(other, s)
                n += 1
            except OSError:
                pass
        elif op == 4:
            f = os.path.join(d, "f%d" % rnd.randrange(50))
            link = os.path.join(root, rnd.choice(dirs), "link")
            try:
                os.link(f, link)
                os.unlink(link)
                n += 1
            except OSError:
                pass
        else:
            # The walk's current directory replaced by a symlink, deep down.
            s = os.path.join(d, "sub", "deeper")
            n += swap(s, lambda p: os.symlink(t, p), rnd)
    print(n)


if __name__ == "__main__":
    main()
