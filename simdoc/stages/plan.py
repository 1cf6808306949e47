"""What the shingle stage reads: the corpus as walked now, against the current docs table.

:func:`scan_corpus` walks the corpus (files, or a bucket's listing) and, when
the current build has this build's parameters, loads its docs table.
:func:`reading_plan` then decides which files to read and which to keep
without reading: a file is kept when its stat (size, mtime, ctime, inode,
device; an object's ETag) is the one recorded and it is not racily clean
(:mod:`simdoc.stages.racy`); a file read again whose bytes turn out to be
the ones indexed keeps its rows too (the digest recorded is handed to its
task).

Both are done on columns (issue 29), with no Python loop per file: the
listing's stat is an (n, 5) array (:class:`Listing`); :func:`join` matches
the listing's ids against the files the table's rows came from with one hash
join (dict probes run by ``map`` in C), and groups the rows by file with one
stable sort; the stat, the racy window and ``force_read`` are then compared
as arrays.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain, repeat
from json.encoder import encode_basestring_ascii
from operator import attrgetter
from pathlib import Path
from typing import NamedTuple

import numpy as np

from simdoc.corpus.files import compression_of
from simdoc.corpus.folders import changes_since, walk_helper
from simdoc.corpus.objects import is_url
from simdoc.corpus.parquet import is_parquet
from simdoc.corpus.walk import Entries, FileEntry, Skipped, discover_sources
from simdoc import kernel_choice
from simdoc.errors import CorpusError
from simdoc.params import ShingleParams
from simdoc.stages.common import corpus_name
from simdoc.stages.racy import index_clock, newest_ctimes, racy_mask
from simdoc.store.directory import IndexStore
from simdoc.store.doctable import STAT_COLUMNS, DocsTable, Strings
from simdoc.store.loaded import LoadedIndex
from simdoc.wording import count

_STAT = attrgetter("size", "mtime_ns", "ctime_ns", "ino", "dev")  # FileEntry.stat(), as STAT_COLUMNS


@dataclass
class Listing:
    """The walk's listing as columns: the ids, and the stat of each file as an (n, 5) int64 array
    in the order of :data:`simdoc.store.doctable.STAT_COLUMNS`."""

    ids: list[str]
    stat: np.ndarray
    objects: bool  # a bucket's listing (a URL corpus is given alone): the ETag rule of racy

    @classmethod
    def of(cls, entries: list[FileEntry] | Entries) -> Listing:
        if isinstance(entries, Entries):  # the walk's columns (one folder)
            return cls(entries.ids, entries.stat, False)
        n = len(entries)
        flat = np.fromiter(chain.from_iterable(map(_STAT, entries)), dtype=np.int64, count=n * len(STAT_COLUMNS))
        return cls([e.id for e in entries], flat.reshape(n, len(STAT_COLUMNS)), bool(n) and is_url(entries[0].path))

    def column(self, name: str) -> np.ndarray:
        return self.stat[:, STAT_COLUMNS.index(name)]

    def racy(self, newest: dict[int, int]) -> np.ndarray:
        """Which files were racily clean as listed (:func:`simdoc.stages.racy.racy`, on columns)."""
        return racy_mask(self.column("ctime_ns"), self.column("dev"), self.column("ino"), newest, self.objects)


@dataclass
class Joined:
    """The current table's rows of each file listed: file ``i``'s are ``order[at[i]:at[i + 1]]``,
    in table order (a JSON Lines or WARC file has several)."""

    order: np.ndarray  # int64: rows of the table, grouped by the file listed they came from
    at: np.ndarray  # int64 (n + 1,)

    def rows(self, a: int, b: int | None = None) -> np.ndarray:
        """The rows of files ``a`` to ``b`` (default: file ``a`` alone), in listing order."""
        return self.order[self.at[a] : self.at[a + 1 if b is None else b]]

    def first(self) -> np.ndarray:
        """Each file's first row, -1 for a file the table does not hold."""
        has = self.at[1:] > self.at[:-1]
        out = np.full(len(has), -1, dtype=np.int64)
        out[has] = self.order[self.at[:-1][has]]
        return out


