"""The walk's stat columns (simdoc.corpus.folders) hold exactly what os.lstat (os.stat for a followed
link) gives, on random trees of files, links to files, folders and nowhere, hidden files, a FIFO,
unicode and undecodable names, and entries removed between the listing and their stat (issue 29)."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import simdoc.corpus.folders as folders
from simdoc import kernel_choice, kernels_walk
from simdoc.corpus.globs import selected
from simdoc.corpus.walk import discover, walk


@pytest.fixture(params=["os.lstat", "compiled"])
def path(request, monkeypatch):
    """Each test on both ways of stat-ing a folder: os.lstat, and the compiled loop (simdoc.kernels_walk)."""
    if request.param == "compiled":
        if not kernels_walk.AVAILABLE:
            pytest.skip("no compiled loop here (not Linux, big-endian, or SIMDOC_NO_NUMBA)")
        monkeypatch.setattr(folders, "_COMPILED", [folders._load_compiled()])
        assert folders._COMPILED[0] is kernels_walk.stat_names
    else:
        monkeypatch.setattr(folders, "_COMPILED", [False])
    return request.param

_NAMES = st.sampled_from(["a", "b.txt", "é.txt", "日本", ".hidden", "z.jsonl", "d", "x.TXT", b"\xff\xfe.txt", b"bad\x80"])
_KINDS = st.sampled_from(["file", "file", "file", "dir", "link_file", "link_dir", "link_nowhere", "fifo"])


def _make(root: bytes, spec: list[tuple[list, str]]) -> None:
    for parts, kind in spec:
        names = [p if isinstance(p, bytes) else p.encode() for p in parts]
        parent = os.path.join(root, *names[:-1]) if len(names) > 1 else root
        path = os.path.join(parent, names[-1])
        try:
            os.makedirs(parent, exist_ok=True)
            if os.path.lexists(path):
                continue
            if kind == "file":
                with open(path, "wb") as f:
                    f.write(path)
                os.utime(path, ns=(7, 1_500_000_000_000_000_000 + 1_000 * len(path) + 17))  # an mtime unlike its ctime
            elif kind == "dir":
                os.mkdir(path)
            elif kind == "link_file":
                with open(path + b".target", "wb") as f:
                    f.write(b"target")
                os.symlink(path + b".target", path)
            elif kind == "link_dir":
                os.symlink(parent, path)  # a loop: the folder holding it
            elif kind == "link_nowhere":
                os.symlink(b"/nonexistent/nowhere", path)
            else:
                os.mkfifo(path)
        except (FileExistsError, FileNotFoundError, NotADirectoryError, IsADirectoryError):
            continue  # a name already taken by a file, a folder or a link


def _expected(root: str, follow: bool) -> dict[str, tuple[int, ...]]:
    """Every document's id and the stat it must carry, by a plain walk with os.lstat/os.stat."""
    out = {}
    walked = set()

    def visit(folder: str, rel: str) -> None:
        st_ = os.stat(folder)
        if (st_.st_dev, st_.st_ino) in walked:
            return
        walked.add((st_.st_dev, st_.st_ino))
        for name in sorted(os.listdir(folder)):
            if name.startswith("."):
                continue
            path, doc_id = os.path.join(folder, name), f"{rel}{name}"
            st_ = os.lstat(path)
            if stat.S_ISLNK(st_.st_mode):
                if not follow:
                    continue
                try:
                    st_ = os.stat(path)
                except OSError:
                    continue
            if stat.S_ISREG(st_.st_mode):
                out[doc_id] = (st_.st_size, st_.st_mtime_ns, st_.st_ctime_ns, st_.st_ino, st_.st_dev)
            elif stat.S_ISDIR(st_.st_mode):
                visit(path, doc_id + "/")

    visit(root, "")
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=st.lists(st.tuples(st.lists(_NAMES, min_size=1, max_size=3), _KINDS), min_size=1, max_size=20), follow=st.booleans())
def test_the_walks_stat_columns_are_what_lstat_gives(path, spec, follow):
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "c")
        os.mkdir(root)
        _make(os.fsencode(root), spec)
        expected = _expected(root, follow)
        entries, skipped = discover(root, follow_symlinks=follow, columns=True)
        got = {e.id: e.stat() for e in entries}
        assert got == expected
        assert entries.stat.dtype == np.int64 and entries.stat.shape == (len(expected), 5)
        assert [e.id for e in walk(root, follow_symlinks=follow)] == list(entries.ids)
        assert not any(part.startswith(".") for s in skipped for part in s.id.split("/"))
        for s in skipped:
            if "FIFO" in s.reason or (not follow and "symbolic link" in s.reason):
                st_ = os.lstat(os.path.join(root, s.id))
                assert (s.size, s.mtime_ns) == (st_.st_size, st_.st_mtime_ns)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 80), gone=st.sets(st.integers(0, 79), max_size=5))
