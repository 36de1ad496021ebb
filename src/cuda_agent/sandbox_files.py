"""Files that code in a sandbox could reach, handled by the caller outside it, where a link such
code made leads anywhere: a folder cleared of links before the caller reads or publishes it, and
the path of what a descriptor opened rather than what a name points to now."""

from __future__ import annotations

import contextlib
import os
import stat


def drop_links(folder: str | os.PathLike) -> None:
    """Remove from `folder`, which sandboxed code wrote, everything that is not a regular file or
    a folder: the caller reads, writes, copies and publishes what is there outside the sandbox,
    where a link leads anywhere (a build that linked its output to a secret got the secret back;
    one that linked its log had the log written where it pointed). (A hard link made inside leads
    nowhere else: the folder is a mount of its own there.)"""
    for _, dirs, files, dfd in os.fwalk(folder):
        for name in [*dirs, *files]:
            with contextlib.suppress(OSError):
                mode = os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mode
                if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                    os.unlink(name, dir_fd=dfd)


def opened_path(fd: int, path: str | os.PathLike) -> str:
    """Where the file open at `fd` (opened by `path`) lies, its links resolved: what was opened,
    not what `path` names now, which code in a sandbox may have made a link meanwhile. (Without
    /proc, `path` resolved.)"""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return os.path.realpath(path)
