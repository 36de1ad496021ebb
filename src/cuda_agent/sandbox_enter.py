"""Moving a freshly forked process into a sandbox that bwrap made (`sandbox.Holder`): the evaluator's
warm zygote forks each candidate's worker this way, so every candidate gets namespaces of its own
without importing torch again. Kernel interfaces only (setns, chroot, capabilities), through libc."""

from __future__ import annotations

import ctypes
import fcntl
import os

NS_GET_USERNS = 0xB701  # ioctl: the user namespace that owns a namespace
NAMESPACES = ("user", "pid", "net", "ipc", "uts", "mnt")

_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    if hasattr(os, "setns"):
        os.setns(fd, 0)
    elif _libc.setns(fd, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def enter(pid: int, uid: int | None) -> None:
    """Move this process (single-threaded: a fresh fork) into the sandbox whose process is `pid`:
    the user namespace owning its mounts, its mount, network, IPC, UTS and PID namespaces (PID: for
    the children this process forks next), its own user namespace where bwrap nested one, its root;
    then the sandbox's user (`uid`, None: as it is), no capabilities and no new privileges. Raises
    OSError if any step fails: the caller must then exit, never run untrusted code."""
    fds = {n: os.open(f"/proc/{pid}/ns/{n}", os.O_RDONLY | os.O_CLOEXEC) for n in NAMESPACES}
    root = os.open(f"/proc/{pid}/root", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    owner = fcntl.ioctl(fds["mnt"], NS_GET_USERNS)
    try:
        if uid is not None:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
        _setns(owner)
        for n in ("mnt", "net", "ipc", "uts", "pid"):
            _setns(fds[n])
        if os.fstat(owner).st_ino != os.fstat(fds["user"]).st_ino:
            _setns(fds["user"])
        os.fchdir(root)
        os.chroot(".")
        if uid is not None:
            os.setresuid(uid, uid, uid)
        _drop_capabilities()
    finally:
        for fd in (*fds.values(), root, owner):
            os.close(fd)


def _drop_capabilities() -> None:
    PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 38, 24, 47, 4
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    for cap in range(64):
        _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()
    if _libc.capset(header, data) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"capset: {os.strerror(err)}")
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    _libc.capget(header, data)
    if any(data):
        raise OSError(f"capabilities left after dropping them: {list(data)}")
