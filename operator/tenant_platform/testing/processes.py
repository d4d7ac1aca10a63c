"""Supervision of the control plane's child processes and of its temporary work dirs.

``spawn`` starts a component in its own process group, logging to a file, with
PR_SET_PDEATHSIG=SIGKILL on Linux so it dies with the Python process even when that is killed
outright; ``terminate`` sends SIGTERM to the group, waits, then SIGKILLs it. A work dir records
its owner (``process_identity``) so ``sweep_stale_work_dirs`` can remove the directories of
owners that died without cleaning up. ``free_ports`` picks loopback ports.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import dataclasses
import functools
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, Final

from tenant_platform.testing.binaries import LOG_TAIL_LINES

WORK_DIR_PREFIX: Final = "tenant-platform-cp-"
OWNER_FILE: Final = "owner"
_PR_SET_PDEATHSIG: Final = 1


def free_ports(count: int) -> list[int]:
    """``count`` distinct loopback ports that were free a moment ago."""
    # Hold every socket until all are bound, so the ports differ. Another process may still take
    # one before the child binds it; that shows up as a startup error naming the port.
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def process_identity(pid: int) -> str | None:
    """``<pid namespace> <pid> <start time>`` from /proc (Linux), else None.

    A recycled pid does not repeat the start time; the namespace keeps containers that share a
    /tmp from judging each other's pids.
    """
    try:
        namespace = os.readlink("/proc/self/ns/pid")
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Field 22 (starttime); split after the command name, which may contain spaces and parens.
    return f"{namespace} {pid} {stat.rsplit(')', 1)[1].split()[19]}"


def sweep_stale_work_dirs() -> None:
    """Remove work dirs whose owning Python process died without stop() (SIGKILL, OOM kill).

    PR_SET_PDEATHSIG kills the children then, but nothing removes their directory, and etcd's
    preallocated WAL makes each about 120 MB. Directories without an owner file (kept with
    TENANT_PLATFORM_KEEP_CP=1, or on other systems) are never touched.
    """
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return  # not Linux: owner files are never written either
    for candidate in Path(tempfile.gettempdir()).glob(f"{WORK_DIR_PREFIX}*"):
        try:
            owner = (candidate / OWNER_FILE).read_text().strip()
        except OSError:
            continue
        match = re.fullmatch(r"(\S+) (\d+) \d+", owner)
        if match and match.group(1) == namespace and process_identity(int(match.group(2))) != owner:
            shutil.rmtree(candidate, ignore_errors=True)


@functools.cache
def _libc() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    name = ctypes.util.find_library("c") or "libc.so.6"
    try:
        return ctypes.CDLL(name, use_errno=True)
    except OSError:
        return None


def _die_with_parent() -> Callable[[], None]:
    """A preexec_fn making the child receive SIGKILL when the Python process dies (Linux).

    NB: the kernel ties PDEATHSIG to the *thread* that forked, so start a ControlPlane from a
    thread that outlives it (the main thread in pytest).
    """
    libc = _libc()  # load before fork: the child should do as little as possible
    parent = os.getpid()

    def preexec() -> None:
        if libc is not None:
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return preexec


@dataclasses.dataclass
class Child:
    """A running component: its process, and the log file its stdout and stderr go to."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    log: IO[bytes]

    @property
    def pid(self) -> int:
        return self.popen.pid


def spawn(executable: Path, args: Sequence[str], *, name: str, work_dir: Path) -> Child:
    """Start ``executable`` in ``work_dir``, logging to ``work_dir/logs/<name>.log``."""
    log_path = work_dir / "logs" / f"{name}.log"
    log = log_path.open("ab")
    try:
        popen = subprocess.Popen(
            [str(executable), *args],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=work_dir,
            start_new_session=True,  # own process group: Ctrl-C in a terminal does not hit it
            # NB: preexec_fn is unsafe with threads in general; ours only calls prctl and
            # getppid, which take no locks.
            preexec_fn=_die_with_parent(),  # noqa: PLW1509
        )
    except BaseException:
        log.close()
        raise
    return Child(name=name, popen=popen, log_path=log_path, log=log)


def tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of a log (read from its last 64 KiB)."""
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 64 * 1024))
            text = handle.read().decode(errors="replace")
    except OSError as error:
        return f"(log unreadable: {error})"
    return "\n".join(text.splitlines()[-lines:])


def terminate(child: Child, timeout: float) -> None:
    """SIGTERM the child's process group, wait, SIGKILL the group if it lingers, and reap it."""
    try:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, sig)  # pgid == pid: started with start_new_session
            try:
                child.popen.wait(timeout=timeout)
                break
            except subprocess.TimeoutExpired:
                continue  # NB: still alive after SIGKILL means stuck in the kernel; move on
        # NB: no killpg after the leader is reaped: its pid, and so the group id, may be reused.
        # The components fork nothing, so the group died with its leader.
    finally:
        child.log.close()
