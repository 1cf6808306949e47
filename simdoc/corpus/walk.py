"""Find the files of a corpus, and the rules for names (member ids, JSON Lines, WARC).

A corpus is a directory. Its documents are the regular files below it,
recursively, except hidden files and directories (names starting with ".")
and the index directory itself when it lies inside the corpus. Symbolic
links are not followed unless asked (a link can point outside the corpus or
form a loop); each one is reported. With --follow-symlinks every real
directory is walked once, so loops are cut and reported. FIFOs, sockets and
devices are never opened. A document's id is its path relative to the corpus
root with "/" separators; documents are numbered in sorted id order, so the
numbering never depends on the order the file system lists them in.

How one file is read: :mod:`simdoc.corpus.files`.
"""

from __future__ import annotations

import dataclasses
import os
import stat
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from operator import attrgetter, itemgetter
from pathlib import Path

import numpy as np

from simdoc.corpus.filelists import ListedPath, ListedURL
from simdoc.corpus.files import COMPRESSED
from simdoc.corpus.globs import may_hold, selected
from simdoc.corpus.object_lists import common_base, stat_listed
from simdoc.corpus.objects import base_of, canonical, is_url
from simdoc.errors import CorpusError

JSONL_SUFFIXES = (".jsonl", ".ndjson")
WARC_SUFFIXES = (".warc", ".wet")  # .warc.wet is Common Crawl's plain text (WET)
MEMBER_SEPARATOR = "/#"  # between a file's id and the key of a document inside it


def is_jsonl(path: str) -> bool:
    """A JSON Lines file by its name (``.jsonl``, ``.ndjson``, possibly compressed)."""
    for suffix in COMPRESSED:
        if path.endswith(suffix):
            path = path[: -len(suffix)]
            break
    return path.endswith(JSONL_SUFFIXES)


def is_warc(path: str) -> bool:
    """A WARC or WET file by its name (``.warc``, ``.wet``, ``.warc.wet``, possibly compressed)."""
    for suffix in COMPRESSED:
        if path.endswith(suffix):
            path = path[: -len(suffix)]
            break
    return path.endswith(WARC_SUFFIXES)


def walk_key(doc_id: str) -> str:
    """What a file's id sorts by: a file of many documents sorts as its members' ids do.

    A member's id is ``PATH/#KEY`` (see :mod:`simdoc.corpus.formats`). Since PATH is
    a file, no other file's id starts with ``PATH/``: member ids never equal
    another document's id. Sorting such a file as ``PATH/``, the way a
    directory sorts, keeps the ids of all documents in sorted order.
    """
    dot = doc_id.rfind(".")
    if dot < 0 or (doc_id[dot:] not in _MANY_SUFFIXES and doc_id[dot:].lower() != ".parquet"):
        return doc_id  # most files: one look at the last suffix (a walk asks for 10^5 of them)
    return doc_id + "/" if is_jsonl(doc_id) or is_warc(doc_id) or doc_id.lower().endswith(".parquet") else doc_id


# The last suffix of every name is_jsonl or is_warc accepts (each suffix has one dot).
_MANY_SUFFIXES = frozenset((*COMPRESSED, *JSONL_SUFFIXES, *WARC_SUFFIXES))


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


_STAT = attrgetter("st_size", "st_mtime_ns", "st_ctime_ns", "st_ino", "st_dev")  # FileEntry.stat() of an os.stat_result


