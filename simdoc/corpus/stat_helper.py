"""A second process that stats half of each large folder while the walk stats the other half.

A walk stats every file it lists (:mod:`simdoc.corpus.folders`): that is
how an update tells the unchanged files from the changed ones, as git does.
In a run that finds nothing changed, those calls are most of the run
(c100k: 100,000 ``lstat`` calls, ~0.21 s of a 0.6 s run, ~2 µs each here,
most of it in the kernel), and the walk held one core while the other
idled. With ``--jobs`` 2 or more, a folder of :data:`SPLIT_AT` names or
more is cut in two: a helper process stats the second half while the walk
stats the first, and the rows are joined in name order.

The helper is :mod:`simdoc.corpus.stat_server`, a standard-library script
started at the first such folder; while it starts (a few tens of ms) the
walk stats that folder :data:`SLICE` names at a time, and hands it half of
what is left once it says it is ready (a folder of 10^5 files is mostly
shared). It opens the folder by its path, checks that it is the very
folder the walk holds open (device and inode), and ``os.lstat``-s each
name in it, as the walk does: the rows are the ones a walk alone makes.
Anything else (a folder replaced since, a name that failed, a helper
gone) and the walk stats those names itself, and says why as it would.

A folder of fewer names costs more in messages than its stats (~0.1 ms a
folder, ~2 µs a name): most folders of a source tree stay whole.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator

import numpy as np

SPLIT_AT = 512  # names in a folder from which half are stat-ed by the helper
SLICE = 1024  # names the walk stats at a time while the helper starts (~2 ms)
_SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "stat_server.py")
_LENGTH = struct.Struct("<Q")


class StatHelper:
    """The helper process of one walk, started by :meth:`start` (the walk's first large folder)."""

    def __init__(self, fields: tuple[str, ...]) -> None:
        self.fields = fields
        self.process: subprocess.Popen | None = None
        self.broken = False  # the helper failed once: the walk stats every name itself from then on
        self.pending: list[str] | None = None  # the names asked about and not yet answered
        self.ended: int | None = None  # the helper's exit status, once it has ended
        self.started = False  # it said it is ready

    def start(self) -> None:
        """Start the helper process, unless it was started already (or cannot be had)."""
        if self.process is not None or self.broken:
            return
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-I", "-S", _SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
            )
        except (OSError, ValueError):  # no process to start here
            self.broken = True

    def ready(self, wait: bool = False) -> bool:
        """Whether the helper, :meth:`start`-ed, can be asked now, or (``wait``) once it says it is
        ready (its first byte, read here when it has come); False if it cannot be had."""
        if self.started or self.broken or self.process is None:
            return self.started and not self.broken
        try:
            if select.select([self.process.stdout], [], [], None if wait else 0)[0]:
                self.started = self.process.stdout.read(1) == b"R"  # its first byte: ready (none: it failed)
                self.broken = not self.started
        except (OSError, ValueError):  # its output closed
            self.broken = True
        return self.started and not self.broken

    def starting(self) -> bool:
        """Started and not ready yet (the walk stats names itself meanwhile)."""
        return self.process is not None and not self.ready() and not self.broken

    def ask(self, fd: int, directory: str, names: list[str]) -> bool:
        """Hand ``names`` of the folder open as ``fd`` (at ``directory``) to the helper, which is
        :meth:`ready`; False if it cannot take them."""
        if self.pending is not None:  # the walk was cut off between the two (an error in its half)
            self.broken = True
        if self.broken or not self.started:
            return False
        try:
            st = os.fstat(fd)
            joined = os.fsencode("\0".join(names))
            request = pickle.dumps((os.fsencode(directory), st.st_dev, st.st_ino, joined, self.fields), protocol=pickle.HIGHEST_PROTOCOL)
            self.process.stdin.write(_LENGTH.pack(len(request)) + request)
            self.process.stdin.flush()
        except (OSError, ValueError):  # no process to start, or the helper gone: the walk does it all
            self.broken = True
            return False
        self.pending = names
        return True

    def answer(self) -> tuple[np.ndarray, list[int]] | None:
        """The rows (one a name, :attr:`fields`) of the names of the last :meth:`ask`, and the
        indices of those the helper could not stat; None if it could not stat them at all."""
        names, self.pending = self.pending, None
        try:
            head = self.process.stdout.read(_LENGTH.size)
            reply = pickle.loads(self.process.stdout.read(_LENGTH.unpack(head)[0]))
        except (OSError, EOFError, pickle.UnpicklingError, struct.error):  # its output ended, or cut short: it is gone
            self.broken = True
            return None
        if reply is None:  # it could not stat these (a folder replaced since, say); it can the next
            return None
        raw, failed = reply
        rows = np.frombuffer(raw, dtype=np.int64).reshape(len(names), len(self.fields))
        return rows, failed

    def close(self) -> None:
        if self.process is None:
            return
        # The helper ends at the end of its input, or when a reply it writes finds no reader (a
        # walk cut off between a question and its answer): neither end is left open for it.
        for stream in (self.process.stdin, self.process.stdout):
            with contextlib.suppress(OSError):
                stream.close()
        try:
            self.ended = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.ended = self.process.wait()
        self.process = None


_HELPER: list[tuple[int, StatHelper] | None] = [None]  # the thread whose walk has it, and the helper


@contextlib.contextmanager
def stat_helper(wanted: bool, fields: tuple[str, ...]) -> Iterator[None]:
    """Within: a walk (of this thread) hands half of each large folder to a helper process, if
    ``wanted`` (``--jobs`` 2 or more) and there is a Python to run it with."""
    if not wanted or not sys.executable or _HELPER[0] is not None:
        yield
        return
    helper = StatHelper(fields)
    _HELPER[0] = (threading.get_ident(), helper)
    try:
        yield
    finally:
        _HELPER[0] = None
        helper.close()


def current() -> StatHelper | None:
    """The helper of the walk under way in this thread, if it has one (its questions and answers
    pair up one after the other: a walk of another thread at the same time must not use it)."""
    held = _HELPER[0]
    return held[1] if held is not None and held[0] == threading.get_ident() else None
