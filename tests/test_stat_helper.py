"""The walk's helper process (simdoc.corpus.stat_helper): a walk that hands half of each large folder
to it lists exactly what a walk alone lists (ids, stat rows, what it passed over and why), whatever
happens to the helper, and leaves no process behind."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import simdoc.corpus.folders as folders
from simdoc.corpus import stat_helper, stat_server
from simdoc.corpus.walk import discover
from conftest import records, write


@pytest.fixture
def helpers(monkeypatch):
    """Every folder of two names or more is split; the helpers made and the answers they gave are kept.
    The walk stats with os.lstat (a folder is not split where the compiled loop is in use), and
    waits for the helper to be ready (where it would stat a slice itself meanwhile, as it may)."""
    monkeypatch.setattr(stat_helper, "SPLIT_AT", 2)
    monkeypatch.setattr(folders, "_COMPILED", [False])
    real_ready = stat_helper.StatHelper.ready
    monkeypatch.setattr(stat_helper.StatHelper, "ready", lambda self, wait=False: real_ready(self, True))
    made: list[stat_helper.StatHelper] = []
    answered: list[bool] = []
    real_init, real_answer = stat_helper.StatHelper.__init__, stat_helper.StatHelper.answer

    def init(self, fields):
        real_init(self, fields)
        made.append(self)

    def answer(self):
        got = real_answer(self)
        answered.append(got is not None)
        return got

    monkeypatch.setattr(stat_helper.StatHelper, "__init__", init)
    monkeypatch.setattr(stat_helper.StatHelper, "answer", answer)
    return made, answered


def _walked(root, helper: bool, **kw):
    with folders.walk_helper(helper):
        entries, skipped = discover(root, columns=True, **kw)
    return list(entries.ids), entries.stat.copy(), [(s.id, s.reason, s.size, s.mtime_ns, s.directory) for s in skipped]


_NAME = st.sampled_from(["a", "b.txt", "é.txt", "日本", ".hidden", "z.jsonl", "x.TXT", b"\xff\xfe.txt", b"bad\x80", "sp ace"])
_KIND = st.sampled_from(["file", "file", "file", "link", "link_nowhere", "fifo"])


def _tree(root: bytes, folders_spec: list[list[tuple]]) -> None:
    for f, entries in enumerate(folders_spec):
        folder = os.path.join(root, b"d%d" % f)
        os.makedirs(folder, exist_ok=True)
        for i, (name, kind) in enumerate(entries):
            name = (name if isinstance(name, bytes) else name.encode()) + b"%d" % i
            path = os.path.join(folder, name)
            if kind == "file":
                with open(path, "wb") as out:
                    out.write(path * (i + 1))
            elif kind == "link":
                os.symlink(os.path.join(folder, b"d"), path)
            elif kind == "link_nowhere":
                os.symlink(b"/nonexistent/nowhere", path)
            else:
                os.mkfifo(path)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=st.lists(st.lists(st.tuples(_NAME, _KIND), max_size=12), min_size=2, max_size=5), follow=st.booleans())
def test_a_walk_with_the_helper_lists_what_a_walk_alone_lists(helpers, spec, follow):
    made, answered = helpers
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "c")
        os.mkdir(root)
        _tree(os.fsencode(root), spec)
        before = len(answered)
        alone = _walked(root, False, follow_symlinks=follow)
        shared = _walked(root, True, follow_symlinks=follow)
        assert shared[0] == alone[0] and np.array_equal(shared[1], alone[1]) and shared[2] == alone[2]
        # Every folder of two names or more is shared, the root (two folders or more) too.
        shown = [sum(name != ".hidden" for name, _ in entries) for entries in spec]
        assert answered[before:] == [True] * (1 + sum(n >= 2 for n in shown))
        assert made[-1].process is None  # ended with the walk


def test_names_gone_between_the_listing_and_the_helpers_stat_are_said_as_a_walk_alone_says(helpers, tmp_path):
    made, answered = helpers
    for d in ("a", "b"):
        for i in range(6):
            write(tmp_path / d / f"f{i}", f"{d} {i}")
    real = folders._LISTDIR

    def listed_then_removed(folder):
        names = real(folder)
        if isinstance(folder, int) and "f5" in names:  # a folder's last names: the helper's half
            for gone in ("f4", "f5"):
                os.unlink(os.path.join(os.readlink(f"/proc/self/fd/{folder}"), gone))
        return names

    stated: list[list[str]] = []  # the names the walk stats itself, a call at a time
    real_here = folders._lstat_here

    def recorded(directory, fd, names, prefix, skipped):
        stated.append(list(names))
        return real_here(directory, fd, names, prefix, skipped)

    folders._LISTDIR, folders._lstat_here = listed_then_removed, recorded
    try:
        ids, rows, skipped = _walked(tmp_path, True)
    finally:
        folders._LISTDIR, folders._lstat_here = real, real_here
    assert answered == [True, True, True]  # the root ("a" and "b"), and both folders
    # Its own half of each folder, then only the names the helper could not stat (not f3 again).
    assert stated == [["a"], ["f0", "f1", "f2"], ["f4", "f5"], ["f0", "f1", "f2"], ["f4", "f5"]]
    assert ids == [f"{d}/f{i}" for d in ("a", "b") for i in range(4)]
    assert skipped == [(f"{d}/{n}", "cannot stat: No such file or directory", -1, -1, False) for d in ("a", "b") for n in ("f4", "f5")]
    alone = _walked(tmp_path, False)  # (f4 and f5 are gone now: nothing to say of them)
    assert alone[0] == ids and np.array_equal(alone[1], rows)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(2, 12), failed=st.sets(st.integers(0, 11)), gone=st.sets(st.integers(0, 11)))
def test_names_the_helper_could_not_stat_are_stat_ed_again_in_their_places(helpers, monkeypatch, n, failed, gone):
    """The helper says it could not stat some names (``failed``): the walk stats those again,
    finds them there or not (``gone``: removed in between), and its rows and what it passed
    over are a walk alone's, in the listing's order."""
    real_answer = stat_helper.StatHelper.answer  # (the fixture's, which counts answers)

    def some_failed(self):
        names = self.pending
        got = real_answer(self)
        if got is None:
            return None
        says = sorted(i for i in failed if i < len(names))
        for i in says:
            if i in gone:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(root, "d", names[i]))
        return got[0], says

    monkeypatch.setattr(stat_helper.StatHelper, "answer", some_failed)
    with tempfile.TemporaryDirectory() as tmp:
        root = tmp
        for i in range(n):
            write(Path(tmp) / "d" / f"f{i:02d}", "x" * i)
        shared = _walked(tmp, True)
        alone_ids = sorted(set(shared[0]))  # what is left now is what a walk alone lists
        alone = _walked(tmp, False)
        assert shared[0] == alone[0] == alone_ids and np.array_equal(shared[1], alone[1])
        half = [f"f{i:02d}" for i in range(n)][n // 2 :]
        removed = {half[i] for i in failed & gone if i < len(half)}
        assert [s[0] for s in shared[2]] == sorted(f"d/{name}" for name in removed)


@pytest.mark.parametrize("when", ["before the question", "with the question"])
def test_a_helper_that_dies_leaves_the_walk_to_stat_everything_itself(helpers, tmp_path, when):
    made, answered = helpers
    for d in "abcd":
        for i in range(5):
            write(tmp_path / d / f"f{i}", f"{d} {i}")
    real_ask = stat_helper.StatHelper.ask
    asked = []

    def ask_and_die(self, fd, directory, names):
        if len(asked) == 1:  # the root was shared; "a" is next
            if when == "before the question":
                self.process.kill()
                self.process.wait()
            else:  # a question it cannot read: it dies of it, before any answer
                self.process.stdin.write(stat_helper._LENGTH.pack(3) + b"xyz")
                self.process.stdin.flush()
                self.pending = names
                asked.append(True)
                return True
        took = real_ask(self, fd, directory, names)
        asked.append(took)
        return took

    stat_helper.StatHelper.ask = ask_and_die
    try:
        shared = _walked(tmp_path, True)
    finally:
        stat_helper.StatHelper.ask = real_ask
    alone = _walked(tmp_path, False)
    assert shared[0] == alone[0] and np.array_equal(shared[1], alone[1]) and shared[2] == alone[2]
    # The root answered; "a" not (the walk stat-ed its names itself); "b", "c" and "d" never handed over.
    assert made[0].broken and asked == [True, when != "before the question"] and answered == [True, False][: 1 + asked[1]]


def test_a_folder_is_not_split_while_the_compiled_loop_stats(helpers, monkeypatch, tmp_path):
    made, answered = helpers
    for d in "ab":
        for i in range(3):
            write(tmp_path / d / f"f{i}", f"{d} {i}")
    alone = _walked(tmp_path, False)
    used = []

    def compiled(fd, names):  # in place of simdoc.kernels_walk.stat_names: the same rows
        used.append(len(names))
        return folders.stat_rows([os.lstat(name, dir_fd=fd) for name in names]), False

    monkeypatch.setattr(folders, "_COMPILED", [compiled])
    shared = _walked(tmp_path, True)
    assert shared[0] == alone[0] and np.array_equal(shared[1], alone[1])
    assert used == [2, 3, 3] and answered == []  # every folder whole, in this process


def test_the_helper_stats_no_folder_but_the_one_the_walk_holds_open(tmp_path):
    write(tmp_path / "a" / "x", "x")
    write(tmp_path / "b" / "x", "y")
    st_a = os.stat(tmp_path / "a")
    fields = folders.FIELDS
    rows, failed = stat_server.serve(os.fsencode(tmp_path / "a"), st_a.st_dev, st_a.st_ino, b"x\0nothing", fields)
    want = os.lstat(tmp_path / "a" / "x")
    assert np.frombuffer(rows, np.int64).reshape(2, len(fields))[0].tolist() == [getattr(want, f) for f in fields]
    assert failed == [1]
    # A folder replaced since the walk opened it (another inode at that path): not stat-ed there.
    assert stat_server.serve(os.fsencode(tmp_path / "b"), st_a.st_dev, st_a.st_ino, b"x", fields) is None
    assert stat_server.serve(os.fsencode(tmp_path / "gone"), st_a.st_dev, st_a.st_ino, b"x", fields) is None


def test_an_answer_never_pairs_with_the_wrong_question(helpers, tmp_path):
    """A walk cut off between handing names to the helper and reading its answer (an error in its own
    half): the helper is not asked again, as its next answer would be the old one."""
    made, _ = helpers
    for d in "abc":
        for i in range(3):
            write(tmp_path / d / f"f{i}", f"{d} {i}")
    with folders.walk_helper(True):
        helper = stat_helper.current()
        fd = os.open(tmp_path / "a", os.O_RDONLY | os.O_DIRECTORY)
        try:
            assert not helper.ask(fd, str(tmp_path / "a"), ["f0"])  # not started yet
            assert not helper.ready(wait=True) and not helper.starting()  # asking does not start it
            helper.start()
            assert helper.ready(wait=True)
            assert helper.ask(fd, str(tmp_path / "a"), ["f1"])
            assert not helper.ask(fd, str(tmp_path / "a"), ["f2"])  # the answer to f1 was never read
        finally:
            os.close(fd)
        assert helper.broken
    assert helper.process is None


def test_pairs_at_two_jobs_with_the_helper_prints_what_one_job_prints(helpers, run, tmp_path):
    made, answered = helpers
    words = [f"w{i}" for i in range(400)]
    for d in ("x", "y", "z"):
        for i in range(8):
            text = " ".join(words[(7 * i + j) % 400] for j in range(60))
            write(tmp_path / "c" / d / f"{i}.txt", text + (f" {d}" if i % 2 else ""))
    one = run("pairs", tmp_path / "c", "--index", tmp_path / "i1", "-j", "1", "-t", "0.5")
    two = run("pairs", tmp_path / "c", "--index", tmp_path / "i2", "-j", "2", "-t", "0.5")
    assert one.exit_code == two.exit_code == 0, (one.stderr, two.stderr)
    assert records(two) == records(one) and records(one)
    assert not made  # a build's walk has no helper (it takes the compiled loop where it can)
    # An update, nothing changed: the walk splits its folders, and finds the same listing (nothing is read).
    again = run("pairs", tmp_path / "c", "--index", tmp_path / "i2", "-j", "2", "-t", "0.5", "-v")
    assert again.exit_code == 0 and records(again) == records(one)
    assert "shingle: up to date" in again.stderr
    assert len(made) == 1 and answered == [True] * 4  # the root (x, y, z), x/, y/ and z/
    # One file changed: read again, the same as a build of the corpus as it is now.
    write(tmp_path / "c" / "y" / "3.txt", "now something else entirely " * 5)
    changed = run("pairs", tmp_path / "c", "--index", tmp_path / "i2", "-j", "2", "-t", "0.5")
    fresh = run("pairs", tmp_path / "c", "--index", tmp_path / "i3", "-j", "1", "-t", "0.5")
    assert changed.exit_code == fresh.exit_code == 0 and records(changed) == records(fresh)
    assert len(made) == 2 and answered == [True] * 8


def test_no_helper_is_made_for_one_job_or_inside_another_walks_helper(monkeypatch, tmp_path):
    monkeypatch.setattr(stat_helper, "SPLIT_AT", 2)
    monkeypatch.setattr(folders, "_COMPILED", [False])
    for i in range(3):
        write(tmp_path / f"f{i}", "x")
    with folders.walk_helper(False):
        assert stat_helper.current() is None
        discover(tmp_path, columns=True)
    with folders.walk_helper(True):
        outer = stat_helper.current()
        with folders.walk_helper(True):
            assert stat_helper.current() is outer  # one helper a walk; a nested one uses it
        assert stat_helper.current() is outer
    assert stat_helper.current() is None and outer.process is None


def test_the_server_is_a_script_of_the_standard_library_alone():
    # Run by path with `python -I -S`: it must not import simdoc or numpy (neither is on its path).
    source = Path(stat_server.__file__).read_text()
    imports = [line.split()[1] for line in source.splitlines() if line.startswith(("import ", "from "))]
    assert imports and not any(name.split(".")[0] in ("simdoc", "numpy") for name in imports)


def test_a_walk_cut_off_while_the_helper_answers_ends_it(helpers, monkeypatch, tmp_path):
    """Ctrl-C in the walk's half of a large folder: the helper, writing an answer longer than a pipe
    holds, finds no reader and ends by itself (it is not left blocked, nor killed)."""
    made, _ = helpers
    for d in "ab":
        (tmp_path / d).mkdir()
        for i in range(4000):
            (tmp_path / d / f"f{i:04d}").touch()
    real = folders._lstat_here
    calls = []

    def interrupted(directory, fd, names, prefix, skipped):
        calls.append(len(names))
        if len(calls) == 3:  # the root's first half ("a"), a/'s, then b/'s
            raise KeyboardInterrupt
        return real(directory, fd, names, prefix, skipped)

    monkeypatch.setattr(folders, "_lstat_here", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _walked(tmp_path, True)
    assert calls == [1, 2000, 2000]
    assert made[0].process is None and made[0].ended == 0  # it exited on its own, with status 0


def test_a_large_folder_is_stat_ed_a_slice_at_a_time_while_the_helper_starts_then_shared(monkeypatch, tmp_path):
    """One flat folder (a scrape dumped in one place): the first folder the helper is asked about.
    The walk does not wait for it to start: it stats slices itself until the helper is ready."""
    monkeypatch.setattr(stat_helper, "SPLIT_AT", 4)
    monkeypatch.setattr(stat_helper, "SLICE", 3)
    monkeypatch.setattr(folders, "_COMPILED", [False])
    for i in range(20):
        write(tmp_path / f"f{i:02d}", f"text {i}")
    real_ready, real_here = stat_helper.StatHelper.ready, folders._lstat_here
    looks, calls = [], []

    def ready(self, wait=False):  # not ready for its first two looks, then as soon as it is
        looks.append(wait)
        return real_ready(self, True) if len(looks) > 2 else (real_ready(self, False) and False)

    def here(directory, fd, names, prefix, skipped):
        calls.append(names)
        return real_here(directory, fd, names, prefix, skipped)

    alone = _walked(tmp_path, False)
    monkeypatch.setattr(stat_helper.StatHelper, "ready", ready)
    monkeypatch.setattr(folders, "_lstat_here", here)
    shared = _walked(tmp_path, True)
    assert shared[0] == alone[0] and np.array_equal(shared[1], alone[1]) and shared[2] == alone[2]
    names = [f"f{i:02d}" for i in range(20)]
    # Two slices of three while it starts; of the 14 left, 7 here and 7 by the helper.
    assert calls == [names[0:3], names[3:6], names[6:13]]


def test_a_walk_of_another_thread_does_not_use_this_walks_helper(monkeypatch, tmp_path):
    import threading

    monkeypatch.setattr(stat_helper, "SPLIT_AT", 2)
    seen = []
    with folders.walk_helper(True):
        mine = stat_helper.current()
        other = threading.Thread(target=lambda: seen.append(stat_helper.current()))
        other.start()
        other.join()
    assert mine is not None and seen == [None]