class Entries(Sequence):
    """The files a walk found as columns (issue 29): ids, paths, and an (n, 5) int64 array of
    :meth:`FileEntry.stat`; a :class:`FileEntry` is made only for a file asked for (one to read).

    :func:`discover` with ``columns``: 10^5 files are not 10^5 objects on a run that reads none.
    """

    def __init__(self, ids: list[str], paths: Sequence[str], stat: np.ndarray) -> None:
        self.ids, self.paths, self.stat = ids, paths, stat

    @classmethod
    def of_walk(cls, found: Iterable[tuple[str, str, os.stat_result]]) -> Entries:
        """The columns of a walk's (id, path, stat), taken as they come: an os.stat_result is
        ~0.5 KB, and 10^6 of them held until the walk ends were most of its peak (issue 29).
        A path that is the root's followed by the id (every one, in a walk of one folder) is
        not held either (:class:`PrefixedPaths`)."""
        ids: list[str] = []
        paths: list[str] | None = None  # held only once one path is not prefix + id
        prefix: str | None = None
        stat = array("q")
        add_id, add_stat = ids.append, stat.extend
        for doc_id, path, st in found:
            if paths is None:
                if prefix is None:
                    prefix = path[: len(path) - len(doc_id)] if path.endswith(doc_id) else ""
                if len(path) != len(prefix) + len(doc_id) or not path.startswith(prefix) or not path.endswith(doc_id):
                    paths = [prefix + x for x in ids]
            if paths is not None:
                paths.append(path)
            add_id(doc_id)
            add_stat(_STAT(st))
        stat_rows = np.frombuffer(stat, dtype=np.int64).reshape(len(ids), 5) if ids else np.zeros((0, 5), np.int64)
        return cls(ids, paths if paths is not None else PrefixedPaths(prefix or "", ids), stat_rows)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return FileEntry(self.ids[i], self.paths[i], *self.stat[i].tolist())


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


def _seen(doc_id: str, reason: str, st: os.stat_result | None = None, directory: bool = False) -> Skipped:
    if st is None:
        return Skipped(doc_id, reason, directory=directory)
    return Skipped(doc_id, reason, st.st_size, st.st_mtime_ns, directory)


def _reported(skipped: list[Skipped], include_globs, exclude_globs) -> None:
    """Keep, sorted by id, the skipped paths inside the --include/--exclude set."""
    skipped[:] = sorted((s for s in skipped if s.reported(include_globs or (), exclude_globs or ())), key=lambda s: s.id)


def discover(
    root: str | os.PathLike,
    exclude: list[str | os.PathLike] = (),
    follow_symlinks: bool = False,
    include_globs: tuple[str, ...] = (),
    exclude_globs: tuple[str, ...] = (),
    columns: bool = False,
) -> tuple[list[FileEntry] | Entries, list[Skipped]]:
    """List the documents under ``root`` sorted by id, and what was passed over (sorted by id).

    See :func:`walk`, which finds the same documents one at a time.
    ``columns``: the documents as :class:`Entries`.
    """
    skipped: list[Skipped] = []
    found = _found(root, exclude, follow_symlinks, include_globs, exclude_globs, skipped)
    entries = Entries.of_walk(found) if columns else [FileEntry.of_stat(*f) for f in found]
    _reported(skipped, include_globs, exclude_globs)
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
    (in walk order, whether --include/--exclude select them or not: see
    :meth:`Skipped.reported`). ``exclude`` names directories (the index) never to
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
    found = _found(root, exclude, follow_symlinks, include_globs, exclude_globs, skipped if skipped is not None else [])
    return (FileEntry.of_stat(*f) for f in found)


def _found(root, exclude, follow_symlinks: bool, include_globs, exclude_globs, skipped: list) -> Iterator[tuple]:
    """:func:`walk`'s documents as (id, path, stat); raises at once as it does."""
    root_path = Path(root)
    if not root_path.exists():
        raise CorpusError(f"corpus {root} does not exist", hint="check the path")
    if not root_path.is_dir():
        raise CorpusError(f"corpus {root} is not a directory", hint="pass the folder that holds the documents")
    return _walk(str(root_path.resolve()), exclude, follow_symlinks, include_globs, exclude_globs, skipped)


def _walk(root_abs: str, exclude, follow_symlinks: bool, include_globs, exclude_globs, skipped: list) -> Iterator[tuple]:
    # Only directories can be excluded (the index); compare resolved paths, once per directory.
    excluded = {os.path.realpath(e) for e in exclude}
    root_st = os.stat(root_abs)
    walked = {(root_st.st_dev, root_st.st_ino)}
    globs = bool(include_globs or exclude_globs)
    # A depth-first walk whose every directory lists its files and subdirectories sorted by
    # name, a subdirectory as if its name ended in "/", gives the ids in sorted order: all
    # ids under "d/" sort together, where "d/" sorts among its siblings. A file of many
    # documents sorts the same way, as the "f/#..." ids of its members do (see walk_key).
    pending = [iter(_listing(root_abs, "", excluded, follow_symlinks, skipped))]
    while pending:
        for item in pending[-1]:  # a directory's files in one loop: a walk meets 10^5 of them
            if item.__class__ is tuple:  # a file: (id, path, stat)
                if not globs or selected(item[0], include_globs, exclude_globs):
                    yield item
                continue
            child_rel, path, st = item  # a subdirectory (a list): walked before the rest of this one
            key = (st.st_dev, st.st_ino)
            if key in walked:
                skipped.append(_seen(child_rel, "directory already walked (symbolic link loop or second link to it)", st, True))
                continue
            walked.add(key)
            pending.append(iter(_listing(path, child_rel, excluded, follow_symlinks, skipped)))
            break
        else:
            pending.pop()


