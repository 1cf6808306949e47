"""Which documents of a dedup plan may be named for deletion, checked against the corpus as it is now.

``simdoc dedup``'s list is fed to ``xargs rm``: a path on it must name
the document that was compared, and deleting it must leave the copy kept.
:func:`still_indexed` takes the decisions :func:`simdoc.reports.clusters.plan_dedup`
made from the index and leaves out, with a warning, every document for
which that cannot be shown.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from simdoc.corpus.files import compression_of
from simdoc.corpus.objects import is_url
from simdoc.reports.clusters import DedupDecision
from simdoc.stages.reread import DocumentReader
from simdoc.store.doctable import HOW, STATUSES


@dataclass
class Checked:
    """What :func:`still_indexed` leaves of a plan.

    ``decisions``: the clusters with the documents that may be listed;
    ``warnings``: one for each document left out; ``unlisted``: the ids of
    documents left out of the list although they are copies of one kept,
    whose files deleting would harm (a file outside the corpus, or the kept
    one's own file under another name): a written corpus (``dedup --write``)
    leaves them out all the same, and holds their text once, under the
    name kept.
    """

    decisions: list[DedupDecision]
    warnings: list[str] = field(default_factory=list)
    unlisted: list[str] = field(default_factory=list)


def outside_corpus(reader: DocumentReader, ids: Iterable[str], rows: Mapping[str, int] | None = None) -> dict[str, str]:
    """Of ``ids``, the documents that are files of their own whose real place (links followed) is
    outside the corpus folder: id -> that real path.

    Only an index that follows links has them (without --follow-symlinks a
    path that leads out is never opened: :func:`simdoc.stages.reread.confined_path`).
    A link to a folder outside makes ``CORPUS/link/x.txt`` a document, and
    `rm CORPUS/link/x.txt` deletes the file outside.
    """
    if not reader.follow_symlinks or is_url(reader.root):
        return {}
    number = _rows(reader, rows)
    root = os.path.realpath(reader.root)
    out = {}
    for doc_id in ids:
        if reader.table.sources[number[doc_id]]:
            continue  # a member: its id names no file to delete
        path = reader.confined(doc_id)
        real = os.path.realpath(path) if path is not None else None
        if real is not None and real != root and not real.startswith(root.rstrip(os.sep) + os.sep):
            out[doc_id] = real
    return out


def still_indexed(
    decisions: list[DedupDecision], reader: DocumentReader, outside: Mapping[str, str] | None = None,
    rows: Mapping[str, int] | None = None,
) -> Checked:
    """The decisions, with only documents whose files are still the ones indexed (their stat,
    then their bytes read again and digested: ``DocumentReader.same_bytes``), and a warning
    naming each one left out.

    A path printed for `xargs rm` must name the document that was compared:
    exact copies and pairs from the verified-pairs table are not read again,
    and the corpus may have changed since (an edit that kept the stat, in
    the same tick of the file system's clock, or with `--index` alone, no
    scan at all). Only the files to name and the ones kept for them are
    read. A cluster whose document to keep is not as indexed is left out
    whole, so that its last copy is never listed; a document that is the
    kept one's very file (a link to it, or a hard link: :func:`_file_of`) is
    left out too, and so is one whose file is outside the corpus
    (``outside``, from :func:`outside_corpus`). ``rows``: each document's row (number) in
    the index, for at least the documents of ``decisions``; by default looked up among all.
    """
    outside = outside or {}
    number = _rows(reader, rows)
    # Every file that may be named, and every one kept, checked in one pass (their stat at once).
    docs = np.array(sorted({number[m] for d in decisions for m in (d.keep, *d.drop)}), dtype=np.int64)
    same = dict(zip(docs.tolist(), reader.same_bytes_docs(docs).tolist()))
    member = dict(zip(docs.tolist(), (bool(s) for s in reader.table.sources.take(docs))))
    got = Checked([])
    warnings = got.warnings
    def changed(doc_id: str) -> str:
        # A member is checked by its file's bytes: say so, as its own text may be the one indexed.
        source = reader.table.sources[number[doc_id]] if member[number[doc_id]] else None
        return f"{doc_id}: its file {source} changed or is gone" if source else f"{doc_id}: changed or gone"

    for d in decisions:
        if not same[number[d.keep]]:
            warnings.append(
                f"{changed(d.keep)} since it was indexed, and it is the one to keep: its cluster is left out "
                "(run `simdoc dedup CORPUS` to index the corpus again)"
            )
            continue
        kept = None if member[number[d.keep]] else _file_of(reader, d.keep)
        drop = []
        for x in d.drop:
            if x in outside:
                warnings.append(
                    f"{x}: its file is outside the corpus, {outside[x]}, reached through a symbolic link "
                    f"(--follow-symlinks): left out, as deleting {x} would delete that file; the copy kept is "
                    f"{d.keep}. Delete it by hand if you mean to"
                )
                got.unlisted.append(x)
            elif prefix_only(reader, number[x]):
                n = reader.max_bytes
                warnings.append(
                    f"{x}: only its first {n} bytes were compared (the index reads at most --max-bytes {n}): left out, "
                    f"as deleting it would delete bytes never compared; index without --max-bytes, or with a larger one, "
                    "to compare it whole"
                )
            elif not same[number[x]]:
                warnings.append(f"{changed(x)} since it was indexed: left out (run `simdoc dedup CORPUS` to index it again)")
            elif kept is not None and not member[number[x]] and _file_of(reader, x) == kept:
                warnings.append(
                    f"{x}: the same file as {d.keep}, the one kept (a link between them): left out, as deleting it "
                    "would free nothing, or delete the one kept"
                )
                got.unlisted.append(x)
            else:
                drop.append(x)
        if drop:
            got.decisions.append(DedupDecision(d.cluster_id, d.keep, tuple(drop)))
    return got


def prefix_only(reader: DocumentReader, doc: int) -> bool:
    """Whether the index may hold only the first --max-bytes N of a document: a pair it is in
    compared that prefix, never the rest, which deleting it deletes.

    The docs table keeps no flag for a cut that can be trusted (a file's
    status ``partial`` yields to ``replaced``, bad UTF-8, and the members of
    a JSON Lines file read in one piece keep ``ok``), so a document is taken
    as whole only where its sizes prove it: a plain file of at most N bytes
    (a compressed one: its status ``ok``, as its size is the compressed
    file's); a JSON Lines or Parquet text of fewer than N - 3 bytes of UTF-8
    (a cut text keeps N bytes, less a character cut in two); a WARC record
    of an uncompressed file at most N bytes long in all (its body is cut).
    """
    n = reader.max_bytes
    if n is None:
        return False
    table = reader.table
    source, how = table.sources[doc], HOW[int(table.columns["how"][doc])]
    if source and how in ("jsonl", "parquet"):
        return int(table.columns["size"][doc]) >= n - 3
    if source:
        return compression_of(source) is not None or int(table.columns["length"][doc]) > n
    if compression_of(table.ids[doc]) is not None:
        return STATUSES[int(table.columns["status"][doc])] != "ok"
    return int(table.columns["file_size"][doc]) > n


def _rows(reader: DocumentReader, rows: Mapping[str, int] | None) -> Mapping[str, int]:
    """``rows``, or every document's row by its id (a dict of all ids: ~1.6 s at 10^6 records)."""
    return rows if rows is not None else {doc_id: i for i, doc_id in enumerate(reader.table.ids)}


def _file_of(reader: DocumentReader, doc_id: str) -> tuple[int, int] | None:
    """The (device, inode) of a document that is a file of its own (not a member of a file of
    many: the caller asks only for those), as it is now, links followed; None for an object at
    a URL, or a file that cannot be stat-ed.

    With --follow-symlinks a link and its target are indexed as two exact
    copies (and a hard link is two names of one file without it): the kept
    one may be the link, and `rm` of its target would delete it.
    """
    path = reader.confined(doc_id)
    if path is None or is_url(path):
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino
