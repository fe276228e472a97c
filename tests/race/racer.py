#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Keeps changing a tree while shiftimg walks it: racer.py ROOT OUTSIDE STOP.

What a hostile container can do to its own root: swap directories for
symlinks to / and to the outside tree, files for symlinks to outside
files and for FIFOs, by rename (the name is missing for a moment) and
by renameat2(RENAME_EXCHANGE) (it never is); move subtrees between
directories; hard-link files inside it.  Runs until the file STOP
exists; prints how many changes it made.  RACE_SEED seeds its choices.
RACE_SYSTEM=0 leaves out the symlinks to /, /etc, /usr/bin and their
files (to try the test on a tool that follows symlinks without letting
it walk the whole host).
"""
import ctypes
import os
import random
import sys
import time


HOLD = [0, 0, 0.0001, 0.001, 0.01]
AT_FDCWD = -100
RENAME_EXCHANGE = 2
_libc = ctypes.CDLL(None, use_errno=True)


def exchange(a, b):
    """Swaps two names atomically."""
    if _libc.renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b),
                       RENAME_EXCHANGE) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), a)


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


def swap_atomic(path, target, rnd):
    """Exchanges path with a symlink to target for a while, then back."""
    other = path + ".x"
    try:
        os.symlink(target, other)
    except OSError:
        return 0
    n = 0
    try:
        exchange(path, other)
        n = 1
        time.sleep(rnd.choice(HOLD))
        exchange(path, other)
    except OSError:
        pass
    try:
        if os.path.islink(other):
            os.unlink(other)
    except OSError:
        pass
    return n


def main():
    root, outside, stop = sys.argv[1:4]
    rnd = random.Random(int(os.environ.get("RACE_SEED", "1")))
    targets = [outside, os.path.join(outside, "d"),
               os.path.join(outside, "file"), os.path.join(outside, "suid"),
               os.path.join(outside, "cap"),
               "../../../../../../../../" + outside]
    if os.environ.get("RACE_SYSTEM", "1") == "1":
        targets += ["/", "/etc", "/usr/bin", "/etc/passwd", "/usr/bin/su",
                    "/dev/null"]
    dirs = sorted(d for d in os.listdir(root)
                  if d.startswith("d") and "." not in d)
    n = 0
    while not os.path.exists(stop):
        d = os.path.join(root, rnd.choice(dirs))
        f = os.path.join(d, "f%d" % rnd.randrange(50))
        op = rnd.randrange(8)
        t = rnd.choice(targets)
        if op == 0:
            n += swap(d, lambda p: os.symlink(t, p), rnd)
        elif op == 1:
            n += swap(f, lambda p: os.symlink(t, p), rnd)
        elif op == 2:
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
            link = os.path.join(root, rnd.choice(dirs), "link")
            try:
                os.link(f, link)
                os.unlink(link)
                n += 1
            except OSError:
                pass
        elif op == 5:
            # The walk's current directory replaced by a symlink, deep down.
            s = os.path.join(d, "sub", "deeper")
            n += swap(s, lambda p: os.symlink(t, p), rnd)
        elif op == 6:
            n += swap_atomic(rnd.choice([d, os.path.join(d, "sub", "deeper")]),
                             t, rnd)
        else:
            n += swap_atomic(f, t, rnd)
    print(n)


if __name__ == "__main__":
    main()
