"""Indexed documents read again from the corpus, checked against their digests.

:class:`DocumentReader` is how verification, ``query`` and ``dedup`` get
back at a document the index holds: the docs table says where it lives and
how it was read (whole, streamed, HTML, a JSON Lines line, a WARC record at
its offset), and the digest recorded then says whether these are still the
same bytes. A document whose bytes changed is *stale*, one that cannot be
read is *gone*; the reader gives None for both and the caller decides.

Paths come from the docs table, which a damaged or crafted index could
fill with ``../``: :func:`safe_relative` and :func:`confined_path` keep
every open inside the corpus.
"""

from __future__ import annotations

import os
import stat
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from simdoc.corpus.files import compression_of
from simdoc.corpus.objects import is_url, object_stat
from simdoc.corpus.read import MEMBER_WAYS, indexed_file_digest, read_again, read_member_texts
from simdoc.corpus.streaming import Part, sets64_of_texts
from simdoc.errors import CorruptIndex
from simdoc.shinglesets import ShingleSets
from simdoc.shingling import ShingleSpec
from simdoc.stages.located import jsonl_members
from simdoc.store.docnames import Column
from simdoc.store.doctable import HOW, STAT_COLUMNS, UNKNOWN, DocsTable, Strings, is_safe_relative
from simdoc.store.loaded import LoadedIndex


_MEMBER_CODES = frozenset(HOW.index(w) for w in MEMBER_WAYS)


def safe_relative(doc_id: str, where: str) -> str:
    """``doc_id`` as a relative path that stays inside its root, or CorruptIndex.

    Ids come from the docs table, which a damaged or crafted index could
    fill with ``../`` or absolute paths: nothing outside the corpus is ever
    opened or printed because of one.
    """
    if not is_safe_relative(doc_id):
        raise CorruptIndex(where, f"the docs table holds an id that is not a path inside the corpus: {doc_id!r}")
    return doc_id


def confined_path(
    root: str, rel: str, follow_symlinks: bool, where: str = "index", dirs: dict | None = None, link_check: bool = True
) -> str | None:
    """``root/rel`` if it is still inside ``root``, else None; ``rel`` is a docs-table path.

    ``rel`` itself cannot climb out (see :func:`safe_relative`), but a folder
    or the file on the way may have become a symbolic link since the corpus
    was indexed. Unless the index follows links (then that was asked for),
    a path whose folder resolves outside the corpus, or that is itself a
    link now, is not opened. ``dirs`` memoises the folders' answers: the
    documents of one folder cost one ``realpath``. Without ``link_check`` the
    file itself is not looked at: for a caller that opens it with O_NOFOLLOW
    (:func:`simdoc.corpus.plain.read_again_into`), which refuses a link itself.
    """
    path = os.path.join(root, safe_relative(rel, where))
    if follow_symlinks or is_url(root):  # an object's key cannot lead out of its prefix
        return path
    dirs = {} if dirs is None else dirs
    parent = os.path.dirname(path)
    inside = dirs.get(parent)
    if inside is None:
        if "" not in dirs:
            dirs[""] = os.path.realpath(root)
        real_root, real = dirs[""], os.path.realpath(parent)
        inside = dirs[parent] = real == real_root or real.startswith(real_root.rstrip("/") + "/")
    if not inside:
        return None
    if not link_check:
        return path
    try:
        if stat.S_ISLNK(os.lstat(path).st_mode):
            return None
    except OSError:
        pass  # missing: reading it says so
    return path


