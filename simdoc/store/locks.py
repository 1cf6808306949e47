"""The two lock files of an index directory: ``lock`` (the writer's) and ``readers``.

Both are ``flock`` targets (see :mod:`simdoc.store.directory`). The writer
truncates ``lock`` and writes its pid into it, so each must be simdoc's own
regular file: a symbolic link (even a dangling one) is never followed, and
anything else in its place (a directory, a FIFO, a hard link to some other
file) is refused by every command that opens it, and named by ``simdoc
check``, which opens neither.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path

from simdoc.errors import IndexError_
from simdoc.indexmarks import LOCK, MANIFEST, READERS, foreign_manifest  # noqa: F401  (the corpus knows them too: simdoc.indexmarks)


_SYMLINK = "is a symbolic link; simdoc never follows links for its lock files"
_DIRECTORY = "is a directory, not simdoc's lock file"


def _hint(path: Path) -> str:
    return f"remove {path} (simdoc makes a new one), and check who put it there"


def _what(st: os.stat_result) -> str | None:
    """What is wrong with a lock file of this stat, or None if it is one simdoc can use."""
    if stat.S_ISLNK(st.st_mode):
        return _SYMLINK
    if stat.S_ISDIR(st.st_mode):
        return _DIRECTORY
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file, so it is not simdoc's lock file"
    if st.st_nlink > 1:
        return "has another name (a hard link), so it is not simdoc's lock file"
    return None


def open_lock_file(path: Path) -> int:
    """A read-write descriptor of a lock file (``lock``, ``readers``), created if missing.

    The writer truncates its lock file and writes its pid into it, so that
    file must be simdoc's own: a symbolic link (even a dangling one) is never
    followed, and anything but a regular file with one name (a directory, a
    FIFO, a hard link to some other file) is refused.

    Raises
    ------
    IndexError_
        The name is taken by something else than a lock file, or the folder holds another tool's
        manifest.json: its ``lock`` may be that tool's, which the writer would truncate.
    """
    manifest = path.parent / MANIFEST
    if manifest.is_file() and not manifest.is_symlink() and foreign_manifest(manifest.read_bytes()):
        raise IndexError_(f"{path.parent} is not a simdoc index (its manifest.json is not simdoc's)", hint="choose another --index")
    flags = os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o666)  # less the umask, as the index's files: a group may share it
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise IndexError_(f"{path} {_SYMLINK}", hint=_hint(path)) from None
        if exc.errno == errno.EISDIR:
            raise IndexError_(f"{path} {_DIRECTORY}", hint=_hint(path)) from None
        raise
    what = _what(os.fstat(fd))
    if what is not None:
        os.close(fd)
        raise IndexError_(f"{path} {what}", hint=_hint(path))
    return fd


def lock_file_problems(directory: Path) -> list[str]:
    """What every writer would refuse in the lock files of an index directory, one line each,
    found without opening or making them (for ``simdoc check``, which takes no writer lock)."""
    problems = []
    for name in (LOCK, READERS):
        try:
            st = os.lstat(directory / name)
        except FileNotFoundError:  # made by the next run that needs it
            continue
        what = _what(st)
        if what is not None:
            problems.append(f"{directory / name} {what}: every writer refuses it; {_hint(directory / name)}")
    return problems


def lock_holder(fd: int) -> str:
    """Who holds the writer lock of descriptor ``fd``, as the note it wrote says ("pid N since
    ..."); "another process" when there is no note, or when it names a process that has ended:
    a note the holder has not yet written over (in the instant after it took the lock), or one
    an older writer left (a process holds the lock, so that pid is not the holder)."""
    note = os.pread(fd, 200, 0).decode("utf-8", "replace").strip()
    found = re.match(r"pid (\d+) since ", note)
    if found is None:
        return "another process"
    try:
        os.kill(int(found.group(1)), 0)
    except (ProcessLookupError, OverflowError):  # ended, or no pid at all
        return "another process"
    except OSError:  # alive, but not ours to signal (EPERM)
        pass
    return note