def join(ids: list[str], old: DocsTable) -> Joined:
    """Match the files listed (``ids``, unique) against the file each row of ``old`` came from:
    its source for a member of a JSON Lines, WARC or Parquet file, else its own id.

    By the table's runs (:mod:`simdoc.store.docnames`): a file's members are one run, one
    look-up (a string made and looked up a member: ~0.3 s of an update at 10^6 records)."""
    where = dict(zip(ids, range(len(ids))))
    names = old.names
    bounds = np.asarray(names.rows, dtype=np.int64)
    file_of = np.full(len(old), -1, dtype=np.int64)
    files: list[np.ndarray] = []  # the rows of the runs of files: each its own id
    for run in range(len(bounds) - 1):
        a, b = int(bounds[run]), int(bounds[run + 1])
        source = names.file(run)
        if source:
            file_of[a:b] = where.get(source, -1)
        else:
            files.append(np.arange(a, b, dtype=np.int64))
    if files:
        picked = np.concatenate(files)
        file_of[picked] = np.fromiter(map(where.get, old.ids.take(picked), repeat(-1)), dtype=np.int64, count=len(picked))
    order = np.argsort(file_of, kind="stable")  # rows of no file listed (-1) first, then by file
    order = order[int(np.count_nonzero(file_of < 0)) :]
    at = np.zeros(len(ids) + 1, dtype=np.int64)
    np.cumsum(np.bincount(file_of[order], minlength=len(ids)), out=at[1:])
    return Joined(order, at)


class Scan:
    """The corpus as walked now, and the current build's rows to compare it with.

    ``old``, the current docs table if its parameters are this build's, is
    loaded when first asked for (``load_old``): a run that finds nothing
    changed and no file racily clean never loads it.
    """

    def __init__(
        self, entries: list[FileEntry] | Entries, skipped: list[Skipped], scan_id: str, newest: dict[int, int],
        old: DocsTable | None = None, old_newest: dict[int, int] | None = None,
        load_old: Callable[[], DocsTable] | None = None,
    ) -> None:
        self.entries = entries
        self.skipped = skipped
        self.scan_id = scan_id  # a hash of every path and stat: the same scan, the same id
        self.newest = newest  # this listing's newest_ctimes (simdoc.stages.racy), recorded for the next scan
        self._old, self._load_old = old, load_old
        self.old_newest = old_newest or {}  # the last scan's newest_ctimes: whom it recorded racily clean
        self.listing = Listing.of(entries)
        self._joined: Joined | None = None

    @property
    def old(self) -> DocsTable | None:
        if self._old is None and self._load_old is not None:
            self._old, self._load_old = self._load_old(), None
        return self._old

    @property
    def joined(self) -> Joined:
        """The table's rows of each file listed (none without a table)."""
        if self._joined is None:
            if self.old is None:
                self._joined = Joined(np.zeros(0, np.int64), np.zeros(len(self.entries) + 1, np.int64))
            else:
                self._joined = join(self.listing.ids, self.old)
        return self._joined

    def racy(self) -> list[FileEntry]:
        """The files of the table that were racily clean as the last scan listed them."""
        return [self.entries[i] for i in np.flatnonzero(self.racy_rows()).tolist()]

    def racy_rows(self) -> np.ndarray:
        """:meth:`racy` as a mask (bool per file listed)."""
        maybe = self.listing.racy(self.old_newest)
        if not maybe.any() or self.old is None:  # none racy: the table is not loaded
            return np.zeros(len(maybe), dtype=bool)
        at = self.joined.at
        return maybe & (at[1:] > at[:-1])


