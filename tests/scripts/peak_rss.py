#!/usr/bin/env python3
"""Runs a command and writes its peak resident memory (KiB) to a file:
`peak_rss.py OUT COMMAND ARGS...`. Exits with the command's exit code; stdin, stdout and
stderr are the command's.

Why a process in between: Linux starts a new process's peak-memory record at the resident
size of the process that spawned it (the old address space's high-water mark is kept across
`exec`, and a `vfork`-style spawn runs in the parent's). A test binary that spawns the command
directly therefore reads its *own* peak, which grows with whatever other tests in it hold. This
small interpreter spawns the command instead, so the figure is the command's (and of the
children it reaped), above a floor of a few MiB."""
import os
import sys

pid = os.posix_spawnp(sys.argv[2], sys.argv[2:], os.environ)
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