@dataclass
class DocumentReader:
    """Reads indexed documents again from the corpus, as 64-bit shingle sets."""

    root: str
    table: DocsTable
    spec: ShingleSpec
    max_bytes: int | None = None
    follow_symlinks: bool = False
    fields: tuple[str, str | None] = ("text", None)
    where: str = "index"
    main_content: bool = False
    all_responses: bool = False
    reads: dict[int, int] = field(default_factory=lambda: defaultdict(int))  # document -> times read (tests)
    _dirs: dict[str, object] = field(default_factory=dict, repr=False)  # folder -> inside the corpus (see confined_path)
    _digested: dict[str, bool] = field(default_factory=dict, repr=False)  # file -> its bytes are the ones indexed
    _moved: dict[int, bool] = field(default_factory=dict, repr=False)  # document -> its stat moved (see moved)

    def path_of(self, doc: int) -> str:
        src = self.table.sources[doc] or self.table.ids[doc]
        return os.path.join(self.root, safe_relative(src, self.where))

    def unchanged(self, doc: int) -> bool:
        """Whether a document's file is still the one indexed, by its stat alone (no read): a
        regular file inside the corpus with the size, modification and change times, inode
        and device recorded (the last three unless the index is of format 3, which has none)."""
        return bool(self.unchanged_docs(np.array([doc], dtype=np.int64))[0])

    def unchanged_docs(self, docs: np.ndarray) -> np.ndarray:
        """:meth:`unchanged` of each of ``docs`` (bool array). Each file is asked once, however many
        of its members are asked for: the members of a JSON Lines file share its stat, and 10^6 of
        them in one file were 10^6 ``lstat`` calls of one path (or HEADs of one object)."""
        docs = np.asarray(docs, dtype=np.int64)
        group: list[int] = []
        seen: dict[str, int] = {}
        for place in self.table.places(docs):
            group.append(seen.setdefault(place, len(seen)))
        now = np.zeros((len(seen), len(STAT_COLUMNS)), dtype=np.int64)
        there = np.zeros(len(seen), dtype=bool)
        exact = np.zeros(len(seen), dtype=bool)  # an object's identity has no unknown fields
        for i, place in enumerate(seen):
            values = self._stat_now(place)
            if values is not None:
                now[i], exact[i], there[i] = values[0], values[1], True
        group_a = np.asarray(group, dtype=np.int64)
        c = self.table.columns
        recorded = np.stack([np.asarray(c[name][docs], dtype=np.int64) for name in STAT_COLUMNS], axis=1)
        same = recorded == now[group_a]
        # Change time, inode and device unknown (an index of format 3): not compared.
        same[:, 2:] |= (recorded[:, 2:] == UNKNOWN) & ~exact[group_a][:, None]
        return same.all(axis=1) & there[group_a]

    def moved(self, docs: np.ndarray) -> np.ndarray:
        """Whether each of ``docs`` is not :meth:`unchanged` (bool array), each document's file
        asked once per reader (once per run): a stored pair or an exact copy of it is trusted
        only while its file keeps the stat recorded, and the run sticks to what it saw first."""
        docs = np.asarray(docs, dtype=np.int64)
        todo = sorted({d for d in docs.tolist() if d not in self._moved})
        if todo:  # in one go: a file's stat is asked once for all its members
            for d, same in zip(todo, self.unchanged_docs(np.asarray(todo, dtype=np.int64)).tolist()):
                self._moved[d] = not same
        return np.fromiter((self._moved[d] for d in docs.tolist()), dtype=bool, count=len(docs))

    def read_as(self, docs: np.ndarray, rep: np.ndarray) -> np.ndarray:
        """The document to read for each of ``docs``, of which ``rep`` gives each one's
        representative (the first member of its group of exact copies, or itself).

        Copies share one text, so a copy is read as its representative, once for all of
        them, while both files keep the stat recorded. A copy whose own file moved is read
        as itself: its digest decides (an edited copy is not the group's text any more).
        So is a copy whose representative's file moved (edited, replaced, gone): the
        representative's text is not the group's any more, the copy's may still be."""
        docs = np.asarray(docs, dtype=np.int64)
        heads = np.asarray(rep, dtype=np.int64)[docs]
        copies = np.flatnonzero(heads != docs)
        if len(copies):
            both = np.concatenate([docs[copies], heads[copies]])
            moved = self.moved(both)
            alone = moved[: len(copies)] | moved[len(copies) :]
            heads[copies[alone]] = docs[copies[alone]]
        return heads

    def _stat_now(self, place: str) -> tuple[tuple[int, ...], bool] | None:
        """The stat columns' values of the file at ``place`` now, and whether they are an object's
        (compared exactly); None if it is gone, not a regular file, or now outside the corpus."""
        path = self.confined(place)
        if path is None:
            return None
        if is_url(path):  # its ETag and size (simdoc.corpus.objects), asked of the store
            st = object_stat(path)
            return None if st is None else (tuple(st.values()), True)
        try:
            st = os.stat(path) if self.follow_symlinks else os.lstat(path)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode):
            return None
        return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev), False

    def same_bytes(self, doc: int) -> bool:
        """Whether a document's file is still the one indexed, read again: :meth:`unchanged`, and
        its bytes have the file digest recorded (a stat cannot prove that: an edit in the same
        tick of the file system's clock keeps it). A file of many documents is read once
        however many of its members are asked for."""
        return self.unchanged(doc) and self._bytes_as_indexed(doc)

    def same_bytes_docs(self, docs: np.ndarray) -> np.ndarray:
        """:meth:`same_bytes` of each of ``docs`` (bool array), their stat asked in one pass
        (:meth:`unchanged_docs`): dedup checks every file it would name (a per-document
        :meth:`unchanged` is an array pass each: 3.4 s under cProfile for c100k dedup's 11,702 files)."""
        docs = np.asarray(docs, dtype=np.int64)
        out = self.unchanged_docs(docs)
        at = np.flatnonzero(out)
        # Names gathered in one go (one at a time: ~10 us each, 10^5 members of a JSON Lines file).
        sources, ids = self.table.sources.take(docs[at]), self.table.ids.take(docs[at])
        for i, source, doc_id in zip(at.tolist(), sources, ids):
            out[i] = self._bytes_as_indexed(int(docs[i]), source or doc_id)
        return out

    def _bytes_as_indexed(self, doc: int, source: str | None = None) -> bool:
        """Whether the bytes of a document's file (``source``: its file's name, if known) have
        the file digest recorded (read once a file)."""
        source = source or self.table.sources[doc] or self.table.ids[doc]
        known = self._digested.get(source)
        if known is None:
            path = self.confined(source)
            way = HOW[int(self.table.columns["how"][doc])]
            digest = None if path is None else indexed_file_digest(path, way, self.max_bytes, self.follow_symlinks)
            known = self._digested[source] = digest is not None and bytes.fromhex(digest) == bytes(self.table.file_digest[doc])
        return known

    def _same_size(self, path: str, doc: int) -> bool:
        """A file read whole still has the size it had (else its digest cannot match: stale).

        Checked before opening, so that a file that is not the one indexed (the
        corpus changed, or a damaged manifest names another folder) is not read
        at all. Not checked where the digest is not of the file's bytes: a
        compressed file (the digest is of what it holds), or a --max-bytes
        index (of a prefix, which a file that grew may still have).
        """
        if self.max_bytes is not None or compression_of(path) is not None or is_url(path):
            return True  # (an object: its read carries the ETag; a HEAD first would only add a request)
        try:
            st = os.stat(path) if self.follow_symlinks else os.lstat(path)
        except OSError:
            return True  # gone: reading it says so
        return st.st_size == int(self.table.columns["file_size"][doc])

    def confined(self, rel: str) -> str | None:
        """The path of a file of the corpus to open, or None if a link now leads it out (see :func:`confined_path`)."""
        return confined_path(self.root, rel, self.follow_symlinks, self.where, self._dirs)

    def openable(self, rels: list[str]) -> list[str | None]:
        """:meth:`confined` of each, but for files opened with O_NOFOLLOW: their folders checked,
        not the files (:func:`simdoc.corpus.plain.read_again_into` refuses a link itself)."""
        # os.path.join(root, rel), as a concatenation: rel is relative (safe_relative), and
        # posixpath.join took ~3 us a file (c100k's verification: 0.13 of ~3 CPU-s).
        base, where = os.path.join(self.root, ""), self.where
        if self.follow_symlinks or is_url(self.root):
            return [base + safe_relative(rel, where) for rel in rels]
        out: list[str | None] = []
        dirs = self._dirs
        for rel in rels:
            # confined_path's answer, its folder looked up first (the documents of one folder
            # are many): the same memo, so the same realpath decides.
            path = base + safe_relative(rel, where)
            folder = path.rpartition("/")[0]
            inside = dirs.get(folder) if folder else None  # ("": the memo's own entry, the root's realpath)
            if inside is None:
                out.append(confined_path(self.root, rel, False, self.where, dirs, link_check=False))
            else:
                out.append(path if inside else None)
        return out

    def read_sets(self, docs: list[int], part: Part | None = None) -> dict[int, ShingleSets | None]:
        """Each document's one-row 64-bit sets, or None if it is stale or gone (``part``: only the
        hashes of that range, see :func:`simdoc.corpus.streaming.in_part`)."""
        sets, rows = self.read_batch(docs, part)
        return {d: None if r < 0 else sets.slice(r, r + 1) for d, r in rows.items()}

    def _members(self, docs: np.ndarray) -> dict[str, tuple[list[int], list[str], list[bytes], list[int], list[int], str]]:
        """``docs`` (members) by their file, in the order the files first come: for each, the
        documents, their ids, digests, offsets and lengths, and how the file was read."""
        if not len(docs):
            return {}
        c = self.table.columns
        digest = np.asarray(self.table.digest[docs])
        columns = (
            docs.tolist(), _strings(self.table.ids, docs), [digest[k].tobytes() for k in range(len(docs))],
            np.asarray(c["offset"][docs]).tolist(), np.asarray(c["length"][docs]).tolist(),
        )
        ways = np.asarray(c["how"][docs]).tolist()
        at: dict[str, list[int]] = {}
        for k, source in enumerate(_strings(self.table.sources, docs)):
            at.setdefault(source, []).append(k)
        if len(at) == 1:  # (most often: one big file)
            return {source: (*columns, HOW[ways[0]]) for source in at}
        return {source: (*([col[k] for k in ks] for col in columns), HOW[ways[ks[0]]]) for source, ks in at.items()}

    def read_batch(self, docs: list[int], part: Part | None = None) -> tuple[ShingleSets, dict[int, int]]:
        """The 64-bit sets of ``docs`` as rows of one CSR, and each document's row (-1: stale or
        gone). Members of one file are read in one pass over it; the texts read whole are
        shingled together, in as few kernel calls as :func:`simdoc.corpus.streaming.sets64_of_texts`
        makes (a streamed document is shingled in pieces as it is read, a row of its own)."""
        out: dict[int, ShingleSets | None] = {}
        texts: list[str | bytes] = []
        order: list[int] = []
        how = self.table.columns["how"]
        docs_a = np.asarray(docs, dtype=np.int64)
        ways = np.asarray(how[docs_a]).tolist()
        for d in docs:
            self.reads[d] += 1
        # Members of plain JSON Lines files are read at their places, looked up as columns; the
        # others (and those not found there) a file at a time, their columns also gathered at once
        # (10^5 members of one JSON Lines file: a row lookup each was most of their cost).
        member_docs = docs_a[np.fromiter((w in _MEMBER_CODES for w in ways), dtype=bool, count=len(ways))]
        located = jsonl_members(self.table, member_docs, self.confined, self.fields[0], self.max_bytes, self.follow_symlinks)
        texts.extend(located.texts)
        order.extend(located.docs.tolist())
        members = self._members(located.rest)
        for d, w in zip(docs, ways):
            way = HOW[w]
            if way in MEMBER_WAYS:
                continue
            path = self.confined(self.table.sources[d] or self.table.ids[d])
            if path is None or not self._same_size(path, d):
                out[d] = None
            elif way == "streamed":  # shingled in pieces, never held whole
                from simdoc.corpus.streaming import stream_document

                res, row = stream_document(path, self.spec, self.max_bytes, self.follow_symlinks, form="sets64", part=part)
                out[d] = row if res.text is not None and res.digest == bytes(self.table.digest[d]).hex() else None
            else:
                got = read_again(
                    path, self.table.ids[d], way, bytes(self.table.digest[d]), offset=int(self.table.columns["offset"][d]),
                    max_bytes=self.max_bytes, follow=self.follow_symlinks, ascii_bytes=True, main_content=self.main_content,
                )
                if got.text is None or not got.same:
                    out[d] = None
                else:
                    texts.append(got.text)
                    order.append(d)
        for source, (ds, ids, digests, offs, lens, way) in members.items():
            path = self.confined(source)
            if path is None:
                out.update((d, None) for d in ds)
                continue
            wanted = dict(zip(ids, digests))
            offsets, lengths = None, None
            if way in ("warc", "jsonl"):
                offsets = dict(zip(ids, offs))
            if way == "jsonl":
                lengths = dict(zip(ids, lens))
            elif way == "parquet":  # (row group, row)
                offsets = dict(zip(ids, zip(offs, lens)))
            got = read_member_texts(
                path, source, way, wanted, self.max_bytes, self.follow_symlinks, self.fields, offsets=offsets,
                main_content=self.main_content, all_responses=self.all_responses, lengths=lengths,
            )
            for d, doc_id in zip(ds, ids):
                text = got.get(doc_id)
                if text is None:
                    out[d] = None
                else:
                    texts.append(text)
                    order.append(d)
        rows = dict.fromkeys(docs, -1)
        # Streamed documents' rows first, then the texts' rows, all in one CSR.
        streamed = [d for d, r in out.items() if r is not None]
        parts = [out[d] for d in streamed]
        for i, d in enumerate(streamed):
            rows[d] = i
        if texts:
            parts.append(sets64_of_texts(texts, self.spec, part))
            for i, d in enumerate(order, start=len(streamed)):
                rows[d] = i
        if not parts:
            return ShingleSets(np.zeros(1, np.int64), np.zeros(0, np.uint64)), rows
        return (parts[0] if len(parts) == 1 else ShingleSets.concatenate(parts)), rows


def _strings(strings, docs: np.ndarray) -> list[str]:
    """The strings of rows ``docs`` of a docs-table column (ids or sources), gathered in one go."""
    if isinstance(strings, (Strings, Column)):
        return strings.take(docs)
    return [strings[d] for d in docs.tolist()]


def reader_of(loaded: LoadedIndex) -> DocumentReader:
    """A reader of ``loaded``'s documents, with the parameters its shingle stage read them with."""
    st = loaded.stage("shingle")
    p = st["params"]
    return DocumentReader(
        st.get("corpus", ""), loaded.docs(), loaded.spec(), p.get("max_bytes"), p.get("follow_symlinks", False),
        (p.get("text_field", "text"), p.get("id_field")), str(loaded.store.path), bool(p.get("main_content", False)),
        bool(p.get("all_responses", False)),
    )