def _listing(directory: str, rel: str, excluded: set, follow_symlinks: bool, skipped: list) -> list:
    """A directory's files (as tuples (id, path, stat)) and subdirectories to walk (as lists
    [id, path, stat]), in walk order."""
    # Plain strings and os.scandir: pathlib costs more than the stat calls on 10^5 files.
    try:
        with os.scandir(directory) as it:
            children = list(it)
    except OSError as exc:
        skipped.append(_seen(rel or ".", f"directory cannot be listed: {exc.strerror or exc}", directory=True))
        return []
    keyed = []
    prefix = f"{rel}/" if rel else ""
    for entry in children:
        name = entry.name
        if name.startswith("."):
            continue
        child_rel = prefix + name
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError as exc:
            skipped.append(_seen(child_rel, f"cannot stat: {exc.strerror or exc}"))
            continue
        if stat.S_ISLNK(st.st_mode):
            if not follow_symlinks:
                skipped.append(_seen(child_rel, "symbolic link, not followed (--follow-symlinks follows links)", st))
                continue
            try:
                st = os.stat(entry.path)
            except OSError as exc:
                skipped.append(_seen(child_rel, f"broken symbolic link: {exc.strerror or exc}", st))
                continue
        if stat.S_ISREG(st.st_mode):
            keyed.append((walk_key(name), (child_rel, entry.path, st)))
        elif stat.S_ISDIR(st.st_mode):
            if excluded and os.path.realpath(entry.path) in excluded:
                continue
            keyed.append((name + "/", [child_rel, entry.path, st]))
        else:
            skipped.append(_seen(child_rel, "not a regular file (device, FIFO or socket)", st))
    keyed.sort(key=itemgetter(0))  # names are unique: so are their keys
    return [item for _, item in keyed]


def _select(entries: list[FileEntry], include_globs, exclude_globs) -> list[FileEntry]:
    """The entries --include/--exclude keep, in walk order (sorted by :func:`walk_key`)."""
    return sorted((e for e in entries if selected(e.id, include_globs, exclude_globs)), key=lambda e: walk_key(e.id))


