"""Read one file of the corpus safely: opened without blocking, checked, decompressed, decoded.

A file whose first 8 KiB hold a NUL byte is binary and skipped; a file that
cannot be read is skipped; both with a warning. Text is decoded as UTF-8 (a
leading byte-order mark is dropped); a byte that is not valid UTF-8 is kept
as itself, with a warning, and the document is kept; a text that starts with
a UTF-16 or UTF-32 byte-order mark is read in that encoding
(:mod:`simdoc.corpus.encodings`). Files are opened non-blocking and
checked again after opening (a FIFO or device put in a file's place is
never read); ``--max-bytes`` caps how much of one file is read (with a
warning naming it); a file that changes while being read is indexed as
read, with a warning. Compression is known by the file's name
(:data:`COMPRESSED`, in any case: ``.GZ`` is ``.gz``); zstd needs the
``zstandard`` package.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass

from simdoc.corpus.encodings import NOT_UTF8, kept_decode, unicode_bom, whole_chars, wide_text
from simdoc.corpus.objects import is_url

BINARY_SNIFF = 8192
# Why a binary file is skipped: a NUL byte among its first BINARY_SNIFF bytes, or a NUL character
# among the first BINARY_SNIFF characters of a text in UTF-16 or UTF-32 (``wide``).
BINARY = "binary file (NUL byte), skipped"
BINARY_WIDE = "binary file (NUL character), skipped"


COMPRESSED = {".gz": "gzip", ".bz2": "bzip2", ".xz": "xz", ".zst": "zstd"}


DECOMPRESS_ERRORS: tuple = (OSError, EOFError, ValueError)


def compression_of(path: str) -> str | None:
    """The compression a file name says it has (.gz, .bz2, .xz, .zst, in any case), or None."""
    # Each suffix is one dot and what follows: the name ends with one if it is all from its last dot.
    return COMPRESSED.get(path[path.rfind(".") :].lower()) if "." in path else None


def uncompressed_name(path: str) -> str:
    """The name lowercased, without its compression suffix: what tells its format (``A.JSONL.GZ`` -> ``a.jsonl``).

    Suffixes are matched in any case, as a file from an archive made elsewhere may be named in capitals.
    """
    lowered = path.lower()
    return lowered[: lowered.rfind(".")] if compression_of(lowered) else lowered


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
        import zstandard  # noqa: F401
    except ImportError:
        raise OSError("zstd-compressed, and the zstandard package is not installed (pip install zstandard)") from None
    from simdoc.corpus.zstd_frames import ZstdReader

    return ZstdReader(fileobj)  # a file cut short raises EOFError, as the other three do


@dataclass
class ReadResult:
    text: str | bytes | None  # bytes only when asked for (read_document(keep_ascii=True)): ASCII text
    digest: str = ""
    warning: str | None = None
    status: str = "ok"  # ok | replaced | binary | unreadable


def open_regular(path: str, follow_symlinks: bool = False, ranged: bool = False) -> tuple[int, os.stat_result] | ReadResult:
    """Open a file to read without ever blocking, and check it is still a regular file.

    A FIFO or device that replaced the file since the scan would block a
    plain open; O_NONBLOCK plus an fstat afterwards skips it. Symbolic links
    are refused unless ``follow_symlinks``. Returns (descriptor, its stat),
    or the ReadResult saying why the file is skipped.

    A URL (``s3://...``) is opened through fsspec instead
    (:func:`simdoc.corpus.object_reads.open_object`; ``ranged``: each read one
    ranged request): the handle is then a file object, which
    :func:`as_file`, :func:`handle_stat`, :func:`read_from` and
    :func:`close_handle` take as they take a descriptor.
    """
    if is_url(path):
        from simdoc.corpus.object_reads import open_object

        got = open_object(path, ranged)
        return ReadResult(None, warning=got, status="unreadable") if isinstance(got, str) else (got, got.stat)
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
            # A folder named where a file is wanted (`simdoc show FILE FOLDER`) is said as such.
            what = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file any more (FIFO, device or socket?)"
            return ReadResult(None, warning=f"{what}, skipped", status="unreadable")
        # O_NONBLOCK stays set: it has no effect on regular files (open(2)), and clearing
        # it would cost two more system calls per file.
    except OSError as exc:
        os.close(fd)
        return ReadResult(None, warning=f"cannot read: {exc.strerror or exc}", status="unreadable")
    return fd, st


def open_binary(path: str, ranged: bool = False):
    """``open(path, "rb")``, or an object at a URL opened as :func:`open_regular` opens it (an
    object that cannot be opened: OSError saying why)."""
    if not is_url(path):
        return open(path, "rb")
    got = open_regular(path, ranged=ranged)
    if isinstance(got, ReadResult):
        raise OSError(got.warning)
    return got[0]


def as_file(handle, buffering: int = -1):
    """A file object over what :func:`open_regular` opened (a descriptor: it then owns it)."""
    return os.fdopen(handle, "rb", buffering=buffering) if isinstance(handle, int) else handle


def second_file(handle):
    """A file object of its own over the same file (a descriptor's duplicate; an object is shared:
    closing it early is harmless, its stat stays known)."""
    return os.fdopen(os.dup(handle), "rb") if isinstance(handle, int) else handle


def handle_stat(handle):
    """The stat of what :func:`open_regular` opened, now (an object's: as it was opened), or of
    the file object :func:`as_file` made of it."""
    if isinstance(handle, int):
        return os.fstat(handle)
    st = getattr(handle, "stat", None)
    return st if st is not None else os.fstat(handle.fileno())


def read_from(handle, n: int) -> bytes:
    return os.read(handle, n) if isinstance(handle, int) else handle.read(n)


def close_handle(handle) -> None:
    if isinstance(handle, int):
        os.close(handle)
    else:
        handle.close()


def read_document(
    path: str,
    max_bytes: int | None = None,
    follow_symlinks: bool = False,
    keep_ascii: bool = False,
    opened: tuple[int, os.stat_result] | ReadResult | None = None,
    whole_up_to: int | None = None,
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
    ``whole_up_to``: for a file that must be held whole to be read (an HTML
    page, parsed whole): one whose bytes (decompressed) are more than this,
    unless ``max_bytes`` cuts it to that or less, is skipped (status
    ``unreadable``, the warning :func:`too_long` gives) after reading at most
    one byte more than this: it is never held whole.
    """
    # What is read: at most `cap` bytes and one more, to tell that there are more.
    over = whole_up_to is not None and (max_bytes is None or max_bytes > whole_up_to)
    cap = whole_up_to if over else max_bytes
    if opened is None:
        opened = open_regular(path, follow_symlinks)
    if isinstance(opened, ReadResult):
        return opened
    fd, before = opened
    warnings: list[str] = []
    try:
        kind = compression_of(path)
        if kind is not None:
            raw = _read_decompressed(fd, kind, cap)
        else:
            limit = before.st_size + 1 if cap is None else cap + 1
            chunks, got = [], 0
            while got < limit:
                chunk = read_from(fd, min(1 << 24, limit - got))
                if not chunk:
                    break
                chunks.append(chunk)
                got += len(chunk)
                if got == before.st_size > 0 and cap is None:
                    break  # all of it; growth since is caught by the fstat below, without one more read
            raw = b"".join(chunks)
            if cap is None and len(raw) > before.st_size:
                # It grew while we read: take the rest too, and say so below.
                while chunk := read_from(fd, 1 << 24):
                    raw += chunk
        if over and len(raw) > whole_up_to:
            return ReadResult(None, warning=too_long(whole_up_to), status="unreadable")
        cut = max_bytes is not None and len(raw) > max_bytes
        if cut:
            raw = raw[:max_bytes]
            warnings.append(f"longer than --max-bytes {max_bytes}; only the first {max_bytes} bytes are indexed")
        after = handle_stat(fd)
        if (after.st_size, after.st_mtime_ns) != (before.st_size, before.st_mtime_ns):
            warnings.append("changed while being read; indexed as read (run again to pick up the final version)")
    except Undecompressable as exc:
        return ReadResult(None, warning=f"cannot decompress: {exc}", status="unreadable")
    except OSError as exc:
        return ReadResult(None, warning=f"cannot read: {exc.strerror or exc}", status="unreadable")
    finally:
        close_handle(fd)
    digest = hashlib.blake2b(raw, digest_size=16).hexdigest()
    if (codec := unicode_bom(raw)) is not None:
        return _wide(raw, codec, cut, digest, warnings)
    if b"\x00" in raw[:BINARY_SNIFF]:
        return ReadResult(None, digest, warning=BINARY, status="binary")
    if keep_ascii and raw.isascii():
        return ReadResult(raw, digest, warning="; ".join(warnings) or None, status=status_of(warnings))
    # A character the cut splits is left out, as it is of a JSON Lines member's text (not U+FFFD);
    # the digest stays that of the bytes read.
    text, bad = kept_decode(whole_chars(raw) if cut else raw, "utf-8-sig")
    if bad is not None:
        warnings.append(f"invalid UTF-8 at byte {bad} ({NOT_UTF8})")
    status = "replaced" if bad is not None else status_of(warnings)
    return ReadResult(text, digest, warning="; ".join(warnings) or None, status=status)


def _wide(raw: bytes, codec: str, cut: bool, digest, warnings: list[str]) -> ReadResult:
    """:func:`read_document`'s result for a text in UTF-16 or UTF-32 (see :func:`wide_text`)."""
    text, note = wide_text(raw, codec, cut)
    if "\x00" in text[:BINARY_SNIFF]:
        return ReadResult(None, digest, warning=BINARY_WIDE, status="binary")
    warnings += [note] if note else []
    return ReadResult(text, digest, warning="; ".join(warnings) or None, status="replaced" if note else status_of(warnings))


PLAIN_OPEN = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # a final symbolic link is refused by the open itself
_ONE_READ = 1 << 24  # read_document's largest read


def read_plain(path: str, max_bytes: int | None = None, follow_symlinks: bool = False) -> tuple[str | bytes | None, bytes, str | None, str]:
    """``read_document(path, max_bytes, follow_symlinks, keep_ascii=True)`` of a local file whose name
    says it is not compressed, as (text, digest (16 bytes; b"" for none), warning, status).

    One open, one fstat, one read, the fstat that tells a file changed while read, one close,
    and no step of the general case. (The shingle stage makes these calls for a task's small
    files together, in one compiled loop: :mod:`simdoc.corpus.plain_batch`; what that loop
    does not take plainly comes here.) Anything else
    (a file that cannot be opened or is not regular, one of 16 MiB or more, ``max_bytes``, a read
    that is not the whole file) takes :func:`read_document`'s own way, from where this left it.
    """
    try:
        fd = os.open(path, PLAIN_OPEN if follow_symlinks else PLAIN_OPEN | NOFOLLOW)
    except OSError:  # it says why (or, the file back in place, reads it)
        return _as_plain(read_document(path, max_bytes, follow_symlinks, keep_ascii=True))
    try:
        before = os.fstat(fd)
    except OSError:
        os.close(fd)
        return _as_plain(read_document(path, max_bytes, follow_symlinks, keep_ascii=True))
    size = before.st_size
    if not stat.S_ISREG(before.st_mode):  # read_document's open tells what it is
        os.close(fd)
        return _as_plain(read_document(path, max_bytes, follow_symlinks, keep_ascii=True))
    if max_bytes is not None or size >= _ONE_READ:
        return _as_plain(read_document(path, max_bytes, follow_symlinks, keep_ascii=True, opened=(fd, before)))
    warning = None
    try:
        raw = os.read(fd, size + 1)
        if len(raw) != size:  # a short read, or it grew or shrank: read on as read_document does
            raw = read_on(fd, raw, size)
        after = os.fstat(fd)
        if after.st_size != size or after.st_mtime_ns != before.st_mtime_ns:
            warning = "changed while being read; indexed as read (run again to pick up the final version)"
    except OSError as exc:
        return None, b"", f"cannot read: {exc.strerror or exc}", "unreadable"
    finally:
        os.close(fd)
    return plain_text(raw, hashlib.blake2b(raw, digest_size=16).digest(), warning)


def plain_text(raw: bytes, digest: bytes, warning: str | None = None) -> tuple[str | bytes | None, bytes, str | None, str]:
    """:func:`read_plain`'s result for a file read whole as ``raw`` (BLAKE2b-128 ``digest``):
    binary (a NUL among the first :data:`BINARY_SNIFF` bytes), ASCII bytes as they are, or text
    decoded as UTF-8 (a leading byte-order mark dropped; a byte that is not UTF-8 kept as
    itself, :data:`~simdoc.corpus.encodings.UNDECODABLE`, and said)."""
    if (codec := unicode_bom(raw)) is not None:
        res = _wide(raw, codec, False, digest, [warning] if warning else [])
        return res.text, digest, res.warning, res.status
    if raw.find(b"\x00", 0, BINARY_SNIFF) >= 0:
        return None, digest, BINARY, "binary"
    if raw.isascii():
        return raw, digest, warning, "ok"
    text, bad = kept_decode(raw, "utf-8-sig")
    if bad is None:
        return text, digest, warning, "ok"
    said = f"invalid UTF-8 at byte {bad} ({NOT_UTF8})"
    return text, digest, said if warning is None else f"{warning}; {said}", "replaced"


def read_on(fd: int, first: bytes, size: int) -> bytes:
    """read_document's reading loop (no cap) after its first read gave ``first``, not ``size`` bytes."""
    if not first:
        return first
    chunks, got, limit = [first], len(first), size + 1
    while got < limit:
        chunk = os.read(fd, min(_ONE_READ, limit - got))
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
        if got == size > 0:
            break
    raw = b"".join(chunks)
    if len(raw) > size:  # it grew while we read: take the rest too
        while chunk := os.read(fd, _ONE_READ):
            raw += chunk
    return raw


def _as_plain(res: ReadResult) -> tuple[str | bytes | None, bytes, str | None, str]:
    return res.text, bytes.fromhex(res.digest), res.warning, res.status


def too_long(bound: int) -> str:
    """Why a file longer than ``bound`` bytes that is parsed whole (an HTML page) is skipped."""
    size = f"{bound >> 20} MiB" if bound >= 1 << 20 and bound % (1 << 20) == 0 else f"{bound} bytes"
    return f"longer than {size}, skipped (an HTML page is parsed whole; --max-bytes N, at most {bound}, indexes its first N bytes)"


def file_digest(path: str, max_bytes: int | None = None, follow_symlinks: bool = False, decompress: bool = True) -> str | None:
    """BLAKE2b-128 of the bytes a file is indexed from (decompressed; the first ``max_bytes``), read in chunks.

    The digest :func:`read_document` gives, without holding the file: for a
    caller that reads only part of a file but must know whether the whole
    is still the one indexed. None if it cannot be read. Without
    ``decompress``, of its bytes as stored (as a WARC file's is indexed). A
    compressed file cut short: of what it decompresses to, as a JSON Lines
    file cut short is indexed (:func:`simdoc.corpus.formats.read_jsonl`).
    """
    opened = open_regular(path, follow_symlinks)
    if isinstance(opened, ReadResult):
        return None
    fd, _ = opened
    digest = hashlib.blake2b(digest_size=16)
    raw_file = as_file(fd)
    try:
        kind = compression_of(path) if decompress else None
        reader = decompressing_reader(raw_file, kind) if kind is not None else raw_file
        read = getattr(reader, "read1", reader.read)  # what was decompressed before the data ends
        left = max_bytes
        while left is None or left > 0:
            try:
                chunk = read(1 << 24 if left is None else min(1 << 24, left))
            except EOFError:  # cut short
                break
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


def status_of(warnings: list[str]) -> str:
    """A text's status by its reading's warnings but the UTF-8 one: partial if cut at --max-bytes, else ok."""
    return "partial" if any("max-bytes" in w for w in warnings) else "ok"


class Undecompressable(Exception):
    pass


def _read_decompressed(fd: int, kind: str, max_bytes: int | None) -> bytes:
    """All the decompressed bytes (up to max_bytes + 1, to tell that there are more)."""
    raw_file = second_file(fd)
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
        raise Undecompressable(str(exc) or type(exc).__name__) from None
    finally:
        raw_file.close()