def scan_corpus(
    store: IndexStore, manifest: dict, corpus, index: Path, shingle: ShingleParams, stored: dict | None, same_params: bool,
    jobs: int = 1,
) -> Scan:
    """The corpus walked now, and, if the current build has these parameters (``same_params``),
    its docs table. With ``jobs`` 2 or more, an update's walk has a second process stat half of
    each large folder (:mod:`simdoc.corpus.stat_helper`; a build's takes the compiled loop)."""
    clock = index_clock(index)  # before the listing: see simdoc.stages.racy
    old_newest = {int(dev): int(ns) for dev, ns in stored.get("newest_ctime", [])} if same_params else {}
    # Files written since the last scan (every file, for a new build) are read and signed: past a
    # few MB of them (simdoc.kernel_choice) numba is loaded for that, and the walk takes its loop.
    with changes_since(old_newest if same_params else None), walk_helper(jobs > 1 and same_params):
        _, entries, skipped = discover_sources(
            corpus,
            exclude=[index],
            follow_symlinks=shingle.follow_symlinks,
            include_globs=shingle.include or (),
            exclude_globs=shingle.exclude or (),
            columns=True,
        )
    if not isinstance(entries, Entries):
        entries = list(entries)
    if not entries:
        globs = [f"--include {g!r}" for g in shingle.include or ()] + [f"--exclude {g!r}" for g in shingle.exclude or ()]
        # With globs the folder may well hold text files: say what chose none of them.
        err = CorpusError(
            f"corpus {corpus_name(corpus)} has no documents"
            + (f" that {' '.join(globs)} select{'s' if len(globs) == 1 else ''}" if globs else "")
            + (f" ({count(len(skipped), 'path')} passed over)" if skipped else ""),
            hint="check the globs: they match paths relative to the corpus folder (`sub/*.txt`), `*` crosses `/`"
            if globs
            else "point simdoc at a folder that holds text files (hidden files are ignored)",
        )
        err.warnings = [f"{s.id}: {s.reason}" for s in skipped]
        raise err
    # A skipped path's size and time count: one that changes is warned about again (simdoc.stages.skipped).
    # A format-3 index recorded no newest_ctime: every file is racy (and its stat unknown), read once more.
    load_old = LoadedIndex(store, manifest).docs if same_params else None
    scan = Scan(entries, skipped, "", newest_ctimes(entries, clock), old_newest=old_newest, load_old=load_old)
    scan.scan_id = listing_id(scan.listing, skipped)
    before = stored.get("scan_id") if stored else None
    if before and before != scan.scan_id and not is_listing_id(before) and before == scan_id_of(scan.listing, skipped):
        scan.scan_id = before  # an index built before listing ids, of this very listing: it stays up to date
    return scan


def listing_id(listing: Listing, skipped: list[Skipped]) -> str:
    """The scan id: a hash of the files listed (ids and stat columns) and the paths skipped.

    Hashed as arrays and one joined string (a few ms at 10^5 files, where
    formatting each file's JSON took ~0.12 s of a run that finds nothing
    changed). Its last hex digit checks the others (:func:`is_listing_id`), so
    that the id of an index built before (:func:`scan_id_of`) is told apart
    without a new manifest key; one such id in 16 passes the check, and its
    index writes its build once more, reading no file.
    """
    h = hashlib.sha256()
    h.update(np.fromiter(map(len, listing.ids), dtype="<i8", count=len(listing.ids)).tobytes())
    h.update("\0".join(listing.ids).encode("utf-8", "surrogatepass"))
    h.update(np.ascontiguousarray(listing.stat, dtype="<i8").tobytes())
    h.update(json.dumps([[s.id, s.reason, s.size, s.mtime_ns] for s in skipped]).encode("utf-8", "surrogatepass"))
    digits = h.hexdigest()[:15]
    return digits + _check_digit(digits)


def is_listing_id(scan_id: str) -> bool:
    """Made by :func:`listing_id` (or, one time in 16, a scan id made before them)."""
    return len(scan_id) == 16 and scan_id[-1] == _check_digit(scan_id[:-1])


def _check_digit(digits: str) -> str:
    return "%x" % (sum(int(d, 16) * (i + 1) for i, d in enumerate(digits)) % 16)


def scan_id_of(listing: Listing, skipped: list[Skipped]) -> str:
    """The scan id of an index built before :func:`listing_id`:
    ``build_id([[id, *stat] of each file] + [[id, reason, size, mtime_ns] of each path skipped])``,
    the JSON it hashes written from the columns (each file's part formatted by ``map`` in C), and
    hashed a block of files at a time: the whole text of 10^6 files is ~0.8 GB of strings (issue 29)."""
    h = hashlib.sha256(b"[[")
    sep = ""
    for a in range(0, len(listing.ids), ID_BLOCK):
        b = a + ID_BLOCK
        files = map("[{}, {}, {}, {}, {}, {}]".format, map(encode_basestring_ascii, listing.ids[a:b]), *listing.stat[a:b].T.tolist())
        h.update((sep + ", ".join(files)).encode())
        sep = ", "
    for s in skipped:
        h.update((sep + json.dumps([s.id, s.reason, s.size, s.mtime_ns])).encode())
        sep = ", "
    h.update(b"]]")
    return h.hexdigest()[:16]


