"""Find and read the documents of a corpus.

A corpus is a directory. Its documents are the regular files below it,
recursively, except hidden files and directories (names starting with ".")
and the index directory itself when it lies inside the corpus. Symbolic
links are not followed (a link can point outside the corpus or form a loop);
each one is reported. A document's id is its path relative to the corpus
root with "/" separators; documents are numbered in sorted id order, so the
numbering never depends on the order the file system lists them in.

Reading: a file whose first 8 KiB hold a NUL byte is binary and skipped; a
file that cannot be read is skipped; both with a warning. Text is decoded as
UTF-8 (a leading byte-order mark is dropped); invalid bytes become U+FFFD
with a warning, and the document is kept.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from simdoc.errors import CorpusError

BINARY_SNIFF = 8192


@dataclass(frozen=True, slots=True)
class FileEntry:
    """A file found in the corpus, before it is read."""

    id: str
    path: str
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class Skipped:
    """A path that is not a document, and why."""

    id: str
    reason: str


@dataclass
class ReadResult:
    text: str | None
    digest: str = ""
    warning: str | None = None
    status: str = "ok"  # ok | replaced | binary | unreadable


def discover(root: str | os.PathLike, exclude: list[str | os.PathLike] = ()) -> tuple[list[FileEntry], list[Skipped]]:
    """List the documents under ``root`` sorted by id, and what was passed over.

    Raises
    ------
    CorpusError
        ``root`` does not exist or is not a directory.
    """
    root_path = Path(root)
    if not root_path.exists():
        raise CorpusError(f"corpus {root} does not exist", hint="check the path")
    if not root_path.is_dir():
        raise CorpusError(f"corpus {root} is not a directory", hint="pass the folder that holds the documents")
    root_abs = str(root_path.resolve())
    # Only directories can be excluded (the index); compare resolved paths, once per directory.
    excluded = {os.path.realpath(e) for e in exclude}
    entries: list[FileEntry] = []
    skipped: list[Skipped] = []
    # Plain strings and os.scandir: pathlib costs more than the stat calls on 10^5 files.
    stack = [(root_abs, "")]
    while stack:
        directory, rel = stack.pop()
        try:
            with os.scandir(directory) as it:
                children = list(it)
        except OSError as exc:
            skipped.append(Skipped(rel or ".", f"directory cannot be listed: {exc.strerror or exc}"))
            continue
        for entry in children:
            name = entry.name
            if name.startswith("."):
                continue
            child_rel = f"{rel}/{name}" if rel else name
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError as exc:
                skipped.append(Skipped(child_rel, f"cannot stat: {exc.strerror or exc}"))
                continue
            mode = st.st_mode
            if stat.S_ISREG(mode):
                entries.append(FileEntry(child_rel, entry.path, st.st_size, st.st_mtime_ns))
            elif stat.S_ISDIR(mode):
                if not (excluded and os.path.realpath(entry.path) in excluded):
                    stack.append((entry.path, child_rel))
            elif stat.S_ISLNK(mode):
                skipped.append(Skipped(child_rel, "symbolic link, not followed"))
            else:
                skipped.append(Skipped(child_rel, "not a regular file (device, FIFO or socket)"))
    entries.sort(key=lambda e: e.id)
    skipped.sort(key=lambda s: s.id)
    return entries, skipped


def read_document(path: str) -> ReadResult:
    """Read and decode one file; never raises for a file's own problems."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        return ReadResult(None, warning=f"cannot read: {exc.strerror or exc}", status="unreadable")
    digest = hashlib.blake2b(raw, digest_size=16).hexdigest()
    if b"\x00" in raw[:BINARY_SNIFF]:
        return ReadResult(None, digest, warning="binary file (NUL byte), skipped", status="binary")
    try:
        text = raw.decode("utf-8-sig")
        return ReadResult(text, digest)
    except UnicodeDecodeError as exc:
        text = raw.decode("utf-8-sig", errors="replace")
        return ReadResult(
            text,
            digest,
            warning=f"invalid UTF-8 at byte {exc.start}, undecodable bytes replaced by U+FFFD",
            status="replaced",
        )
