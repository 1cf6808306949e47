"""``simdoc dedup --write DIR``: the deduplicated corpus, written in the corpus's own formats.

Every file the index holds documents of is written under the same name
below DIR, without the documents ``dedup`` drops, and nothing else changes:

* a plain file that stays is copied byte for byte (or hard-linked, ``link``);
  a plain file dropped is not written;
* a JSON Lines file is written again with the same compression, holding its
  other lines byte for byte, in order (lines that were no document too);
* a WARC file keeps every record but those of dropped documents, byte for
  byte; gzip members, one per record, are copied as they are; any other
  compression is decompressed, cut and compressed again the same way;
* a Parquet file keeps its schema, its row groups and all rows but the dropped ones;
* a file the index skipped (binary, no documents in it) is copied byte for byte, if its size
  and modification time are still those it had then; a symbolic link not followed is made again
  with the same target, as ``cp -a`` makes it (one that leads to a document or file left out is
  named in :attr:`Written.dangling`: it leads nowhere in DIR); one that cannot be written (a FIFO, a
  folder that could not be listed, a file it cannot read, a link in a bucket) is named in
  :attr:`Written.not_written`, with why: nothing of the corpus is left out unsaid.
  What the walk passes over by design (hidden files, other simdoc indexes' folders, names
  outside ``--include``/``--exclude``) is no file of the corpus, and is not written.

Nothing is written unless every file read is still the one indexed: each
file's digest (of the bytes the index digested: see the docs table's
``file_digest``) is computed from the very bytes copied, and any difference
stops the writing with an error. The files go to a temporary folder beside
DIR, renamed to DIR at the end: DIR is whole or not there. A DIR that holds
anything, or that lies inside the corpus, is refused. A corpus at a URL
(``s3://...``) is read through fsspec, as the scan reads it. DIR may be a
URL too (``s3://bucket/prefix/``): the same bytes, put object by object
(see :mod:`simdoc.reports.destination`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from simdoc.corpus.files import ReadResult, as_file, compression_of, decompressing_reader, open_binary, open_regular
from simdoc.corpus.objects import is_url
from simdoc.corpus.parquet import damaged_data
from simdoc.corpus.read import indexed_file_digest
from simdoc.corpus.rawstream import HashedReader, members_end
from simdoc.corpus.warcio import Broken, Input, RecordReader, open_input
from simdoc.errors import CorpusError, IndexError_, OutputError, UsageError
from simdoc.reports.destination import FolderDestination, check_url_destination, destination_of
from simdoc.stages.reread import DocumentReader
from simdoc.store.doctable import HOW

_CHUNK = 1 << 20


@dataclass
class Written:
    """What :func:`write_corpus` wrote: files and documents kept, documents left out, the files the
    index skipped copied as they are (``copied``, symbolic links made again among them) and those
    not written, with why (``not_written``); the links made again that lead to a document left
    out, with their target (``dangling``)."""

    files: int = 0
    documents: int = 0
    dropped: int = 0
    copied: int = 0
    not_written: list[tuple[str, str]] = field(default_factory=list)
    dangling: list[tuple[str, str]] = field(default_factory=list)


def check_destination(dest: Path | str, root: str, folder: bool = True, link: bool = False) -> None:
    """Refuse a DIR that holds anything or lies inside the corpus folder ``root`` (before any work
    is done); with ``folder`` False the corpus is files named one by one, and DIR may lie beside them.
    A URL DIR: see :func:`simdoc.reports.destination.check_url_destination`."""
    if is_url(dest):
        check_url_destination(str(dest), root, folder, link)
        return
    dest = Path(dest)
    real, corpus = os.path.realpath(dest), os.path.realpath(root) if root and folder else None
    if corpus is not None and (real == corpus or real.startswith(corpus.rstrip(os.sep) + os.sep)):
        raise UsageError(f"--write {dest} is inside the corpus {root}", hint="write the deduplicated corpus elsewhere")
    if dest.is_symlink() or (dest.exists() and not dest.is_dir()):
        raise UsageError(f"--write {dest} exists and is not a folder", hint="name a new or empty folder")
    if dest.is_dir() and any(os.scandir(dest)):
        raise UsageError(f"--write {dest} is not empty", hint="name a new or empty folder; simdoc never writes over files")


def write_deduplicated(plan, dest: Path | str, link: bool = False, folder: bool = True) -> Written:
    """Write what :func:`simdoc.reports.library.dedup_of` planned (``plan``, a ``Dedup``): the
    indexed corpus without the documents it drops (see :func:`write_corpus`)."""
    from simdoc.stages.reread import reader_of
    from simdoc.store.directory import IndexStore
    from simdoc.store.loaded import open_index

    index = plan.clusters.index
    with IndexStore(index).reading():
        loaded = open_index(index)
        reader = reader_of(loaded)
    if list(reader.table.ids) != list(plan.clusters.pairs.doc_ids):
        raise IndexError_(f"the index at {index} changed while dedup ran", hint="run dedup again")
    # The files it skipped, not the members of a file it left out (those have a "source").
    skipped = [s for s in loaded.manifest["stages"]["shingle"].get("skipped", []) if "source" not in s]
    # The copies dedup does not list for `rm` (plan.unlisted) are duplicates all the same.
    drop = {x for d in plan.decisions for x in d.drop} | set(plan.unlisted)
    return write_corpus(reader, drop, dest, link, folder, skipped)


def write_corpus(
    reader: DocumentReader, drop: set[str], dest: Path | str, link: bool = False, folder: bool = True, skipped: Sequence[dict] = ()
) -> Written:
    """Write the indexed corpus without the documents ``drop`` to ``dest`` (see the module docstring);
    ``folder``: the corpus is a folder, not files named one by one (see :func:`check_destination`);
    ``skipped``: the files the index skipped, as its manifest lists them (id, reason, size, mtime_ns).

    Raises
    ------
    CorpusError
        a file is no longer the one indexed (nothing is written).
    OutputError
        DIR cannot be written (nothing is left of it).
    """
    # A corpus at a URL: its objects read through fsspec (members by range); DIR local or a URL.
    check_destination(dest, reader.root, folder and (is_url(dest) or not is_url(reader.root)), link)
    table = reader.table
    # One pass over the names (asked by number, twice for an id: 13 s more of a 10^6-record --write).
    files: dict[str, list[int]] = defaultdict(list)
    members: set[str] = set()  # files of many documents
    dropped = np.zeros(len(table), dtype=bool)
    for d, (doc_id, source) in enumerate(zip(table.ids, table.sources)):
        files[source or doc_id].append(d)
        if source:
            members.add(source)
        if doc_id in drop:
            dropped[d] = True
    where = destination_of(dest)
    out = Written()
    try:
        for name, docs in files.items():
            gone = [d for d in docs if dropped[d]]
            out.dropped += len(gone)
            if name not in members and gone:
                continue  # a plain file dropped
            src = reader.confined(name)
            if src is None:
                raise CorpusError(f"{name}: a symbolic link now leads it out of the corpus; nothing written")
            target = where.target(name)
            how = HOW[int(table.columns["how"][docs[0]])]
            indexed = bytes(table.columns["file_digest"][docs[0]]).hex()
            at = [(int(table.columns["offset"][d]), int(table.columns["length"][d])) for d in gone]
            try:
                got = _write_one(src, target, how, at, reader, link)
            except FileNotFoundError:
                got = None
            except OSError:
                if not is_url(src):
                    raise
                got = None  # an object gone or unreadable (open_binary says OSError): not the one indexed
            if got != indexed:
                raise _changed(name)
            where.done(name)
            out.files += 1
            out.documents += len(docs) - len(gone)
        links: list[tuple[str, str]] = []
        for entry in {e["id"]: e for e in skipped if e["id"] not in files}.values():  # once each, none written above
            why = _copy_skipped(entry, reader, where, link, links)
            if why is None:
                where.done(entry["id"])
                out.copied += 1
            else:
                out.not_written.append((entry["id"], why))
        left_out = drop | {name for name, _ in out.not_written}
        out.dangling = [(name, to) for name, to in links if _led_to(name, to, reader.root) in left_out]
        where.commit()
    except OSError as exc:
        where.abort()
        raise OutputError(f"cannot write {where.dest}: {exc.strerror or exc}") from None
    except BaseException:
        where.abort()
        raise
    return out


def _changed(name: str) -> CorpusError:
    return CorpusError(
        f"{name}: changed or gone since it was indexed; nothing written",
        hint="run `simdoc dedup CORPUS --write DIR` again to index the corpus again first",
    )


def _copy_skipped(entry: dict, reader: DocumentReader, where, link: bool, links: list[tuple[str, str]]) -> str | None:
    """Copy a file the index skipped byte for byte to its place under ``where`` (a symbolic link
    not followed: made again, and added to ``links`` with its target); None when it is written
    (not yet published), else why it cannot be. A file whose size or modification time changed
    since may hold documents now: that stops the writing, as a changed document does."""
    name, size, mtime_ns = entry["id"], entry.get("size", -1), entry.get("mtime_ns", -1)
    if name == "." or size < 0:  # the corpus folder itself, a folder not listed, a path not seen
        return entry.get("reason") or "not seen when it was indexed"
    src = reader.openable([name])[0]  # its folders checked; the file itself is looked at below
    if src is None:
        return "a symbolic link on its way now leads out of the corpus"
    if not is_url(src):
        try:
            st = os.stat(src, follow_symlinks=reader.follow_symlinks)
        except FileNotFoundError:
            if os.path.lexists(src):
                return "a broken symbolic link"
            raise _changed(name) from None
        except OSError as exc:
            return f"cannot be seen: {exc.strerror or exc}"
        if stat.S_ISLNK(st.st_mode):
            return _copy_link(src, name, where, links)
        if stat.S_ISDIR(st.st_mode):
            return entry.get("reason") or "a folder"
        if not stat.S_ISREG(st.st_mode):
            return "not a regular file (device, FIFO or socket)"
    got = open_regular(src, reader.follow_symlinks)
    if isinstance(got, ReadResult):
        if is_url(src):
            raise _changed(name)  # an object gone or unreadable: not the one indexed
        return got.warning or "cannot be read"
    handle, st = got
    with as_file(handle) as fin:
        if (st.st_size, st.st_mtime_ns) != (size, mtime_ns):
            raise _changed(name)
        target = _target(where, name)
        if target is None:
            return _NO_PLACE
        if link and not is_url(src):
            os.link(src, target, follow_symlinks=reader.follow_symlinks)
            copied, after = size, os.stat(target)
        else:
            with open(target, "xb") as fout:
                shutil.copyfileobj(fin, fout, _CHUNK)
                copied = fout.tell()
            after = st if is_url(src) else os.fstat(fin.fileno())
    if copied != size or (after.st_size, after.st_mtime_ns) != (size, mtime_ns):
        raise _changed(name)  # it changed while it was copied
    return None


def _copy_link(src: str, name: str, where, links: list[tuple[str, str]]) -> str | None:
    """Make the symbolic link ``src`` (not followed: no document) again at its place under
    ``where``, leading where it leads now; None when made, else why it cannot be."""
    if not isinstance(where, FolderDestination):
        return "a symbolic link, not followed (--follow-symlinks follows links): a bucket holds no links"
    try:
        to = os.readlink(src)
    except OSError as exc:  # replaced by a file since it was seen, say: it may hold documents now
        raise _changed(name) from exc
    target = _target(where, name)
    if target is None:
        return _NO_PLACE
    os.symlink(to, target)
    links.append((name, to))
    return None


_NO_PLACE = "a file written to DIR has the name of a folder on its path"


def _target(where, name: str) -> str | None:
    """Where ``name`` is written under ``where``; None if a file written there already has the name
    of a folder on its path (a bucket's key inside an object: x.txt/y.txt beside x.txt)."""
    try:
        return where.target(name)
    except (FileExistsError, NotADirectoryError):
        return None


def _led_to(name: str, to: str, root: str) -> str | None:
    """The id of the corpus path the link ``name`` (an id) leads to, if inside the corpus (``root``,
    resolved). Its folder is resolved too: an absolute target may name the corpus by another path
    (a link to one of its folders), as a relative one may pass through a link inside it."""
    path = to if os.path.isabs(to) else os.path.join(root, os.path.dirname(name), to)
    path = os.path.normpath(os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path)))
    rel = os.path.relpath(path, root)
    outside = rel == os.pardir or rel.startswith(os.pardir + os.sep)
    return None if outside or rel == os.curdir else rel.replace(os.sep, "/")