ID_BLOCK = 1 << 14  # files hashed at once by scan_id_of


# How many bytes of text a byte of a compressed file holds, about (gzip on prose: 3-4; JSON Lines of
# a crawl: up to 10): only to tell a small stage from a large one (simdoc.kernel_choice).
PACKED_RATIO = 8


@dataclass
class Plan:
    """What to do with each file listed, in corpus order, as columns."""

    entries: list[FileEntry] | Entries  # a FileEntry made for each file asked for
    keep: np.ndarray  # bool (n,): keep its rows without reading
    digest_row: np.ndarray  # int64 (n,): the row whose file digest is handed to its task, -1 for none
    joined: Joined  # the current table's rows of each file
    old: DocsTable | None
    # bool (n,) or None: kept files whose stat changed, their bytes found to be the ones indexed
    # (simdoc.stages.same_bytes); their rows are kept with the stat listed now.
    restat: np.ndarray | None = None

    def digest(self, i: int) -> bytes | None:
        j = int(self.digest_row[i])
        return None if j < 0 else bytes(self.old.file_digest[j])

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[tuple[FileEntry, bytes | None, bool]]:
        """(entry, digest indexed, keep without reading) of every file, in corpus order."""
        for i, (e, keep) in enumerate(zip(self.entries, self.keep.tolist())):
            yield e, self.digest(i), keep

    def volume(self) -> int:
        """About how many bytes of text the files not kept hold (what :mod:`simdoc.kernel_choice`
        decides by): their sizes, a compressed or Parquet file's :data:`PACKED_RATIO` times."""
        rows = np.flatnonzero(~self.keep)
        if isinstance(self.entries, Entries):
            sizes = self.entries.stat[rows, STAT_COLUMNS.index("file_size")]
        else:
            sizes = np.array([self.entries[i].size for i in rows.tolist()], dtype=np.int64)
        total = int(sizes.sum())
        if total >= kernel_choice.SMALL_BYTES:  # large however it is packed: no name looked at
            return total
        ids = self.entries.ids if isinstance(self.entries, Entries) else None
        named = (ids[i] if ids is not None else self.entries[i].id for i in rows.tolist())
        packed = np.fromiter((compression_of(n) is not None or is_parquet(n) for n in named), dtype=bool, count=len(rows))
        return total + (PACKED_RATIO - 1) * int(sizes[packed].sum())

    def to_read(self, lean: bool = False) -> ToRead:
        """The files not kept, as :meth:`__iter__` gives them (what :func:`simdoc.stages.scan.scan_tasks`
        needs); ``lean``: each entry a :class:`FileToRead` (``entries`` must be columns)."""
        return ToRead(self, np.flatnonzero(~self.keep), lean)

    def rows_by_id(self) -> dict[str, int]:
        """The current table's row of each id that a document read may have: the rows of the files
        to read, and of the files no longer listed (a kept file's rows cannot share an id with a
        document of another file). Not every row: 10^5 ids made strings and hashed cost more than
        the rest of a nightly update's planning (issue 29)."""
        old, joined = self.old, self.joined
        if old is None or not len(old):
            return {}
        per_file = np.repeat(np.arange(len(self.keep)), np.diff(joined.at))
        unlisted = np.ones(len(old), dtype=bool)
        unlisted[joined.order] = False
        rows = np.sort(np.concatenate([joined.order[~self.keep[per_file]], np.flatnonzero(unlisted)]))
        ids = old.ids.take(rows) if isinstance(old.ids, Strings) else [old.ids[j] for j in rows.tolist()]
        return dict(zip(ids, rows.tolist()))

    def runs(self) -> Iterator[tuple[int, int, bool]]:
        """(first, end, keep) of each run of consecutive files kept, or read; a file kept with its
        new stat (``restat``) is a run of its own."""
        n = len(self.keep)
        cut = self.keep[1:] != self.keep[:-1]
        if self.restat is not None:
            cut = cut | self.restat[1:] | self.restat[:-1]
        cuts = [0, *(np.flatnonzero(cut) + 1).tolist(), n] if n else [0]
        for a, b in zip(cuts[:-1], cuts[1:]):
            yield a, b, bool(self.keep[a])