def test_a_file_removed_between_its_listing_and_its_stat_is_passed_over_and_the_others_kept(path, n, gone):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        names = [f"f{i:03d}" for i in range(n)]
        for name in names:
            (root / name).write_text(name)
        removed = {names[i] for i in gone if i < n}
        real = folders._LISTDIR

        def listed_then_removed(folder):
            names = real(folder)
            for name in removed:
                os.unlink(root / name)  # gone since it was listed
            return names

        folders._LISTDIR = listed_then_removed
        try:
            entries, skipped = discover(root, columns=True)
        finally:
            folders._LISTDIR = real
        assert list(entries.ids) == [x for x in names if x not in removed]
        for e in entries:
            st_ = os.lstat(e.path)
            assert e.stat() == (st_.st_size, st_.st_mtime_ns, st_.st_ctime_ns, st_.st_ino, st_.st_dev)
        assert [(s.id, s.reason) for s in skipped] == [(x, "cannot stat: No such file or directory") for x in sorted(removed)]


def test_the_excluded_index_is_known_by_its_inode_through_a_link_and_when_made_during_the_walk(tmp_path):
    corpus = tmp_path / "c"
    for d in ("a", "idx", "z"):
        (corpus / d).mkdir(parents=True)
        (corpus / d / "x.txt").write_text("some words here")
    (corpus / "link").symlink_to(corpus / "idx", target_is_directory=True)
    ids = [e.id for e in walk(corpus, exclude=[corpus / "idx"], follow_symlinks=True)]
    assert ids == ["a/x.txt", "z/x.txt"]  # neither idx/ nor the link to it
    # An index that does not exist when the walk starts, made before the walk reaches it.
    late = corpus / "z" / "late"
    found = walk(corpus, exclude=[late])
    first = next(found)
    late.mkdir()
    (late / "y.txt").write_text("more words")
    assert [first.id] + [e.id for e in found] == ["a/x.txt", "idx/x.txt", "z/x.txt"]
    # And one given by a path that differs from the corpus's (a ".." on the way).
    ids = [e.id for e in walk(corpus, exclude=[corpus / "a" / ".." / "idx"])]
    assert ids == ["a/x.txt", "z/late/y.txt", "z/x.txt"]


@given(st.lists(st.text(alphabet="!-.0a~\u00e9\udcff", min_size=1, max_size=4), unique=True))
def test_hidden_names_are_dropped_from_a_sorted_listing_and_only_they(names):
    listed = sorted(n for n in names if n not in (".", ".."))
    kept = list(listed)
    folders._drop_hidden(kept)
    assert kept == [n for n in listed if not n.startswith(".")]


def test_a_folder_lists_names_sorting_before_and_after_a_dot_and_drops_hidden_ones(path, tmp_path):
    names = ["!a", "+b", "-c", ".d", "..e", ".f.txt", "0g", "h", "~i"]
    for name in names:
        (tmp_path / name).write_text(name)
    entries, _ = discover(tmp_path, columns=True)
    assert list(entries.ids) == sorted(n for n in names if not n.startswith("."))


@pytest.mark.skipif(not kernels_walk.AVAILABLE, reason="no compiled loop here")
def test_a_walk_takes_the_compiled_loop_once_enough_bytes_written_since_the_last_scan_are_listed_and_not_before(tmp_path, monkeypatch):
    for d in ("a", "b", "c"):
        (tmp_path / d).mkdir()
        for i in range(3):
            (tmp_path / d / f"{i}.txt").write_text(f"{d} {i}")
    st_ = os.lstat(tmp_path / "a" / "0.txt")
    dev = st_.st_dev
    after_all = max(os.lstat(p).st_ctime_ns for p in tmp_path.rglob("*")) + 1
    reference = discover(tmp_path, columns=True)[0]

    def walked(since: dict[int, int] | None, budget: int = 1):
        monkeypatch.setattr(kernel_choice, "SMALL_BYTES", budget)  # bytes of new files before numba is worth loading
        monkeypatch.setattr(folders, "_COMPILED", [None])
        monkeypatch.setattr(folders, "_STATED", [0])
        monkeypatch.setattr(folders, "COMPILED_AFTER", 10**9)
        monkeypatch.setattr(folders, "_numba_loaded", lambda: False)  # as in a run that has not loaded it (this one has)
        with folders.changes_since(since):
            entries, _ = discover(tmp_path, columns=True)
        assert entries.ids == reference.ids and np.array_equal(entries.stat, reference.stat)  # same rows either way
        return folders._COMPILED[0]

    assert walked({dev: after_all}) is None  # nothing written since: numba is not loaded
    assert walked({dev + 1: 0}) is None  # another device's clock says nothing of this one
    assert walked({dev: 0}) is kernels_walk.stat_names  # every file is newer: loaded at the first folder
    assert walked(None) is kernels_walk.stat_names  # a new build: every file is to be read
    assert walked({dev: 0}, budget=24) is kernels_walk.stat_names  # 9 files of 3 bytes: past 24 in the third folder
    assert walked({dev: 0}, budget=28) is None  # 27 bytes in all: too few to load numba for
    assert walked(None, budget=28) is None
    # Its mode changed (a newer change time), its modification time old: not a write, nothing to sign.
    os.chmod(tmp_path / "b" / "1.txt", 0o600)
    os.utime(tmp_path / "b" / "1.txt", ns=(st_.st_atime_ns, 1_000_000_000))
    reference = discover(tmp_path, columns=True)[0]
    assert walked({dev: after_all}) is None
    (tmp_path / "c" / "2.txt").write_text("edited")  # written since: the walk is compiled from then on
    reference = discover(tmp_path, columns=True)[0]
    assert walked({dev: after_all}) is kernels_walk.stat_names
    assert folders._SINCE == [None]  # not watched after the walk


