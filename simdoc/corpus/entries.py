"""The files a walk found: one :class:`FileEntry` (a file to read), or all of them as :class:`Entries`.

A walk of 10^5 or 10^6 files keeps its listing as columns (ids, paths and an
(n, 5) array of the stat that tells a file unchanged), not an object a file:
a run that reads none of them makes none, and the main process's memory, and
that of every worker forked from it, stays small (issue 29). How the files
are found: :mod:`simdoc.corpus.walk`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
import numpy as np

from simdoc.corpus.folders import FIELDS, FILE_COLUMNS, stat_rows


@dataclass(frozen=True, slots=True)
class FileEntry:
    """A file found in the corpus, before it is read, with the stat that tells it unchanged.

    As git's index does: size and modification time, which a user can set
    back (``touch -d``, rsync, tar), and the change time, inode and device,
    which the file system sets (the change time on every write and every
    change of the times; see :func:`of_stat`).
    """

    id: str
    path: str
    size: int
    mtime_ns: int
    ctime_ns: int
    ino: int
    dev: int

    @classmethod
    def of_stat(cls, doc_id: str, path: str, st: os.stat_result) -> FileEntry:
        return cls(doc_id, path, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)

    def stat(self) -> tuple[int, int, int, int, int]:
        """The values of :data:`simdoc.store.doctable.STAT_COLUMNS`, in that order."""
        return (self.size, self.mtime_ns, self.ctime_ns, self.ino, self.dev)


_STAT_FIELDS = FIELDS[:FILE_COLUMNS]  # FileEntry.stat() of an os.stat_result


class Entries(Sequence):
    """The files a walk found as columns (issue 29): ids, paths, and an (n, 5) int64 array of
    :meth:`FileEntry.stat`; a :class:`FileEntry` is made only for a file asked for (one to read).

    :func:`discover` with ``columns``: 10^5 files are not 10^5 objects on a run that reads none.
    """

    def __init__(self, ids: list[str], paths: Sequence[str], stat: np.ndarray) -> None:
        self.ids, self.paths, self.stat = ids, paths, stat

    @classmethod
    def of_walk(cls, runs: Iterable[tuple[list[str], list[str], np.ndarray | list[os.stat_result]]]) -> Entries:
        """The columns of a walk's runs of files (ids, paths, stat rows or stats), taken as they come (:class:`EntriesBuilder`)."""
        builder = EntriesBuilder()
        for run in runs:
            builder.add(*run)
        return builder.finish()

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return FileEntry(self.ids[i], self.paths[i], *self.stat[i].tolist())


class EntriesBuilder:
    """:class:`Entries` a run of files at a time, as a walk finds them: an os.stat_result is
    ~0.5 KB, and 10^6 of them held until the walk ends were most of its peak (issue 29). A path
    that is the root's followed by the id (every one, in a walk of one folder) is not held
    either (:class:`PrefixedPaths`)."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.paths: list[str] | None = None  # held only once one path is not prefix + id
        self.prefix: str | None = None
        self.blocks: list[np.ndarray] = []

    def add(self, run_ids: list[str], run_paths: list[str], run_stats: np.ndarray | list[os.stat_result]) -> np.ndarray:
        """One run of files, with their (n, 5) stat rows (:mod:`simdoc.corpus.folders`) or stats; returns their stat rows."""
        if self.paths is None and run_ids:
            if self.prefix is None:
                first, first_id = run_paths[0], run_ids[0]
                self.prefix = first[: len(first) - len(first_id)] if first.endswith(first_id) else ""
            if list(map(self.prefix.__add__, run_ids)) != run_paths:  # compared in C
                self.paths = [self.prefix + x for x in self.ids]
        if self.paths is not None:
            self.paths += run_paths
        block = run_stats if isinstance(run_stats, np.ndarray) else stat_rows(run_stats, _STAT_FIELDS)
        self.blocks.append(block)
        self.ids += run_ids
        return block

    def finish(self) -> Entries:
        rows = np.concatenate(self.blocks) if self.blocks else np.zeros((0, FILE_COLUMNS), np.int64)
        return Entries(self.ids, self.paths if self.paths is not None else PrefixedPaths(self.prefix or "", self.ids), rows)


class PrefixedPaths(Sequence):
    """The paths of ``ids`` that are ``prefix + id`` each, made as they are asked for: 10^6 paths
    held were ~0.1 GB of the main process, and of each worker forked from it."""

    def __init__(self, prefix: str, ids: list[str]) -> None:
        self.prefix, self.ids = prefix, ids

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self.prefix + x for x in self.ids[i]]
        return self.prefix + self.ids[i]