def resolve_sources(corpus) -> tuple[str, list[tuple[str, str]]]:
    """The base folder document ids are relative to, and each source with its id prefix.

    One folder: ids are paths relative to it (``simdoc pairs crawl/``). Several
    folders, or files: ids are relative to the deepest folder holding all of
    them (``simdoc pairs a/ b/`` gives ``a/x.txt`` and ``b/y.txt``), so ids never
    collide and stay readable.

    A name from a file list (:class:`~simdoc.corpus.filelists.ListedPath`)
    that does not exist counts for the base all the same, so that the ids of
    the others do not move; :func:`discover_sources` reports it as skipped.

    Raises
    ------
    CorpusError
        A source named on the command line does not exist.
    """
    items = [corpus] if isinstance(corpus, (str, os.PathLike)) else list(corpus)
    if not items:
        raise CorpusError("no corpus given", hint="name a folder, files, or --files-from")
    if any(isinstance(item, ListedURL) for item in items):  # objects named one by one (--files-from)
        if not all(isinstance(item, ListedURL) for item in items):
            raise CorpusError("a corpus of URLs from a list takes no other CORPUS or local path", hint="list only URLs, of one bucket")
        base = common_base(items)
        return base, [(canonical(item), canonical(item)[len(base) + 1 :]) for item in items]
    if any(is_url(item) for item in items):
        if len(items) > 1:
            raise CorpusError("a corpus at a URL is given alone (one bucket and prefix)", hint="run simdoc once per URL")
        base = base_of(items[0])  # the prefix, or the "folder" of the one object named
        return base, [(base, "")]
    absolute = []
    for item in items:
        path = os.path.abspath(os.fspath(item))
        if not os.path.exists(path) and not isinstance(item, ListedPath):
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
    columns: bool = False,
) -> tuple[str, list[FileEntry] | Iterator[FileEntry] | Entries, list[Skipped]]:
    """:func:`discover` over one folder, several folders, or files; returns the id base too.

    With ``columns``, one folder's documents come as :class:`Entries` (the others as a list).

    With ``lazy``, the documents come as an iterator in id order: one
    folder's are found while it is consumed (:func:`walk`), and the list of
    what was passed over is complete, and sorted by id, only once the
    iterator is exhausted.
    """
    if is_url(corpus) and not isinstance(corpus, ListedURL):
        return _listed(corpus, include_globs, exclude_globs, lazy)
    base, sources = resolve_sources(corpus)
    if is_url(base):
        return _named_objects(base, sources, include_globs, exclude_globs, lazy)
    if len(sources) == 1 and sources[0][1] == "":
        if lazy:
            skipped: list[Skipped] = []
            found = walk(sources[0][0], exclude, follow_symlinks, include_globs, exclude_globs, skipped)
            return base, _then_reported(found, skipped, include_globs, exclude_globs), skipped
        entries, skipped = discover(sources[0][0], exclude, follow_symlinks, include_globs, exclude_globs, columns)
        return base, entries, skipped
    entries: dict[str, FileEntry] = {}
    skipped: list[Skipped] = []
    for path, prefix in sources:
        if os.path.isdir(path):
            found, passed = discover(path, exclude, follow_symlinks)
            for e in found:
                entries.setdefault(f"{prefix}/{e.id}", dataclasses.replace(e, id=f"{prefix}/{e.id}"))
            skipped.extend(Skipped(f"{prefix}/{s.id}", s.reason, s.size, s.mtime_ns, s.directory) for s in passed)
            continue
        try:
            st = os.stat(path) if follow_symlinks else os.lstat(path)
        except FileNotFoundError:
            skipped.append(_seen(prefix, "no such file, skipped"))
            continue
        except OSError as exc:
            skipped.append(_seen(prefix, f"cannot stat: {exc.strerror or exc}"))
            continue
        if stat.S_ISREG(st.st_mode):
            entries.setdefault(prefix, FileEntry.of_stat(prefix, path, st))
        elif stat.S_ISLNK(st.st_mode):
            skipped.append(_seen(prefix, "symbolic link, not followed (--follow-symlinks follows links)", st))
        else:
            skipped.append(_seen(prefix, "not a regular file (device, FIFO or socket)", st))
    _reported(skipped, include_globs, exclude_globs)
    chosen = _select(list(entries.values()), include_globs, exclude_globs)
    return base, (iter(chosen) if lazy else chosen), skipped


def _listed(url: str, include_globs, exclude_globs, lazy: bool):
    """:func:`discover_sources` of a URL: the objects under the prefix (see :mod:`simdoc.corpus.objects`)."""
    from simdoc.corpus.objects import list_prefix

    base, listed, passed = list_prefix(url)
    entries = [FileEntry(doc_id, path, *st.values()) for doc_id, path, st in listed]
    skipped = [Skipped(doc_id, reason, size, mtime_ns) for doc_id, reason, size, mtime_ns in passed]
    _reported(skipped, include_globs, exclude_globs)
    chosen = _select(entries, include_globs, exclude_globs)
    return base, (iter(chosen) if lazy else chosen), skipped


def _named_objects(base: str, sources: list[tuple[str, str]], include_globs, exclude_globs, lazy: bool):
    """:func:`discover_sources` of URLs from a list (see :mod:`simdoc.corpus.object_lists`)."""
    entries: dict[str, FileEntry] = {}
    skipped: list[Skipped] = []
    unique = list(dict(sources).items())
    for (url, doc_id), st in zip(unique, stat_listed([url for url, _ in unique])):
        if isinstance(st, str):
            skipped.append(_seen(doc_id, st))
        else:
            entries.setdefault(doc_id, FileEntry(doc_id, url, *st.values()))
    _reported(skipped, include_globs, exclude_globs)
    chosen = _select(list(entries.values()), include_globs, exclude_globs)
    return base, (iter(chosen) if lazy else chosen), skipped


def _then_reported(found: Iterator[FileEntry], skipped: list[Skipped], include_globs, exclude_globs) -> Iterator[FileEntry]:
    yield from found
    _reported(skipped, include_globs, exclude_globs)
