"""Find and read the documents of a corpus.

A corpus is a directory. Its documents are the regular files below it,
recursively, except hidden files and directories (names starting with ".")
and the index directory itself when it lies inside the corpus. Symbolic
links are not followed unless asked (a link can point outside the corpus or
form a loop); each one is reported. With --follow-symlinks every real
directory is walked once, so loops are cut and reported. FIFOs, sockets and
devices are never opened. A document's id is its path relative to the corpus
root with "/" separators; documents are numbered in sorted id order, so the
numbering never depends on the order the file system lists them in.

Reading: a file whose first 8 KiB hold a NUL byte is binary and skipped; a
file that cannot be read is skipped; both with a warning. Text is decoded as
UTF-8 (a leading byte-order mark is dropped); invalid bytes become U+FFFD
with a warning, and the document is kept. Files are opened non-blocking
and checked again after opening; --max-bytes caps how much of one file is
read (with a warning naming it); a file that changes while being read is
indexed as read, with a warning.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from simdoc.errors import CorpusError

BINARY_SNIFF = 8192
COMPRESSED = {".gz": "gzip", ".bz2": "bzip2", ".xz": "xz", ".zst": "zstd"}
DECOMPRESS_ERRORS: tuple = (OSError, EOFError, ValueError)


JSONL_SUFFIXES = (".jsonl", ".ndjson")
WARC_SUFFIXES = (".warc", ".warc.gz")
MEMBER_SEPARATOR = "/#"  # between a file's id and the key of a document inside it


def is_jsonl(path: str) -> bool:
    """A JSON Lines file by its name (``.jsonl``, ``.ndjson``, possibly compressed)."""
    for suffix in COMPRESSED:
        if path.endswith(suffix):
            path = path[: -len(suffix)]
            break
    return path.endswith(JSONL_SUFFIXES)


def is_warc(path: str) -> bool:
    return path.endswith(WARC_SUFFIXES)


def walk_key(doc_id: str) -> str:
    """What a file's id sorts by: a file of many documents sorts as its members' ids do.

    A member's id is ``PATH/#KEY`` (see :mod:`simdoc.corpus.formats`). Since PATH is
    a file, no other file's id starts with ``PATH/``: member ids never equal
    another document's id. Sorting such a file as ``PATH/``, the way a
    directory sorts, keeps the ids of all documents in sorted order.
    """
    return doc_id + "/" if is_jsonl(doc_id) or is_warc(doc_id) else doc_id


def compression_of(path: str) -> str | None:
    """The compression a file name says it has (.gz, .bz2, .xz, .zst), or None."""
    for suffix, kind in COMPRESSED.items():
        if path.endswith(suffix):
            return kind
    return None


def decompressing_reader(fileobj, kind: str):
    """A file-like object with read(n) giving the decompressed bytes.

    gzip, bzip2 and xz come with Python; zstd needs the ``zstandard`` package
    (``pip install zstandard``, or ``pip install '.[zstd]'`` in simdoc's source folder),
    and a clear error says so.
    """
    if kind == "gzip":
        import gzip

        return gzip.GzipFile(fileobj=fileobj, mode="rb")
    if kind == "bzip2":
        import bz2

        return bz2.BZ2File(fileobj, mode="rb")
    if kind == "xz":
        import lzma

        return lzma.LZMAFile(fileobj, mode="rb")
    try:
        import zstandard
    except ImportError:
        raise OSError("zstd-compressed, and the zstandard package is not installed (pip install zstandard)") from None
    return zstandard.ZstdDecompressor().stream_reader(fileobj)


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
    text: str | bytes | None  # bytes only when asked for (read_document(keep_ascii=True)): ASCII text
    digest: str = ""
    warning: str | None = None
    status: str = "ok"  # ok | replaced | binary | unreadable


def discover(
    root: str | os.PathLike,
    exclude: list[str | os.PathLike] = (),
    follow_symlinks: bool = False,
    include_globs: tuple[str, ...] = (),
    exclude_globs: tuple[str, ...] = (),
) -> tuple[list[FileEntry], list[Skipped]]:
    """List the documents under ``root`` sorted by id, and what was passed over (sorted by id).

    See :func:`walk`, which finds the same documents one at a time.
    """
    skipped: list[Skipped] = []
    entries = list(walk(root, exclude, follow_symlinks, include_globs, exclude_globs, skipped))
    skipped.sort(key=lambda s: s.id)
    return entries, skipped


def walk(
    root: str | os.PathLike,
    exclude: list[str | os.PathLike] = (),
    follow_symlinks: bool = False,
    include_globs: tuple[str, ...] = (),
    exclude_globs: tuple[str, ...] = (),
    skipped: list[Skipped] | None = None,
) -> Iterator[FileEntry]:
    """The documents under ``root`` in id order, as they are found.

    The shingle stage starts reading the first files while the rest of the
    tree is still being listed. Paths passed over are appended to ``skipped``
    (in walk order). ``exclude`` names directories (the index) never to
    enter. ``include_globs`` keeps only documents whose id matches one of
    them, ``exclude_globs`` drops those that match any (it wins); globs follow
    ``fnmatch`` and are matched against the whole id, where ``*`` also
    crosses ``/`` (``*.txt`` matches ``a/b.txt``).

    With ``follow_symlinks``, links to files and directories are followed,
    wherever they point; each real directory is walked once (the first
    reached in id order), so a link loop is reported and cut rather than
    followed forever.

    Raises
    ------
    CorpusError
        ``root`` does not exist or is not a directory (at once, not when
        the first document is asked for).
    """
    root_path = Path(root)
    if not root_path.exists():
        raise CorpusError(f"corpus {root} does not exist", hint="check the path")
    if not root_path.is_dir():
        raise CorpusError(f"corpus {root} is not a directory", hint="pass the folder that holds the documents")
    return _walk(str(root_path.resolve()), exclude, follow_symlinks, include_globs, exclude_globs,
                 skipped if skipped is not None else [])


def _walk(root_abs: str, exclude, follow_symlinks: bool, include_globs, exclude_globs, skipped: list) -> Iterator[FileEntry]:
    # Only directories can be excluded (the index); compare resolved paths, once per directory.
    excluded = {os.path.realpath(e) for e in exclude}
    root_st = os.stat(root_abs)
    walked = {(root_st.st_dev, root_st.st_ino)}
    # A depth-first walk whose every directory lists its files and subdirectories sorted by
    # name, a subdirectory as if its name ended in "/", gives the ids in sorted order: all
    # ids under "d/" sort together, where "d/" sorts among its siblings. A file of many
    # documents sorts the same way, as the "f/#..." ids of its members do (see walk_key).
    pending = [iter(_listing(root_abs, "", excluded, follow_symlinks, skipped))]
    while pending:
        item = next(pending[-1], None)
        if item is None:
            pending.pop()
            continue
        child_rel, path, st = item
        if stat.S_ISREG(st.st_mode):
            if _selected(child_rel, include_globs, exclude_globs):
                yield FileEntry(child_rel, path, st.st_size, st.st_mtime_ns)
            continue
        key = (st.st_dev, st.st_ino)
        if key in walked:
            skipped.append(Skipped(child_rel, "directory already walked (symbolic link loop or second link to it)"))
            continue
        walked.add(key)
        pending.append(iter(_listing(path, child_rel, excluded, follow_symlinks, skipped)))


def _listing(directory: str, rel: str, excluded: set, follow_symlinks: bool, skipped: list) -> list[tuple]:
    """A directory's files and subdirectories to walk, as (id, path, stat), in walk order."""
    # Plain strings and os.scandir: pathlib costs more than the stat calls on 10^5 files.
    try:
        with os.scandir(directory) as it:
            children = list(it)
    except OSError as exc:
        skipped.append(Skipped(rel or ".", f"directory cannot be listed: {exc.strerror or exc}"))
        return []
    keyed = []
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
        if stat.S_ISLNK(st.st_mode):
            if not follow_symlinks:
                skipped.append(Skipped(child_rel, "symbolic link, not followed (--follow-symlinks follows links)"))
                continue
            try:
                st = os.stat(entry.path)
            except OSError as exc:
                skipped.append(Skipped(child_rel, f"broken symbolic link: {exc.strerror or exc}"))
                continue
        if stat.S_ISREG(st.st_mode):
            keyed.append((walk_key(name), child_rel, entry.path, st))
        elif stat.S_ISDIR(st.st_mode):
            if excluded and os.path.realpath(entry.path) in excluded:
                continue
            keyed.append((name + "/", child_rel, entry.path, st))
        else:
            skipped.append(Skipped(child_rel, "not a regular file (device, FIFO or socket)"))
    keyed.sort(key=lambda k: k[0])
    return [k[1:] for k in keyed]


def _selected(doc_id: str, include_globs, exclude_globs) -> bool:
    if include_globs and not any(fnmatch.fnmatchcase(doc_id, g) for g in include_globs):
        return False
    return not (exclude_globs and any(fnmatch.fnmatchcase(doc_id, g) for g in exclude_globs))


def _select(entries: list[FileEntry], include_globs, exclude_globs) -> list[FileEntry]:
    """The entries --include/--exclude keep, in walk order (sorted by :func:`walk_key`)."""
    return sorted((e for e in entries if _selected(e.id, include_globs, exclude_globs)), key=lambda e: walk_key(e.id))


def open_regular(path: str, follow_symlinks: bool = False) -> tuple[int, os.stat_result] | ReadResult:
    """Open a file to read without ever blocking, and check it is still a regular file.

    A FIFO or device that replaced the file since the scan would block a
    plain open; O_NONBLOCK plus an fstat afterwards skips it. Symbolic links
    are refused unless ``follow_symlinks``. Returns (descriptor, its stat),
    or the ReadResult saying why the file is skipped.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return ReadResult(None, warning="vanished before it could be read, skipped", status="unreadable")
    except OSError as exc:
        if exc.errno == getattr(os, "ELOOP", -1) and not follow_symlinks:
            return ReadResult(None, warning="became a symbolic link, not followed", status="unreadable")
        return ReadResult(None, warning=f"cannot read: {exc.strerror or exc}", status="unreadable")
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            return ReadResult(None, warning="not a regular file any more (FIFO, device or socket?), skipped", status="unreadable")
        # O_NONBLOCK stays set: it has no effect on regular files (open(2)), and clearing
        # it would cost two more system calls per file.
    except OSError as exc:
        os.close(fd)
        return ReadResult(None, warning=f"cannot read: {exc.strerror or exc}", status="unreadable")
    return fd, st


def read_document(
    path: str,
    max_bytes: int | None = None,
    follow_symlinks: bool = False,
    keep_ascii: bool = False,
    opened: tuple[int, os.stat_result] | ReadResult | None = None,
) -> ReadResult:
    """Read and decode one file; never raises for a file's own problems, never blocks.

    The file is opened non-blocking and checked to be a regular file after
    opening (it may have been replaced by a FIFO or device since the scan),
    without following a symbolic link unless ``follow_symlinks``. At most
    ``max_bytes`` are read, with a warning if the file is longer. A file that
    changes while it is read is indexed as read, with a warning. With
    ``keep_ascii``, a file that is all ASCII comes back as its bytes, not
    decoded (the shingle workers turn them into code points without a str).
    ``opened`` is what :func:`open_regular` returned for ``path``, when the
    caller opened it ahead (to prefetch it); the descriptor is closed here.
    """
    if opened is None:
        opened = open_regular(path, follow_symlinks)
    if isinstance(opened, ReadResult):
        return opened
    fd, before = opened
    warnings: list[str] = []
    try:
        kind = compression_of(path)
        if kind is not None:
            raw = _read_decompressed(fd, kind, max_bytes)
        else:
            limit = before.st_size + 1 if max_bytes is None else max_bytes + 1
            chunks, got = [], 0
            while got < limit:
                chunk = os.read(fd, min(1 << 24, limit - got))
                if not chunk:
                    break
                chunks.append(chunk)
                got += len(chunk)
                if got == before.st_size > 0 and max_bytes is None:
                    break  # all of it; growth since is caught by the fstat below, without one more read
            raw = b"".join(chunks)
            if max_bytes is None and len(raw) > before.st_size:
                # It grew while we read: take the rest too, and say so below.
                while chunk := os.read(fd, 1 << 24):
                    raw += chunk
        if max_bytes is not None and len(raw) > max_bytes:
            raw = raw[:max_bytes]
            warnings.append(f"longer than --max-bytes {max_bytes}; only the first {max_bytes} bytes are indexed")
        after = os.fstat(fd)
        if (after.st_size, after.st_mtime_ns) != (before.st_size, before.st_mtime_ns):
            warnings.append("changed while being read; indexed as read (run again to pick up the final version)")
    except _Undecompressable as exc:
        return ReadResult(None, warning=f"cannot decompress: {exc}", status="unreadable")
    except OSError as exc:
        return ReadResult(None, warning=f"cannot read: {exc.strerror or exc}", status="unreadable")
    finally:
        os.close(fd)
    digest = hashlib.blake2b(raw, digest_size=16).hexdigest()
    if b"\x00" in raw[:BINARY_SNIFF]:
        return ReadResult(None, digest, warning="binary file (NUL byte), skipped", status="binary")
    if keep_ascii and raw.isascii():
        return ReadResult(raw, digest, warning="; ".join(warnings) or None, status=_status(warnings))
    try:
        text = raw.decode("utf-8-sig")
        status = "ok"
    except UnicodeDecodeError as exc:
        text = raw.decode("utf-8-sig", errors="replace")
        warnings.append(f"invalid UTF-8 at byte {exc.start}, undecodable bytes replaced by U+FFFD")
        status = "replaced"
    if status == "ok":
        status = _status(warnings)
    return ReadResult(text, digest, warning="; ".join(warnings) or None, status=status)


def file_digest(path: str, max_bytes: int | None = None, follow_symlinks: bool = False) -> str | None:
    """BLAKE2b-128 of the bytes a file is indexed from (decompressed; the first ``max_bytes``), read in chunks.

    The digest :func:`read_document` gives, without holding the file: for a
    caller that reads only part of a file but must know whether the whole
    is still the one indexed. None if it cannot be read.
    """
    opened = open_regular(path, follow_symlinks)
    if isinstance(opened, ReadResult):
        return None
    fd, _ = opened
    digest = hashlib.blake2b(digest_size=16)
    raw_file = os.fdopen(fd, "rb")
    try:
        kind = compression_of(path)
        reader = decompressing_reader(raw_file, kind) if kind is not None else raw_file
        left = max_bytes
        while left is None or left > 0:
            chunk = reader.read(1 << 24 if left is None else min(1 << 24, left))
            if not chunk:
                break
            digest.update(chunk)
            if left is not None:
                left -= len(chunk)
    except Exception:  # unreadable, or a damaged archive: each decompressor has its own errors
        return None
    finally:
        raw_file.close()
    return digest.hexdigest()


def _status(warnings: list[str]) -> str:
    return "partial" if any("max-bytes" in w for w in warnings) else "ok"


class _Undecompressable(Exception):
    pass


def _read_decompressed(fd: int, kind: str, max_bytes: int | None) -> bytes:
    """All the decompressed bytes (up to max_bytes + 1, to tell that there are more)."""
    raw_file = os.fdopen(os.dup(fd), "rb")
    try:
        reader = decompressing_reader(raw_file, kind)
        out, got = [], 0
        while True:
            want = 1 << 24 if max_bytes is None else min(1 << 24, max_bytes + 1 - got)
            if want <= 0:
                break
            chunk = reader.read(want)
            if not chunk:
                break
            out.append(chunk)
            got += len(chunk)
        return b"".join(out)
    except Exception as exc:  # every decompressor raises its own kinds of errors on bad data
        raise _Undecompressable(str(exc) or type(exc).__name__) from None
    finally:
        raw_file.close()


def resolve_sources(corpus) -> tuple[str, list[tuple[str, str]]]:
    """The base folder document ids are relative to, and each source with its id prefix.

    One folder: ids are paths relative to it (``simdoc pairs crawl/``). Several
    folders, or files: ids are relative to the deepest folder holding all of
    them (``simdoc pairs a/ b/`` gives ``a/x.txt`` and ``b/y.txt``), so ids never
    collide and stay readable.

    Raises
    ------
    CorpusError
        A source does not exist.
    """
    items = [corpus] if isinstance(corpus, (str, os.PathLike)) else list(corpus)
    if not items:
        raise CorpusError("no corpus given", hint="name a folder, files, or --files-from")
    absolute = []
    for item in items:
        path = os.path.abspath(os.fspath(item))
        if not os.path.exists(path):
            raise CorpusError(f"corpus {item} does not exist", hint="check the path")
        absolute.append(path)
    if len(absolute) == 1 and os.path.isdir(absolute[0]):
        base = os.path.realpath(absolute[0])
        return base, [(base, "")]
    base = os.path.commonpath([os.path.dirname(p.rstrip(os.sep)) for p in absolute])
    out = []
    for path in absolute:
        rel = os.path.relpath(path, base).replace(os.sep, "/")
        out.append((path, rel))
    return base, out


def discover_sources(
    corpus,
    exclude: list[str | os.PathLike] = (),
    follow_symlinks: bool = False,
    include_globs: tuple[str, ...] = (),
    exclude_globs: tuple[str, ...] = (),
    lazy: bool = False,
) -> tuple[str, list[FileEntry] | Iterator[FileEntry], list[Skipped]]:
    """:func:`discover` over one folder, several folders, or files; returns the id base too.

    With ``lazy``, the documents come as an iterator in id order: one
    folder's are found while it is consumed (:func:`walk`), and the list of
    what was passed over is complete, and sorted by id, only once the
    iterator is exhausted.
    """
    base, sources = resolve_sources(corpus)
    if len(sources) == 1 and sources[0][1] == "":
        if lazy:
            skipped: list[Skipped] = []
            found = walk(sources[0][0], exclude, follow_symlinks, include_globs, exclude_globs, skipped)
            return base, _then_sorted(found, skipped), skipped
        entries, skipped = discover(sources[0][0], exclude, follow_symlinks, include_globs, exclude_globs)
        return base, entries, skipped
    entries: dict[str, FileEntry] = {}
    skipped: list[Skipped] = []
    for path, prefix in sources:
        if os.path.isdir(path):
            found, passed = discover(path, exclude, follow_symlinks)
            for e in found:
                entries.setdefault(f"{prefix}/{e.id}", FileEntry(f"{prefix}/{e.id}", e.path, e.size, e.mtime_ns))
            skipped.extend(Skipped(f"{prefix}/{s.id}", s.reason) for s in passed)
            continue
        try:
            st = os.stat(path) if follow_symlinks else os.lstat(path)
        except OSError as exc:
            skipped.append(Skipped(prefix, f"cannot stat: {exc.strerror or exc}"))
            continue
        if stat.S_ISREG(st.st_mode):
            entries.setdefault(prefix, FileEntry(prefix, path, st.st_size, st.st_mtime_ns))
        elif stat.S_ISLNK(st.st_mode):
            skipped.append(Skipped(prefix, "symbolic link, not followed (--follow-symlinks follows links)"))
        else:
            skipped.append(Skipped(prefix, "not a regular file (device, FIFO or socket)"))
    skipped.sort(key=lambda s: s.id)
    selected = _select(list(entries.values()), include_globs, exclude_globs)
    return base, (iter(selected) if lazy else selected), skipped


def _then_sorted(found: Iterator[FileEntry], skipped: list[Skipped]) -> Iterator[FileEntry]:
    yield from found
    skipped.sort(key=lambda s: s.id)