def _write_one(src: str, target: str, how: str, gone: list[tuple[int, int]], reader: DocumentReader, link: bool) -> str | None:
    """Write one file without the members at ``gone`` (offset, length); the digest of what was read."""
    if how == "jsonl":
        spans = sorted((o, o + n + 1) for o, n in gone)
        kind = compression_of(src)
        if kind is None:
            return _copy_raw(src, target, spans)
        return _copy_decompressed(src, target, kind, spans)[1]
    if how == "warc":
        return _write_warc(src, target, {o for o, _ in gone})
    if how == "parquet":
        return _write_parquet(src, target, set(gone))
    if is_url(src):
        with open_binary(src) as fin, open(target, "xb") as fout:
            shutil.copyfileobj(fin, fout, _CHUNK)
    elif link:
        os.link(src, target, follow_symlinks=reader.follow_symlinks)
    else:
        shutil.copyfile(src, target, follow_symlinks=reader.follow_symlinks)
    # The copy's digest, as the index took it: what was written is what was indexed.
    return indexed_file_digest(target, how, reader.max_bytes, follow_symlinks=False)


def _copy_raw(src: str, target: str, spans: list[tuple[int, int]]) -> str:
    """Copy a file but the byte ranges ``spans`` (sorted, apart); the digest of all its bytes."""
    digest = hashlib.blake2b(digest_size=16)
    with open_binary(src) as fin, open(target, "xb") as fout:
        _filter(fin.read, fout.write, spans, digest)
    return digest.hexdigest()


