"""store.directory: locks that cannot be subverted, full disks that leave the old index, readers that never wait."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TEXT_A, TEXT_C, assert_clean_error

from simdoc.errors import OutputError
from simdoc.reports.check import check_index
from simdoc.store.directory import LOCK, READERS


@pytest.fixture
def built(run, small_corpus, tmp_path) -> Path:
    idx = tmp_path / "idx"
    r = run("pairs", small_corpus, "--index", idx, "-q")
    assert r.exit_code == 0, r.stderr
    return idx


# ---------------------------------------------------------------- lock files (item 6)


@pytest.mark.parametrize("name", [LOCK, READERS])
def test_a_lock_file_replaced_by_a_symlink_is_refused_and_its_target_untouched(run, built, small_corpus, tmp_path, name):
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    (built / name).unlink(missing_ok=True)
    (built / name).symlink_to(target)
    for args in (("pairs", small_corpus, "--index", built), ("pairs", "--index", built), ("check", "--index", built)):
        r = run(*args)
        if name == LOCK and args[1] != small_corpus:
            continue  # readers never open the writer's lock
        assert_clean_error(r, 4, name, "symbolic link")
    assert target.read_text() == "keep me\n"


@pytest.mark.parametrize("name", [LOCK, READERS])
def test_a_dangling_lock_symlink_creates_nothing(run, built, small_corpus, tmp_path, name):
    target = tmp_path / "nowhere" / "created.txt"
    target.parent.mkdir()
    (built / name).unlink(missing_ok=True)
    (built / name).symlink_to(target)
    r = run("pairs", small_corpus, "--index", built, "--threshold", "0.9")
    assert_clean_error(r, 4, name)
    assert not target.exists()


@pytest.mark.parametrize("name", [LOCK, READERS])
def test_a_directory_in_place_of_a_lock_file_is_an_index_error(run, built, small_corpus, name):
    (built / name).unlink(missing_ok=True)
    (built / name).mkdir()
    r = run("pairs", small_corpus, "--index", built, "--threshold", "0.9")
    assert_clean_error(r, 4, name, "directory")
    assert "IsADirectoryError" not in r.stderr


@pytest.mark.parametrize("kind", ["symlink", "dangling symlink", "directory", "fifo", "hard link"])
def test_check_names_a_lock_file_that_every_writer_would_refuse(run, built, small_corpus, tmp_path, kind):
    """Issue 28 item 9: `check` said "sound" (it opens no writer lock) while every writer exited 4."""
    lock = built / LOCK
    lock.unlink(missing_ok=True)
    if kind == "symlink":
        (tmp_path / "target").write_text("")
        lock.symlink_to(tmp_path / "target")
    elif kind == "dangling symlink":
        lock.symlink_to(tmp_path / "nowhere")
    elif kind == "directory":
        lock.mkdir()
    elif kind == "fifo":
        os.mkfifo(lock)
    else:
        (tmp_path / "other").write_text("")
        os.link(tmp_path / "other", lock)
    assert_clean_error(run("pairs", small_corpus, "--index", built, "--threshold", "0.9"), 4, str(lock))
    r = run("check", "--index", built)
    assert r.exit_code == 4, (r.stdout, r.stderr)
    assert r.stdout.startswith(f"{lock} ") and len(r.stdout.splitlines()) == 1, r.stdout
    assert r.stderr == (
        f"Error: the index at {built} cannot be updated (1 problem)\n"
        "  hint: remove what the lines above name; simdoc makes new lock files\n"
    )
    assert not (tmp_path / "nowhere").exists()
    if kind == "directory":
        lock.rmdir()
    else:
        lock.unlink()
    assert run("check", "--index", built).exit_code == 0


def test_a_hard_linked_lock_file_is_not_truncated(run, built, small_corpus, tmp_path):
    other = tmp_path / "other.txt"
    other.write_text("another name of the same file\n")
    (built / LOCK).unlink(missing_ok=True)
    os.link(other, built / LOCK)
    r = run("pairs", small_corpus, "--index", built)
    assert_clean_error(r, 4, LOCK)
    assert other.read_text() == "another name of the same file\n"


# ---------------------------------------------------------------- a damaged manifest (item 7)


@pytest.mark.parametrize("rebuild", [False, True])
def test_a_directory_in_place_of_the_manifest_is_named_and_never_deleted(run, built, small_corpus, rebuild):
    """Issue 28 item 5: `--rebuild`, which the first error suggested, crashed in os.replace. A rename
    cannot put a file over a directory, and that directory may hold someone's files: each command
    says what is there and what to do, and leaves it (and the index's other files) as it was."""
    (built / "manifest.json").unlink()
    (built / "manifest.json").mkdir()
    (built / "manifest.json" / "notes.txt").write_text("mine\n")
    before = sorted(p.name for p in built.iterdir())
    commands = [("pairs", small_corpus, "--index", built, *(["--rebuild"] if rebuild else [])), ("pairs", "--index", built)]
    for args in [*commands, ("check", "--index", built), ("dedup", "--index", built)]:
        r = run(*args)
        assert_clean_error(r, 4, f"{built / 'manifest.json'} is a directory", "move or remove it")
        assert "IsADirectoryError" not in r.stderr and "no simdoc index" not in r.stderr
    assert (built / "manifest.json" / "notes.txt").read_text() == "mine\n"
    assert sorted(p.name for p in built.iterdir()) == before
    shutil.rmtree(built / "manifest.json")  # as the message says: then --rebuild works
    r = run("pairs", small_corpus, "--index", built, "--rebuild", "-q")
    assert r.exit_code == 0, r.stderr
    assert check_index(built)[1] == []


# ---------------------------------------------------------------- a full disk (item 10)


def _listing(idx: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(idx.iterdir()) if p.name not in (LOCK, READERS)}


class _DiskFull:
    """Make the n-th write or fsync of this process fail with ENOSPC (counting them when n is None)."""

    def __init__(self, monkeypatch, n: int | None) -> None:
        self.n, self.calls = n, 0
        for name in ("pwrite", "write", "fsync"):
            real = getattr(os, name)
            monkeypatch.setattr(os, name, self._wrap(real))

    def _wrap(self, real):
        def call(*args, **kw):
            self.calls += 1
            if self.calls == self.n:
                raise OSError(errno.ENOSPC, "No space left on device")
            return real(*args, **kw)

        return call


def _published_only(idx: Path) -> bool:
    """The directory holds the manifest, the lock files and the files the manifest names, nothing else."""
    manifest = json.loads((idx / "manifest.json").read_text())
    named = {f for stage in manifest["stages"].values() for f in stage["files"]}
    return {p.name for p in idx.iterdir()} - {LOCK, READERS, "manifest.json"} == named


def _update(corpus: Path, idx: Path) -> None:
    import simdoc

    list(simdoc.find_pairs(corpus, idx, jobs=1, threshold=0.5))


def test_a_write_that_fails_for_a_full_disk_leaves_the_old_index_and_no_temporary_file(small_corpus, tmp_path, monkeypatch):
    base = tmp_path / "base"
    _update(small_corpus, base)
    (small_corpus / "d.txt").write_text(TEXT_C + " with a new ending")
    (small_corpus / "a.txt").write_text(TEXT_A + " changed")
    with monkeypatch.context() as m:
        counter = _DiskFull(m, None)
        _update(small_corpus, shutil.copytree(base, tmp_path / "probe-copy"))
    total = counter.calls
    assert total > 10
    failed = 0
    for n in range(1, total + 1):
        idx = tmp_path / f"idx{n}"
        shutil.copytree(base, idx)
        before = _listing(idx)
        with monkeypatch.context() as m:
            _DiskFull(m, n)
            try:
                _update(small_corpus, idx)
            except OutputError as exc:  # a full disk is an error message naming the index (17.6)
                assert "No space left on device" in str(exc)
                failed += 1
                if _listing(idx) != before:
                    # The stages published before the failure stay: a sound index, nothing else.
                    assert _published_only(idx), n
                    assert check_index(idx)[1] == [], n
        # (A write that may fail did, the pid in the lock file or a directory fsync: the run went on.)
        assert not [p.name for p in idx.iterdir() if p.name.startswith(".")], n
        shutil.rmtree(idx)
    assert failed > total // 2


def test_a_first_build_that_fails_for_a_full_disk_leaves_no_directory(small_corpus, tmp_path, monkeypatch):
    with monkeypatch.context() as m:
        counter = _DiskFull(m, None)
        _update(small_corpus, tmp_path / "probe")
    for n in range(1, counter.calls + 1):
        idx = tmp_path / f"idx{n}"
        with monkeypatch.context() as m:
            _DiskFull(m, n)
            with contextlib.suppress(OutputError):
                _update(small_corpus, idx)
        # Before its first manifest the run removes what it made; after it, the manifest is the index.
        assert not idx.exists() or (idx / "manifest.json").exists(), (n, sorted(p.name for p in idx.iterdir()))
        if idx.exists():
            assert not [p.name for p in idx.iterdir() if p.name.startswith(".")], n


def test_a_failed_run_deletes_its_temporary_files_even_while_a_reader_holds_the_index(small_corpus, tmp_path, monkeypatch):
    idx = tmp_path / "idx"
    _update(small_corpus, idx)
    (small_corpus / "d.txt").write_text(TEXT_C + " with a new ending")
    fd = os.open(idx / READERS, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_SH)  # a reader is using the published files
    try:
        with monkeypatch.context() as m:
            _DiskFull(m, 8)
            with pytest.raises(OutputError):
                _update(small_corpus, idx)
        assert not [p.name for p in idx.iterdir() if p.name.startswith(".")]
    finally:
        os.close(fd)


# ---------------------------------------------------------------- readers and a busy writer (item 11)


@contextlib.contextmanager
def _writer_busy(idx: Path, note: bytes | None = None):
    """Hold the writer's lock as another simdoc run would (a separate open file description),
    with its note (by default, this process's)."""
    fd = os.open(idx / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()} since a while\n".encode() if note is None else note, 0)
    try:
        yield
    finally:
        os.close(fd)


def test_readers_never_wait_for_or_fail_on_a_writer(run, built, small_corpus, tmp_path):
    expected = {
        ("pairs",): run("pairs", "--index", built).stdout,
        ("clusters",): run("clusters", "--index", built).stdout,
        ("dedup",): run("dedup", "--index", built).stdout,
        ("stats",): run("stats", "--index", built).stdout,
        ("check",): run("check", "--index", built).stdout,
        ("query", str(small_corpus / "a.txt")): run("query", str(small_corpus / "a.txt"), "--index", built).stdout,
        ("signature",): "",
        ("index",): "",
    }
    assert expected[("pairs",)] == "a.txt\tb.txt\t1.0000\t1.0000\n"
    with _writer_busy(built):
        for args, out in expected.items():
            r = run(*args, "--index", built)
            assert r.exit_code == 0, (args, r.exit_code, r.stderr)
            assert r.stdout == out, args
        # show reads the documents from a CORPUS named with it, whose index it brings up to date:
        # a writer (and on --index alone it reads nothing: see tests/test_index_trust.py).
        assert_clean_error(run("show", small_corpus, "a.txt", "b.txt", "--index", built), 5, "being written by another")


def test_a_reader_that_must_build_a_stage_is_a_writer(run, built):
    with _writer_busy(built):
        r = run("pairs", "--index", built, "--threshold", "0.9")  # re-bands: a write
        assert_clean_error(r, 5, "being written by another simdoc run", f"pid {os.getpid()} since a while")
    r = run("pairs", "--index", built, "--threshold", "0.9")
    assert r.exit_code == 0 and r.stdout == "a.txt\tb.txt\t1.0000\t1.0000\n"
    with _writer_busy(built):  # now built: reading only
        r = run("pairs", "--index", built, "--threshold", "0.9")
        assert r.exit_code == 0 and r.stdout == "a.txt\tb.txt\t1.0000\t1.0000\n"


def test_a_lock_note_of_a_process_that_has_ended_is_not_named_as_the_holder(run, built):
    """The note in the lock file is the last writer's: one that has ended (the holder has just
    taken the lock and not yet written its own, say) is not who holds the index now."""
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    for note in (f"pid {ended.stdout.strip()} since 2026-01-01 00:00:00\n".encode(), b"", b"pid 99999999999999999999 since x\n"):
        with _writer_busy(built, note):
            r = run("pairs", "--index", built, "--threshold", "0.7")  # re-bands: a write
        assert_clean_error(r, 5, "being written by another simdoc run (another process)")


def test_a_parts_folder_is_never_made_through_a_link(tmp_path):
    """store.names.parts_folder: every stage that writes Dask parts asks it for its folder."""
    from simdoc.store.names import PARTS, parts_folder

    index, outside = tmp_path / "idx", tmp_path / "outside"
    index.mkdir()
    outside.mkdir()
    assert parts_folder(index, "scan") == (index / PARTS / "scan").absolute() and (index / PARTS / "scan").is_dir()
    (index / PARTS / "band-0123456789abcdef").symlink_to(outside)
    assert parts_folder(index, "band-0123456789abcdef") is None
    (index / PARTS / "scan").rmdir()
    (index / PARTS / "band-0123456789abcdef").unlink()
    (index / PARTS).rmdir()
    (index / PARTS).symlink_to(outside)
    assert parts_folder(index) is None and parts_folder(index, "scan") is None
    assert list(outside.iterdir()) == []  # nothing was made where the links point
