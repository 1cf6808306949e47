"""Find the files of a corpus (the rules for their names: :mod:`simdoc.corpus.names`).

A corpus is a directory. Its documents are the regular files below it,
recursively, except hidden files and directories (names starting with ".")
and the index directory itself when it lies inside the corpus, and any other simdoc
index in it (a folder with simdoc's manifest.json, or an unfinished one's lock: reported as
skipped once; the rule, simdoc.indexmarks, is applied to lists and listings too). Symbolic
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
from collections.abc import Iterator
from functools import partial
from itertools import compress
from pathlib import Path

import numpy as np

# The files found, one or as columns, live in simdoc.corpus.entries; the stages import them from here too.
from simdoc.corpus.entries import Entries, FileEntry, PrefixedPaths  # noqa: F401
from simdoc.corpus.filelists import ListedPath, ListedURL
# A folder listed into columns, and what is passed over (Skipped), live in simdoc.corpus.folders.
from simdoc.corpus.folders import DEV, INO, Excluded, Skipped, list_folder
from simdoc.corpus.folders import seen as _seen
from simdoc.corpus.globs import selected, selected_all
from simdoc.corpus.indexes import AT_ONCE, find_indexes, folders_of, holder, listed_indexes, named_candidates, path_reason, url_reason
# The rules for names live in simdoc.corpus.names; the readers and stages import them from here too.
from simdoc.corpus.names import JSONL_SUFFIXES, MEMBER_SEPARATOR, WARC_SUFFIXES, is_jsonl, is_warc, walk_key, walk_keys  # noqa: F401
from simdoc.corpus.object_lists import common_base, stat_listed
from simdoc.corpus.objects import base_of, canonical, is_url
from simdoc.errors import CorpusError

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
    if columns:
        entries = Entries.of_walk(found)
    else:
        entries = list(_entries(found))
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
    :meth:`Skipped.reported`; but a name its folder's listing shows to be a
    regular file that they drop is not even stat-ed). ``exclude`` names directories (the index) never to
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
    return _entries(found)


def _entries(found: Iterator[tuple]) -> Iterator[FileEntry]:
    """A :class:`FileEntry` of each file of a walk's runs (ids, paths, stat rows)."""
    for ids, paths, rows in found:
        yield from map(FileEntry, ids, paths, *rows.T.tolist())


def _found(root, exclude, follow_symlinks: bool, include_globs, exclude_globs, skipped: list) -> Iterator[tuple]:
    """:func:`walk`'s documents as runs of consecutive files (ids, paths, (n, 5) int64 stat rows: simdoc.corpus.folders); raises at once as it does."""
    root_path = Path(root)
    if not root_path.exists():
        raise CorpusError(f"corpus {root} does not exist", hint="check the path")
    if not root_path.is_dir():
        raise CorpusError(f"corpus {root} is not a directory", hint="pass the folder that holds the documents")
    reason = path_reason(str(root_path))
    if reason is not None:  # its arrays and lock would be read as documents
        raise CorpusError(f"corpus {root} is {reason}", hint="name the folder of documents, and this one with --index")
    return _walk(str(root_path.resolve()), exclude, follow_symlinks, include_globs, exclude_globs, skipped)


def _walk(root_abs: str, exclude, follow_symlinks: bool, include_globs, exclude_globs, skipped: list) -> Iterator[tuple]:
    excluded = Excluded.of(exclude)  # only directories can be excluded (the index)
    root_st = os.stat(root_abs)
    walked = {(root_st.st_dev, root_st.st_ino)}
    # A depth-first walk whose every directory lists its files and subdirectories sorted by
    # name, a subdirectory as if its name ended in "/", gives the ids in sorted order: all
    # ids under "d/" sort together, where "d/" sorts among its siblings. A file of many
    # documents sorts the same way, as the "f/#..." ids of its members do (see walk_key).
    # Files --include/--exclude would drop are dropped before they are stat-ed (dropped again below:
    # a name of unknown type is stat-ed, and a followed link's file is known only then).
    keeps = partial(selected_all, include=include_globs, exclude=exclude_globs) if include_globs or exclude_globs else None
    pending = [iter(list_folder(root_abs, "", excluded, follow_symlinks, skipped, keeps))]
    while pending:
        for item in pending[-1]:
            if item.__class__ is tuple:  # a run of files: (ids, paths, stat rows)
                if include_globs or exclude_globs:
                    chosen = selected_all(item[0], include_globs, exclude_globs)
                    if not any(chosen):
                        continue
                    if not all(chosen):
                        item = (list(compress(item[0], chosen)), list(compress(item[1], chosen)), item[2][np.array(chosen, dtype=bool)])
                yield item
                continue
            child_rel, path, row = item  # a subdirectory (a list): walked before the rest of this one
            key = (row[DEV], row[INO])
            if key in walked:
                skipped.append(_seen(child_rel, "directory already walked (symbolic link loop or second link to it)", row, True))
                continue
            walked.add(key)
            pending.append(iter(list_folder(path, child_rel, excluded, follow_symlinks, skipped, keeps)))
            break
        else:
            pending.pop()


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
    # A name inside a simdoc index is none of its documents, as in a walk of the base: each folder
    # between the base and a name is asked once (the index in use too: it has its manifest or lock).
    indexes = find_indexes(folders_of(prefix for _, prefix in sources), lambda folder: path_reason(os.path.join(base, folder)))
    said: set[str] = set()
    for path, prefix in sources:
        folder = os.path.isdir(path)
        if folder and holder(prefix, indexes) is None and (reason := path_reason(path)) is not None:
            indexes[prefix] = reason  # a folder named that is an index itself
        inside = holder(prefix, indexes)
        if inside is not None:
            if inside not in said:  # once, however many names of it the list gives
                said.add(inside)
                skipped.append(_seen(inside, indexes[inside], directory=True))
            continue
        if folder:
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
    indexes = listed_indexes(base, [doc_id for doc_id, _, _ in listed])  # as a walk passes over a folder
    if indexes:
        listed = [item for item in listed if holder(item[0], indexes) is None]
        passed = [item for item in passed if holder(item[0], indexes) is None]
    entries = [FileEntry(doc_id, path, *st.values()) for doc_id, path, st in listed]
    skipped = [Skipped(doc_id, reason, size, mtime_ns) for doc_id, reason, size, mtime_ns in passed]
    skipped += [Skipped(folder, reason, directory=True) for folder, reason in indexes.items()]
    _reported(skipped, include_globs, exclude_globs)
    chosen = _select(entries, include_globs, exclude_globs)
    return base, (iter(chosen) if lazy else chosen), skipped


def _named_objects(base: str, sources: list[tuple[str, str]], include_globs, exclude_globs, lazy: bool):
    """:func:`discover_sources` of URLs from a list (see :mod:`simdoc.corpus.object_lists`)."""
    entries: dict[str, FileEntry] = {}
    skipped: list[Skipped] = []
    unique = list(dict(sources).items())
    # Objects inside a simdoc index are none of its documents, as files of one in a list are not: a
    # "folder" where the list names a manifest.json or lock is asked once (HEADs of the two), not
    # every folder (two HEADs each, every night), nor their objects.
    indexes = find_indexes(named_candidates(doc_id for _, doc_id in unique), url_reason(base), AT_ONCE)
    if indexes:
        unique = [(url, doc_id) for url, doc_id in unique if holder(doc_id, indexes) is None]
        skipped += [Skipped(folder, reason, directory=True) for folder, reason in indexes.items()]
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