def _filter(read, write, spans: list[tuple[int, int]], digest) -> None:
    """Write what ``read`` gives but the ranges ``spans`` of it, every byte through ``digest``."""
    pos, i = 0, 0
    while chunk := read(_CHUNK):
        digest.update(chunk)
        end = pos + len(chunk)
        at = pos
        while at < end:
            while i < len(spans) and spans[i][1] <= at:
                i += 1
            if i < len(spans) and spans[i][0] <= at:
                at = min(spans[i][1], end)  # inside a dropped range
                continue
            stop = min(spans[i][0], end) if i < len(spans) else end
            write(chunk[at - pos : stop - pos])
            at = stop
        pos = end


def _compressing_writer(fileobj, kind: str):
    if kind == "gzip":
        import gzip

        return gzip.GzipFile(fileobj=fileobj, mode="wb", mtime=0)
    if kind == "bzip2":
        import bz2

        return bz2.BZ2File(fileobj, mode="wb")
    if kind == "xz":
        import lzma

        return lzma.LZMAFile(fileobj, mode="wb")
    import zstandard

    return zstandard.ZstdCompressor().stream_writer(fileobj, closefd=False)


def _copy_decompressed(src: str, target: str, kind: str, spans: list[tuple[int, int]], as_warc: bool = False) -> tuple[str, str]:
    """Decompress a file, leave out the ranges ``spans`` of its decompressed bytes and compress the
    rest the same way; (digest of its raw bytes, digest of its decompressed bytes).

    ``as_warc``: decompressed as the scan decompresses a WARC file (:class:`simdoc.corpus.warcio.Input`):
    data cut short or damaged ends the records there, as it ended those indexed, rather than
    stopping the writing (a decompressor's EOFError was "Aborted!")."""
    raw, plain = hashlib.blake2b(digest_size=16), hashlib.blake2b(digest_size=16)
    with open_binary(src) as fin, open(target, "xb") as fout:
        inp = Input(fin, kind, raw) if as_warc else None
        reader = None if as_warc else decompressing_reader(HashedReader(fin, raw), kind)
        writer = _compressing_writer(fout, kind)
        try:
            _filter((lambda n: inp.take(n, n)[0]) if as_warc else reader.read, writer.write, spans, plain)
        except EOFError:  # a JSON Lines file cut short: its lines after the cut were never indexed
            raise CorpusError(
                f"{src}: the compressed data ends early (file cut short?); nothing written",
                hint="the line the cut is in and those after it are not indexed (simdoc stats --skipped lists the first): "
                "download or repair the file again, or move it out of the corpus",
            ) from None
        finally:
            writer.close()
            if reader is not None:
                reader.close()
        if inp is not None:
            inp.finish()  # the raw bytes past what was decompressed, through the digest
        while chunk := fin.read(_CHUNK):  # what the decompressor left unread
            raw.update(chunk)
    return raw.hexdigest(), plain.hexdigest()