class FileToRead(NamedTuple):
    """A file to read, as a reading task needs it (the local engine: no stat, no FileEntry)."""

    id: str
    path: str
    size: int


class ToRead(Sequence):
    """The files of a plan not kept, as (entry, digest indexed, False), each made as it is asked
    for: 10^6 FileEntry objects held while they are read were ~0.4 GB of the parent, and of the
    workers it forks (issue 29). ``lean`` (a plan of :class:`~simdoc.corpus.walk.Entries`): the
    entry is a :class:`FileToRead`, made from the columns a block at a time."""

    def __init__(self, plan: Plan, which: np.ndarray, lean: bool = False) -> None:
        self.plan, self.which, self.lean = plan, which, lean

    def __len__(self) -> int:
        return len(self.which)

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self[j] for j in range(*k.indices(len(self)))]
        i = range(len(self.which))[k]  # an IndexError past either end, as a list gives
        return next(self._items(self.which[i : i + 1]))

    def __iter__(self) -> Iterator[tuple[FileEntry | FileToRead, bytes | None, bool]]:
        for a in range(0, len(self.which), ID_BLOCK):
            yield from self._items(self.which[a : a + ID_BLOCK])

    def _items(self, which: np.ndarray) -> Iterator[tuple[FileEntry | FileToRead, bytes | None, bool]]:
        plan, at = self.plan, which.tolist()
        if not self.lean:
            for i in at:
                yield plan.entries[i], plan.digest(i), False
            return
        entries, old = plan.entries, plan.old
        rows = plan.digest_row[which].tolist()
        sizes = entries.stat[which, 0].tolist()
        for i, j, n in zip(at, rows, sizes):
            yield FileToRead(entries.ids[i], entries.paths[i], n), None if j < 0 else bytes(old.file_digest[j]), False

    def names(self) -> Iterator[tuple[str, int]]:
        """(path, size) of each, without making its entry."""
        entries = self.plan.entries
        if not isinstance(entries, Entries):
            return ((e.path, e.size) for e, _, _ in self)
        return self._names(entries)

    def _names(self, entries: Entries) -> Iterator[tuple[str, int]]:
        for a in range(0, len(self.which), ID_BLOCK):
            which = self.which[a : a + ID_BLOCK]
            yield from zip(map(entries.paths.__getitem__, which.tolist()), entries.stat[which, 0].tolist())


def reading_plan(scan: Scan, reuse: bool, force_read: set[str]) -> Plan:
    """Which files to read, and which to keep without reading (see the module)."""
    n = len(scan.entries)
    joined = scan.joined
    old = scan.old
    if not reuse or old is None:
        return Plan(scan.entries, np.zeros(n, dtype=bool), np.full(n, -1, dtype=np.int64), joined, old)
    first = joined.first()
    held = first >= 0
    j = np.where(held, first, 0)
    recorded = np.stack([np.asarray(old.columns[c])[j] for c in STAT_COLUMNS], axis=1) if len(old) else scan.listing.stat
    same = (recorded == scan.listing.stat).all(axis=1) & held
    forced = np.zeros(n, dtype=bool)
    forced_rows = np.zeros(n, dtype=bool)
    if force_read:
        forced = np.fromiter(map(force_read.__contains__, scan.listing.ids), dtype=bool, count=n)
        row_forced = np.fromiter(map(force_read.__contains__, old.ids), dtype=bool, count=len(old))
        per_file = np.repeat(np.arange(n), np.diff(joined.at))
        forced_rows = np.bincount(per_file[row_forced[joined.order]], minlength=n) > 0
    keep = same & ~scan.listing.racy(scan.old_newest) & ~forced & ~forced_rows
    return Plan(scan.entries, keep, np.where(held & ~forced, first, -1), joined, old)
