"""One folder of a walk: its entries listed and stat-ed into columns (the walk: :mod:`simdoc.corpus.walk`).

A folder's names are listed (``os.listdir`` of a descriptor of the folder),
and each is stat-ed relative to that descriptor (``fstatat``: the kernel
looks up one name, not every component of its path again), without
following links. The stats are kept as an int64 array, one row per entry
(:data:`COLUMNS`), not as an ``os.stat_result`` per file held until the walk
ends: a walk of 10^6 files keeps 48 bytes a file of its stat (issue 29).
The values are exactly those of ``os.lstat``.

Two ways to the same rows: ``os.lstat`` a name (a comprehension with
``dir_fd``), and the compiled loop of :mod:`simdoc.kernels_walk` (``statx``,
no Python object a file; c100k: 0.45 -> 0.29 CPU-s, c1m: 4.5 -> 2.8). The
compiled one is taken where numba is loaded anyway (a build or an update, once
it has listed a few MB of files to sign: :func:`changes_since`), or once a
walk is long enough to pay for loading it (:data:`COMPILED_AFTER`): a run
that finds nothing changed in 10^5 files imports no numba. Where the
compiled loop is not in use, an update's walk at ``--jobs`` 2 or more has a
second process stat half of each large folder (:mod:`simdoc.corpus.stat_helper`):
the same rows, from ``os.lstat`` there.

What is passed over, and why, is a :class:`Skipped`.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from bisect import bisect_left
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from itertools import compress
from operator import attrgetter, itemgetter

import numpy as np

from simdoc import kernel_choice
from simdoc.corpus import stat_helper
from simdoc.corpus.globs import may_hold, selected
from simdoc.corpus.indexes import folder_reason
from simdoc.corpus.names import walk_key, walk_keys

# A row of a folder's stats: the five of FileEntry.stat() (simdoc.store.doctable.STAT_COLUMNS), then the mode.
FIELDS = ("st_size", "st_mtime_ns", "st_ctime_ns", "st_ino", "st_dev", "st_mode")
SIZE, MTIME, CTIME, INO, DEV, MODE = 0, 1, 2, 3, 4, 5
FILE_COLUMNS = 5  # a file's row in a run: the first five


@dataclass(frozen=True)
class Skipped:
    """A path that is not a document, and why; its size and time when it could be seen
    (-1 if not), so that an index can tell the same skipped file from a changed one."""

    id: str
    reason: str
    size: int = -1
    mtime_ns: int = -1
    directory: bool = False  # a directory that was not walked: it may hold documents

    def reported(self, include: tuple[str, ...], exclude: tuple[str, ...]) -> bool:
        """Inside the set --include/--exclude choose: only those are warned about and counted."""
        if self.directory:
            return may_hold(self.id, include, exclude)
        return selected(self.id, include, exclude)


def seen(doc_id: str, reason: str, row=None, directory: bool = False) -> Skipped:
    """The :class:`Skipped` of a path, with the size and time of its ``row`` (:data:`FIELDS`) or stat, if seen."""
    if row is None:
        return Skipped(doc_id, reason, directory=directory)
    if isinstance(row, os.stat_result):
        return Skipped(doc_id, reason, row.st_size, row.st_mtime_ns, directory)
    return Skipped(doc_id, reason, int(row[SIZE]), int(row[MTIME]), directory)


def stat_rows(stats: list[os.stat_result], fields: tuple[str, ...] = FIELDS) -> np.ndarray:
    """The (n, len(fields)) int64 rows of ``stats``: a column at a time, each taken by one C loop
    (half the time of a tuple an entry); a few (most folders of a source tree: 13,353 files in
    11,304 runs in Python's own) as tuples, in one numpy call, not one a column."""
    if len(stats) < _FEW:
        return np.array(list(map(attrgetter(*fields), stats)), dtype=np.int64).reshape(len(stats), len(fields))
    out = np.empty((len(stats), len(fields)), dtype=np.int64)
    for j, field in enumerate(fields):
        out[:, j] = np.fromiter(map(attrgetter(field), stats), dtype=np.int64, count=len(stats))
    return out


_FEW = 64  # entries below which one array of tuples is quicker than a column at a time


def lstat_names(directory: str, fd: int | None, names: list[str], prefix: str, skipped: list) -> tuple[list[str], np.ndarray]:
    """The names that can be stat-ed (without following links), and their rows (:data:`FIELDS`),
    relative to the folder's descriptor ``fd`` if there is one; the others reported as skipped
    (one gone since it was listed, say). Half of a large folder's are stat-ed by the walk's
    helper process if it has one (:mod:`simdoc.corpus.stat_helper`), unless the compiled loop
    is in use: it stats a name in about half the time the helper does, and the walk would wait."""
    helper = stat_helper.current()
    if helper is None or fd is None or len(names) < stat_helper.SPLIT_AT or _COMPILED[0]:
        return _lstat_here(directory, fd, names, prefix, skipped)
    helper.start()  # (at the walk's first large folder: a walk of small ones never has one)
    parts, at = [], 0
    while len(names) - at >= stat_helper.SPLIT_AT and helper.starting():  # a slice at a time meanwhile
        parts.append(_lstat_here(directory, fd, names[at : at + stat_helper.SLICE], prefix, skipped))
        at += stat_helper.SLICE
    rest = names[at:] if at else names
    if len(rest) < stat_helper.SPLIT_AT or not helper.ready():
        parts.append(_lstat_here(directory, fd, rest, prefix, skipped))
    else:
        parts += _shared(directory, fd, rest, prefix, skipped, helper)
    if len(parts) == 1:
        return parts[0]
    return [name for kept, _ in parts for name in kept], np.concatenate([rows for _, rows in parts])


def _shared(directory: str, fd: int, names: list[str], prefix: str, skipped: list, helper) -> list[tuple[list[str], np.ndarray]]:
    """``names`` stat-ed half here, half by ``helper``: the two (names kept, rows), in order."""
    half = len(names) // 2
    first, second = names[:half], names[half:]
    if not helper.ask(fd, directory, second):
        return [_lstat_here(directory, fd, names, prefix, skipped)]
    mine = _lstat_here(directory, fd, first, prefix, skipped)
    got = helper.answer()
    if got is None:  # it could not stat these (a folder replaced since, say)
        return [mine, _lstat_here(directory, fd, second, prefix, skipped)]
    rows, failed = got
    if not failed:
        _watch(rows)
        return [mine, (second, rows)]
    # Names it could not stat (gone since, say) are stat-ed here, to say why; those found fill their rows.
    keep = np.ones(len(second), dtype=bool)
    keep[failed] = False
    _watch(rows[keep])
    again = dict(zip(*_lstat_here(directory, fd, [second[i] for i in failed], prefix, skipped)))
    rows = rows.copy()  # (the helper's bytes are read-only)
    for i in failed:
        if second[i] in again:
            rows[i], keep[i] = again[second[i]], True
    return [mine, (list(compress(second, keep.tolist())), rows[keep])]


def _lstat_here(directory: str, fd: int | None, names: list[str], prefix: str, skipped: list) -> tuple[list[str], np.ndarray]:
    """:func:`lstat_names` in this process."""
    lstat = partial(_LSTAT, dir_fd=fd) if fd is not None else _lstat_in(directory)  # one name at a time
    if fd is not None and _compiled(len(names)):
        rows, failed = _COMPILED[0](fd, names)
        if not failed:
            return names, rows
        ok = rows[:, MODE] != -1
        for i in np.flatnonzero(~ok).tolist():  # gone since it was listed, say: os.lstat tells why
            try:
                rows[i] = attrgetter(*FIELDS)(lstat(names[i]))
                ok[i] = True
            except OSError as exc:
                skipped.append(seen(prefix + names[i], f"cannot stat: {exc.strerror or exc}"))
        return list(compress(names, ok.tolist())), rows[ok]
    try:
        if fd is None:
            return names, stat_rows(list(map(lstat, names)))
        # A comprehension, not map over a partial with dir_fd: a partial's keywords are a new dict
        # each call (0.3 us a file of the ~2.1 a stat costs; c100k: ~0.03 s of a quiet night).
        stat_at = _LSTAT
        rows = stat_rows([stat_at(name, dir_fd=fd) for name in names])
        _watch(rows)
        return names, rows
    except OSError:  # stat each on its own, to say which
        pass
    kept, stats = [], []
    for name in names:
        try:
            stats.append(lstat(name))
        except OSError as exc:
            skipped.append(seen(prefix + name, f"cannot stat: {exc.strerror or exc}"))
            continue
        kept.append(name)
    return kept, stat_rows(stats)


def _lstat_in(directory: str):
    base = directory if directory.endswith(os.sep) else directory + os.sep
    return lambda name: _LSTAT(base + name)


_LSTAT, _LISTDIR = os.lstat, os.listdir  # (the tests replace them to remove a file between its listing and its stat)

# Files a process stats with os.lstat before a walk takes the compiled loop (simdoc.kernels_walk).
# Loading it (numba's import, the cached loop) costs ~0.4 CPU-s where a run imports no numba
# otherwise (one that finds nothing changed); it then saves ~1.6 us a file (c100k: 0.45 -> 0.29
# CPU-s): it pays for itself over some 250,000 files more. Once numba is loaded, it is used at once.
COMPILED_AFTER = 250_000
_COMPILED: list = [None]  # kernels_walk.stat_names once it is used; False where it cannot be
_STATED = [0]


def _compiled(n: int) -> bool:
    """Whether to stat the next ``n`` names in the compiled loop (loading it if it is time)."""
    if _COMPILED[0] is None:
        _STATED[0] += n
        if _STATED[0] <= COMPILED_AFTER and not _numba_loaded():
            return False
        _COMPILED[0] = _load_compiled()
    return _COMPILED[0] is not False


def walk_helper(wanted: bool):
    """Within: a walk of this thread stats half of each large folder in a helper process, if
    ``wanted`` (``--jobs`` 2 or more; :mod:`simdoc.corpus.stat_helper`)."""
    return stat_helper.stat_helper(wanted, FIELDS)


def _numba_loaded() -> bool:
    return "numba" in sys.modules


_SINCE: list = [None]  # [{device: time} or None (every file), bytes seen] of changes_since, while a walk watches


@contextlib.contextmanager
def changes_since(newest: dict[int, int] | None) -> Iterator[None]:
    """Within: once the walk has listed :data:`simdoc.kernel_choice.SMALL_BYTES` of files written
    after ``newest`` (per device, the last scan's clock: :func:`simdoc.stages.racy.newest_ctimes`;
    None: every file, a build that reads them all), the rest of the walk takes the compiled loop.

    Such files (their change and modification times both newer: a write, not a chmod or a
    ``touch -d``) will be read and signed, by the kernels once they are that many bytes
    (:mod:`simdoc.kernel_choice`), which loads numba anyway; loaded then rather than after the
    walk, it stats the remaining files for less (c100k: 0.45 -> 0.29 CPU-s). A night that changed
    a few files, or only times and modes, loads nothing. Which loop stats a file never changes its row."""
    _SINCE[0] = [newest, 0] if newest is None or newest else None
    try:
        yield
    finally:
        _SINCE[0] = None


def _watch(rows: np.ndarray) -> None:
    """Load the compiled loop once the files of ``rows`` (a folder's, by os.lstat) written since
    :data:`_SINCE` add up to :data:`~simdoc.kernel_choice.SMALL_BYTES`."""
    watch = _SINCE[0]
    if watch is None or _COMPILED[0] is not None or not len(rows):
        return
    since = watch[0]
    if since is not None and int(rows[:, CTIME].max()) <= min(since.values()):  # most folders: one look (~2 us, not ~10)
        return
    new = (rows[:, MODE] & 0o170000) == stat.S_IFREG
    if since is not None:
        written = np.zeros(len(rows), dtype=bool)
        for dev, bound in since.items():
            written |= (rows[:, DEV] == dev) & (rows[:, CTIME] > bound) & (rows[:, MTIME] > bound)
        new &= written
    watch[1] += int(rows[new, SIZE].sum())
    if watch[1] >= kernel_choice.SMALL_BYTES:
        _COMPILED[0] = _load_compiled()


def compiled_now() -> bool:
    """Take the compiled loop for every folder from now on, if it can be had: for a build that
    signs every file, which imports numba anyway (its workers inherit it). Whether it is in use."""
    if _COMPILED[0] is None:
        _COMPILED[0] = _load_compiled()
    return _COMPILED[0] is not False


def _load_compiled():
    if sys.getfilesystemencoding() != "utf-8" or sys.getfilesystemencodeerrors() != "surrogateescape":
        return False
    try:
        from simdoc import kernels_walk

        if not kernels_walk.AVAILABLE:
            return False
        fd = os.open(os.sep, os.O_RDONLY | os.O_DIRECTORY)
        try:
            rows, failed = kernels_walk.stat_names(fd, ["."])  # compiled, or loaded from the cache, now
        finally:
            os.close(fd)
    except Exception:  # noqa: BLE001 - no statx in this C library, say: the os.lstat path stays
        return False
    return kernels_walk.stat_names if not failed and stat.S_ISDIR(int(rows[0, MODE])) else False


_BY_DESCRIPTOR = os.listdir in os.supports_fd and os.stat in os.supports_dir_fd and hasattr(os, "O_DIRECTORY")  # os.lstat takes dir_fd where os.stat does
_KEY = itemgetter(0)


@dataclass(frozen=True)
class Excluded:
    """The directories a walk never enters (the index). One that exists is known by its
    (device, inode), which the walk has in every directory's row already (a resolved path,
    ``os.path.realpath``, lstats every component: 0.8 s for the 8,702 folders of Python's
    sources); one that does not exist yet (it may be made while the walk runs) by its
    resolved path."""

    keys: frozenset = frozenset()
    missing: frozenset = frozenset()

    @classmethod
    def of(cls, directories) -> Excluded:
        keys, missing = set(), set()
        for directory in directories:
            try:
                st = os.stat(directory)
            except OSError:
                missing.add(os.path.realpath(directory))
                continue
            keys.add((st.st_dev, st.st_ino))
        return cls(frozenset(keys), frozenset(missing))

    def holds(self, path: str, row: list[int]) -> bool:
        """Whether the directory at ``path``, of stat ``row`` (:data:`FIELDS`), is excluded."""
        if (row[DEV], row[INO]) in self.keys:
            return True
        return bool(self.missing) and os.path.realpath(path) in self.missing


def list_folder(
    directory: str, rel: str, excluded: Excluded, follow_symlinks: bool, skipped: list, chosen: Callable[[list[str]], list[bool]] | None = None
) -> list:
    """A directory's files and subdirectories to walk, in walk order: each run of consecutive files
    as a tuple (ids, paths, rows) where rows is an (n, 5) int64 array of :meth:`FileEntry.stat`,
    each subdirectory as a list [id, path, row] (row: :data:`FIELDS` of the directory itself).

    ``chosen``: which of a list of file ids the walk keeps (``--include``/``--exclude``:
    :func:`simdoc.corpus.globs.selected_all`). A name the listing shows to be a regular file
    (its type as ``readdir`` gives it) whose id the walk would not keep is not stat-ed: a walk
    of Python's sources for ``*.py`` stats 22,000 of its 59,000 names."""
    fd = None
    prefix = f"{rel}/" if rel else ""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY) if _BY_DESCRIPTOR else None
        # In the order of their names: most directories hold only files whose key is their name
        # (walk_keys), and then their rows are in walk order as they come.
        if chosen is not None and fd is not None:
            names, files = _listed_with_files(fd)
        else:
            names, files = sorted(_LISTDIR(directory if fd is None else fd)), []
        _drop_hidden(names)
        # Another run's index (the one in use is excluded), finished or not; the root is the user's choice.
        reason = folder_reason(names, directory, fd) if rel else None
        if reason is not None:
            skipped.append(seen(rel, reason, directory=True))  # no time: said once, however it is updated
            return []
        if files:
            names = _unchosen_dropped(names, files, prefix, chosen)
        names, rows = lstat_names(directory, fd, names, prefix, skipped)
    except OSError as exc:
        skipped.append(seen(rel or ".", f"directory cannot be listed: {exc.strerror or exc}", directory=True))
        return []
    finally:
        if fd is not None:
            os.close(fd)
    if not names:
        return []
    base = directory if directory.endswith(os.sep) else directory + os.sep
    ids = list(map(prefix.__add__, names))
    paths = list(map(base.__add__, names))
    # Regular files: numpy tests a large folder, Python a small one (a numpy call costs a few us).
    if len(names) >= _FEW:
        files = ((rows[:, MODE] & 0o170000) == stat.S_IFREG).tolist()
    else:
        files = [mode & 0o170000 == stat.S_IFREG for mode in rows[:, MODE].tolist()]
    if all(files) and walk_keys(names) is names:  # sorted already: one run of files
        return [(ids, paths, rows[:, :FILE_COLUMNS])]
    # Rows (key, id, path, k) of files, k their row in ``table``; [key, id, path, row] of subdirectories.
    table = [rows[:, :FILE_COLUMNS]]
    found: list = list(zip(walk_keys(list(compress(names, files))), compress(ids, files), compress(paths, files), [i for i, f in enumerate(files) if f]))
    extra = len(names)
    for i in [i for i, f in enumerate(files) if not f]:  # links, directories, devices: few, one at a time
        item = _other(names[i], ids[i], paths[i], rows[i].tolist(), excluded, follow_symlinks, skipped)
        if item is None:
            continue
        if item.__class__ is tuple:  # a followed link's file: its row is the target's
            table.append(np.array([item[3][:FILE_COLUMNS]], dtype=np.int64))
            item = (*item[:3], extra)
            extra += 1
        found.append(item)
    found.sort(key=_KEY)  # names are unique: so are their keys
    stats = np.concatenate(table) if len(table) > 1 else table[0]
    out: list = []
    at = 0
    for i in [i for i, item in enumerate(found) if item.__class__ is list] + [len(found)]:
        if i > at:
            run = found[at:i]
            out.append((list(map(itemgetter(1), run)), list(map(itemgetter(2), run)), stats[list(map(itemgetter(3), run))]))
        if i < len(found):
            out.append(found[i][1:])
        at = i + 1
    return out