def _write_warc(src: str, target: str, gone: set[int]) -> str | None:
    """A WARC file without the records that start at ``gone`` (their offsets, as indexed)."""
    starts: list[tuple[int, int | None, int]] = []  # (position, gzip member, bytes if dropped else 0) of each record
    fh, inp = open_input(src)
    try:
        reader = RecordReader(inp, lambda: open_input(src)[1])
        for rec in reader.records(0):
            # A broken record (a member cut short) is no document: it stays, as its bytes are.
            offset = rec.pos if rec.member is None else rec.member
            dropped = not isinstance(rec, Broken) and offset in gone
            starts.append((rec.pos, rec.member, rec.end - rec.pos if dropped else 0))
    finally:
        fh.close()
    kind = compression_of(src)
    if kind == "gzip" and starts and all(m is not None for _, m, _ in starts):
        # One gzip member per record (as crawlers write): members copied as they are. A dropped
        # record takes its own members only, not up to the next record: what lies between (a
        # damaged member, a tail the reading stopped at) is no record indexed, and stays.
        with open_binary(src, ranged=True) as f:
            spans = [(m, members_end(f, m, n)) for _, m, n in starts if n]
        return _copy_raw(src, target, spans)
    ends = [p for p, _, _ in starts[1:]] + [1 << 62]
    spans = [(p, e) for (p, _, n), e in zip(starts, ends) if n]
    if kind is None:
        return _copy_raw(src, target, spans)
    return _copy_decompressed(src, target, kind, spans, as_warc=True)[0]


