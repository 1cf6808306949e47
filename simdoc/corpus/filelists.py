"""Lists of files to read: ``--files-from`` (one per line) and ``--files0-from`` (NUL-separated).

The names follow GNU du, wc and sort: ``--files0-from`` reads names each
ended (or separated) by a NUL byte, as ``find -print0`` writes them, so any
file name, newlines included, comes through. ``--files-from`` reads one name
per line, a trailing carriage return dropped. A NUL byte can never be part of
a file name, so a NUL in a newline-separated list means the list was written
for ``--files0-from``: that is an error saying so, not a guess.

``-0``/``--null`` has nothing to do with these lists: it shapes output only
(as in fd, ripgrep and ``find -print0``).

A name in a list is a :class:`ListedPath` (a URL: a :class:`ListedURL`): a list is often made before the
run (a nightly ``find`` into a file), so a name that no longer exists is a
file skipped with a warning, as one that vanishes during a folder walk is,
not the end of the run. A CORPUS named on the command line that does not
exist is still an error (a typo, most likely).
"""

from __future__ import annotations

import os
from pathlib import PosixPath
from typing import BinaryIO

from simdoc.corpus.objects import is_url
from simdoc.errors import UsageError


class ListedPath(PosixPath):
    """A path read from a ``--files-from``/``--files0-from`` list: it may be gone by the time it is read."""


class ListedURL(str):
    """A URL read from such a list (``s3://bucket/key``): an object, which may be gone too
    (see :mod:`simdoc.corpus.object_lists`). A Path would fold its ``//``."""


def listed(name: str) -> ListedPath | ListedURL:
    """A name read from a list, as the path or URL it is."""
    return ListedURL(name) if is_url(name) else ListedPath(name)


def read_file_list(stream: BinaryIO, nul_separated: bool) -> list[str]:
    """The file names in a list, as ``str`` (undecodable bytes kept by ``os.fsdecode``).

    Newline-separated lists drop blank lines; NUL-separated lists drop only
    empty names (a name of blanks is a name).

    Raises
    ------
    UsageError
        A newline-separated list holds a NUL byte.
    """
    raw = stream.read()
    where = _list_name(stream)
    if nul_separated:
        return [os.fsdecode(p) for p in raw.split(b"\0") if p]
    nul = raw.find(b"\0")
    if nul >= 0:
        raise UsageError(
            f"--files-from {where}: the list holds a NUL byte (at byte {nul}), so it is NUL-separated",
            hint="read a NUL-separated list (find -print0) with --files0-from; -0 shapes output only",
        )
    return [os.fsdecode(p.removesuffix(b"\r")) for p in raw.split(b"\n") if p.strip()]


def _list_name(stream: BinaryIO) -> str:
    name = getattr(stream, "name", None)
    return "-" if not isinstance(name, str) or name == "<stdin>" else name


def chosen_list(files_from: BinaryIO | None, files0_from: BinaryIO | None) -> list[str] | None:
    """The names of whichever list was given, or None; both at once is a usage error."""
    if files_from is not None and files0_from is not None:
        raise UsageError(
            "--files-from and --files0-from were both given",
            hint="give one list: --files-from for one name per line, --files0-from for NUL-separated names",
        )
    if files0_from is not None:
        return read_file_list(files0_from, nul_separated=True)
    if files_from is not None:
        return read_file_list(files_from, nul_separated=False)
    return None
