"""The command's standard streams: closed descriptors and output that cannot be written.

Two things can go wrong with stdout that are not simdoc's fault and must not
end in a traceback:

* the descriptor is closed (``simdoc pairs ... >&-``): Python then has no
  ``sys.stdout`` at all, and the next file simdoc opens would become
  descriptor 1, where any stray write would land in the index. Like the GNU
  tools, :func:`open_closed_descriptors` puts ``/dev/null`` on a closed 0, 1
  or 2 at start-up; a closed stdout is remembered so that the first record
  written to it fails (a command that prints nothing still succeeds);
* a write fails (``> /dev/full``, a full disk, an I/O error).

:func:`guarded_stdout` turns either into :class:`~simdoc.errors.OutputError`
(exit 6). A reader that goes away (``| head``, ``BrokenPipeError``) is not an
error; the CLI stops quietly on it, as ripgrep does.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import sys
from collections.abc import Iterator

from simdoc.errors import OutputError


class _ClosedOutput(io.RawIOBase):
    """What stands for a stdout that was closed when simdoc started: every write fails with EBADF."""

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        raise OSError(errno.EBADF, "stdout is closed")


def open_closed_descriptors() -> None:
    """Give /dev/null to descriptors 0, 1 and 2 if they are closed, and Python streams to match.

    Called once at start-up, before any file is opened.
    """
    for fd, flags in ((0, os.O_RDONLY), (1, os.O_WRONLY), (2, os.O_WRONLY)):
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        null = os.open(os.devnull, flags)
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
        if fd == 0:
            sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115 - lives as long as the process
        elif fd == 1:
            sys.stdout = io.TextIOWrapper(io.BufferedWriter(_ClosedOutput()), encoding="utf-8", write_through=True)
        else:
            # Nowhere to tell anyone anything: messages go to /dev/null.
            sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115


def _failed(exc: OSError) -> OutputError:
    if exc.errno == errno.EBADF:
        return OutputError(
            "cannot write the output: stdout is closed",
            hint="send it to a file or to /dev/null (> /dev/null) rather than closing it (>&-)",
            stdout=True,
        )
    reason = exc.strerror or str(exc)
    return OutputError(
        f"cannot write the output to stdout: {reason}",
        hint="free some space or send the output elsewhere"
        if exc.errno in (errno.ENOSPC, errno.EDQUOT)
        else "check the file or device stdout goes to",
        stdout=True,
    )


class _Guarded:
    """A stream whose failed writes and flushes raise OutputError; everything else is the stream's own."""

    def __init__(self, stream) -> None:
        self._stream = stream
        self.failed = False

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except BrokenPipeError:
            raise  # the reader went away: not an error (see the CLI)
        except OSError as exc:
            self.failed = True
            raise _failed(exc) from None

    def write(self, data):
        with self._errors():
            return self._stream.write(data)

    def writelines(self, lines) -> None:
        with self._errors():
            self._stream.writelines(lines)

    def flush(self) -> None:
        with self._errors():
            self._stream.flush()

    @property
    def buffer(self):
        # The bytes written for -0 must fail the same way; AttributeError if there is no buffer.
        inner = _Guarded(self._stream.buffer)
        inner._errors = self._errors
        return inner

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


@contextlib.contextmanager
def guarded_stdout() -> Iterator[None]:
    """Run the command line with a stdout whose write errors are OutputError; flush it at the end.

    The final flush is part of the command: data still buffered when Python
    exits would otherwise fail there, with a message of Python's own. After
    a failure nothing is flushed again (the message is said once).
    """
    real = sys.stdout
    if real is None:  # only when simdoc runs without open_closed_descriptors (an embedding program)
        yield
        return
    guard = _Guarded(real)
    sys.stdout = guard
    try:
        try:
            yield
        except SystemExit:
            if not guard.failed:
                guard.flush()
            raise
        if not guard.failed:
            guard.flush()
    finally:
        if sys.stdout is guard:
            sys.stdout = real


def discard_stdout() -> None:
    """After a failed write: drop what is still buffered, so that exiting does not fail a second time."""
    stream = sys.stdout
    with contextlib.suppress(AttributeError, OSError, ValueError, io.UnsupportedOperation):
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, stream.fileno())
        finally:
            os.close(null)
    # A stream with no descriptor (stdout closed at start-up) is replaced instead: Python
    # flushes the current sys.stdout at exit and reports only that stream's errors.
    if isinstance(getattr(getattr(stream, "buffer", None), "raw", None), _ClosedOutput):
        sys.stdout = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115