def _listed_with_files(fd: int) -> tuple[list[str], list[str]]:
    """The names in the folder of ``fd``, sorted, and those of them its listing says are regular
    files (no stat: the type ``readdir`` gives; a file system that gives none is asked by ``lstat``)."""
    with os.scandir(fd) as listing:
        entries = [(entry.name, _regular(entry)) for entry in listing]
    entries.sort(key=_KEY)
    names = list(map(_KEY, entries))
    return names, [name for name, regular in entries if regular]


def _regular(entry: os.DirEntry) -> bool:
    """Whether a listed name is a regular file, by its type; False where that cannot be told
    (its ``lstat`` failed): it is stat-ed with the others, which says why."""
    try:
        return entry.is_file(follow_symlinks=False)
    except OSError:
        return False


def _unchosen_dropped(names: list[str], files: list[str], prefix: str, chosen: Callable[[list[str]], list[bool]]) -> list[str]:
    """``names`` without the regular ``files`` whose ids (``prefix`` + name) the walk does not keep."""
    keep = chosen([prefix + name for name in files])
    if all(keep):
        return names
    dropped = set(compress(files, [not k for k in keep]))
    return [name for name in names if name not in dropped]


def _drop_hidden(names: list[str]) -> None:
    """Remove from ``names`` (sorted) those that start with ".": they sort together, from "." up to
    "/" (the next character, which no name holds), and are found by two searches, not a test a name."""
    a = bisect_left(names, ".")
    if a < len(names) and names[a].startswith("."):
        del names[a : bisect_left(names, "/", a)]


def _other(name: str, child_rel: str, path: str, row: list[int], excluded: Excluded, follow_symlinks: bool, skipped: list):
    """The item of an entry that is not a regular file: a followed link's file (key, id, path, row),
    a directory [key, id, path, row], or None (reported unless it is the excluded index)."""
    mode = row[MODE]
    if stat.S_ISLNK(mode):
        if not follow_symlinks:
            skipped.append(seen(child_rel, "symbolic link, not followed (--follow-symlinks follows links)", row))
            return None
        try:
            row = list(attrgetter(*FIELDS)(os.stat(path)))
        except OSError as exc:
            skipped.append(seen(child_rel, f"broken symbolic link: {exc.strerror or exc}", row))
            return None
        mode = row[MODE]
    if stat.S_ISREG(mode):
        return (walk_key(name), child_rel, path, row)
    if stat.S_ISDIR(mode):
        if excluded.holds(path, row):
            return None
        return [name + "/", child_rel, path, row]
    skipped.append(seen(child_rel, "not a regular file (device, FIFO or socket)", row))
    return None