def _write_parquet(src: str, target: str, gone: set[tuple[int, int]]) -> str | None:
    """A Parquet file with its schema and all rows but those at ``gone`` (row group, row)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    def digest() -> str:
        h = hashlib.blake2b(digest_size=16)
        with open_binary(src) as f:
            while chunk := f.read(_CHUNK):
                h.update(chunk)
        return h.hexdigest()

    before = digest()
    pf = pq.ParquetFile(open_binary(src) if is_url(src) else src)
    meta = pf.metadata
    codecs = {meta.row_group(g).column(c).compression for g in range(meta.num_row_groups) for c in range(meta.num_columns)}
    # The file's own compression when it has one throughout (pyarrow's default otherwise).
    compression = codecs.pop().lower() if len(codecs) == 1 else "snappy"
    compression = "none" if compression == "uncompressed" else compression
    with pq.ParquetWriter(target, pf.schema_arrow, compression=compression) as writer:
        for group in range(pf.num_row_groups):
            try:
                table = pf.read_row_group(group)
            except Exception as exc:
                if not damaged_data(exc):
                    raise
                raise CorpusError(
                    f"{src}: row group {group} (numbered from 0) cannot be read ({exc}); nothing written",
                    hint="its rows are not indexed (simdoc stats --skipped lists them): repair the file, or move it out of the corpus",
                ) from None
            keep = [(group, r) not in gone for r in range(table.num_rows)]
            writer.write_table(table.filter(pa.array(keep, pa.bool_())))
    return before if digest() == before else None