_GLOBS = st.lists(st.sampled_from(["*.txt", "*.TXT", "d/*", "*/*", "a", "日本/*", "*.jsonl", "z*"]), max_size=2)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    spec=st.lists(st.tuples(st.lists(_NAMES, min_size=1, max_size=3), _KINDS), min_size=1, max_size=20),
    follow=st.booleans(), include=_GLOBS, exclude=_GLOBS,
)
def test_files_include_and_exclude_drop_are_never_stat_ed_and_the_walk_is_the_same(path, spec, follow, include, exclude):
    """--include/--exclude: a name its folder's listing shows to be a regular file that they drop
    is not stat-ed, and the documents, their stat and what is reported as passed over are those
    of a walk that stats every name and then selects."""
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "c")
        os.mkdir(root)
        _make(os.fsencode(root), spec)
        include, exclude = tuple(include), tuple(exclude)
        expected = {i: s for i, s in _expected(root, follow).items() if selected(i, include, exclude)}
        asked: list[str] = []
        real = folders.lstat_names

        def recorded(directory, fd, names, prefix, skipped):
            asked.extend(prefix + name for name in names)
            return real(directory, fd, names, prefix, skipped)

        folders.lstat_names = recorded
        try:
            entries, skipped = discover(root, follow_symlinks=follow, include_globs=include, exclude_globs=exclude, columns=True)
        finally:
            folders.lstat_names = real
        assert {e.id: e.stat() for e in entries} == expected
        for doc_id in asked:
            st_ = os.lstat(os.path.join(root, doc_id))
            assert not stat.S_ISREG(st_.st_mode) or selected(doc_id, include, exclude)
        stat_all = _stat_every_name(root, follow, include, exclude)
        assert [(s.id, s.reason, s.size, s.mtime_ns) for s in skipped] == stat_all


def _stat_every_name(root: str, follow: bool, include: tuple, exclude: tuple) -> list[tuple]:
    """What a walk that stats every name reports as passed over (the folder's listing made to
    say nothing of the names' types)."""
    real = folders._listed_with_files
    folders._listed_with_files = lambda fd: (sorted(os.listdir(fd)), [])
    try:
        _, skipped = discover(root, follow_symlinks=follow, include_globs=include, exclude_globs=exclude, columns=True)
    finally:
        folders._listed_with_files = real
    return [(s.id, s.reason, s.size, s.mtime_ns) for s in skipped]


def test_a_walk_of_python_like_sources_for_py_files_stats_the_py_files_and_folders_only(tmp_path, monkeypatch):
    for d in ("pkg", "pkg/sub", "pkg/__pycache__"):
        (tmp_path / d).mkdir()
    for name in ("pkg/a.py", "pkg/b.txt", "pkg/sub/c.py", "pkg/sub/c.pyc", "pkg/__pycache__/a.cpython-311.pyc", "README"):
        (tmp_path / name).write_text(name)
    asked: list[str] = []
    real = folders.lstat_names
    monkeypatch.setattr(folders, "lstat_names", lambda directory, fd, names, prefix, skipped: asked.extend(prefix + n for n in names) or real(directory, fd, names, prefix, skipped))
    entries, skipped = discover(tmp_path, include_globs=("*.py",), columns=True)
    assert list(entries.ids) == ["pkg/a.py", "pkg/sub/c.py"] and skipped == []
    assert sorted(asked) == ["pkg", "pkg/__pycache__", "pkg/a.py", "pkg/sub", "pkg/sub/c.py"]


def test_a_name_whose_type_cannot_be_told_is_stat_ed_with_the_others(tmp_path, monkeypatch):
    """A file system that gives no type in its listing makes os.scandir lstat the name; if that
    fails, the name is not dropped unseen: it is stat-ed with the others, which says why."""
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "b.log").write_text("b")
    real = os.scandir

    class Blind:
        def __init__(self, entry):
            self.name = entry.name

        def is_file(self, follow_symlinks=True):
            raise PermissionError(13, "Permission denied")

    class Listing:
        def __init__(self, fd):
            self.inner = real(fd)

        def __enter__(self):
            return (Blind(e) for e in self.inner)

        def __exit__(self, *exc):
            self.inner.close()

    monkeypatch.setattr(folders.os, "scandir", Listing)
    asked: list[str] = []
    real_lstat_names = folders.lstat_names
    monkeypatch.setattr(folders, "lstat_names", lambda d, fd, names, prefix, skipped: asked.extend(names) or real_lstat_names(d, fd, names, prefix, skipped))
    entries, skipped = discover(tmp_path, include_globs=("*.txt",), columns=True)
    assert list(entries.ids) == ["a.txt"] and skipped == [] and asked == ["a.txt", "b.log"]
