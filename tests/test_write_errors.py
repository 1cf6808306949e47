"""Output that cannot be written: a closed or full stdout, a full disk under the index (issue 17.6).

Each is one `Error:` line and exit 6, never a traceback; a full disk leaves
the index readable, with no temporary files holding the space.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import SAMPLE_CORPUS
from test_crash_safety import fresh_output, make_corpus, simdoc

from simdoc.cli import cli
from simdoc.errors import EXIT_WRITE
from simdoc.reports.check import check_index

DEV_FULL = Path("/dev/full")
needs_dev_full = pytest.mark.skipif(not DEV_FULL.exists(), reason="no /dev/full here")


def run_with_stdout(args, stdout, **kw) -> subprocess.CompletedProcess:
    """simdoc ARGS with stdout sent to ``stdout`` (a file object), or closed when it is None."""
    env = dict(os.environ)
    env.pop("SIMDOC_INDEX", None)
    extra = {"stdout": stdout} if stdout is not None else {"preexec_fn": lambda: os.close(1)}
    return subprocess.run(
        [sys.executable, "-m", "simdoc", *map(str, args)], stderr=subprocess.PIPE, text=True, env=env, timeout=120, **extra, **kw
    )


def assert_one_error(r: subprocess.CompletedProcess, *needles: str) -> None:
    assert r.returncode == EXIT_WRITE == 6, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr and "Exception ignored" not in r.stderr, r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, r.stderr
    for n in needles:
        assert n in r.stderr, (n, r.stderr)


@pytest.fixture(scope="module")
def sample_index(tmp_path_factory) -> Path:
    idx = tmp_path_factory.mktemp("w") / "idx"
    r = simdoc("pairs", SAMPLE_CORPUS, "--index", idx, "-q")
    assert r.returncode == 0, r.stderr
    return idx


# ---------------------------------------------------------------- stdout


@needs_dev_full
@pytest.mark.parametrize(
    "args",
    [
        ("pairs", "--index", "IDX"),
        ("pairs", "--index", "IDX", "-0"),
        ("pairs", "--index", "IDX", "--format", "table"),
        ("clusters", "--index", "IDX"),
        ("tune",),
        ("--help",),
    ],
)
def test_a_full_stdout_is_one_error_line(sample_index, args):
    args = [sample_index if a == "IDX" else a for a in args]
    with DEV_FULL.open("w") as full:
        r = run_with_stdout(args, full)
    assert_one_error(r, "cannot write the output to stdout: No space left on device")


@pytest.mark.parametrize("args", [("pairs", "--index", "IDX"), ("pairs", "--index", "IDX", "-0"), ("tune",), ("--version",)])
def test_a_closed_stdout_is_one_error_line(sample_index, args):
    args = [sample_index if a == "IDX" else a for a in args]
    r = run_with_stdout(args, None)
    assert_one_error(r, "stdout is closed", "> /dev/null")


def test_a_closed_stdout_is_fine_for_a_command_that_prints_nothing(sample_index):
    r = run_with_stdout(["check", "--index", sample_index], None)
    assert r.returncode == 0, r.stderr
    assert "is sound" in r.stderr


def test_a_closed_stderr_changes_nothing(sample_index):
    # Python has no sys.stderr then; simdoc used to die on sys.stderr.isatty().
    env = dict(os.environ)
    env.pop("SIMDOC_INDEX", None)
    r = subprocess.run(
        [sys.executable, "-m", "simdoc", "pairs", "--index", str(sample_index)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        timeout=120,
        preexec_fn=lambda: os.close(2),
    )
    assert r.returncode == 0
    assert len(r.stdout.splitlines()) == 5


# ---------------------------------------------------------------- a full disk under the index


class _NoSpaceOn:
    """Replaces an os function: the ``fail_at``-th call (from 0) raises ENOSPC; counts calls."""

    def __init__(self, real, fail_at: int | None) -> None:
        self.real, self.fail_at, self.calls = real, fail_at, 0

    def __call__(self, *args):
        self.calls += 1
        if self.calls - 1 == self.fail_at:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return self.real(*args)


def _update(corpus: Path, idx: Path, monkeypatch, name: str, fail_at: int | None):
    fake = _NoSpaceOn(getattr(os, name), fail_at)
    with monkeypatch.context() as m:
        m.setattr(os, name, fake)
        r = CliRunner().invoke(cli, ["pairs", str(corpus), "--index", str(idx), "-q", "-j", "1"])
    return r, fake.calls


@pytest.mark.parametrize("name", ["fsync", "pwrite"])
def test_no_space_for_the_index_at_every_write_keeps_it_readable(tmp_path, monkeypatch, name):
    corpus = tmp_path / "c"
    make_corpus(corpus, 30, seed=1)
    pristine = tmp_path / "pristine"
    assert simdoc("pairs", corpus, "--index", pristine, "-q", "-j", "1").returncode == 0
    make_corpus(corpus / "new", 8, seed=2)
    r, n_calls = _update(corpus, tmp_path / "count", monkeypatch, name, None)
    assert r.exit_code == 0, r.output
    expected = r.stdout
    assert n_calls > 2
    # Every fsync fails in turn; of the many pwrites, the first, one in the middle and the last.
    points = range(n_calls) if name == "fsync" else sorted({0, n_calls // 2, n_calls - 1})
    failed = 0
    for k in points:
        idx = tmp_path / f"idx-{name}-{k}"
        shutil.copytree(pristine, idx)
        r, _ = _update(corpus, idx, monkeypatch, name, k)
        if r.exit_code == 0:
            # A write that is only a note (who holds the lock) or a hint (fsync of the directory
            # after a rename) may fail without failing the run; the answer must still be right.
            assert r.stdout == expected, k
            continue
        failed += 1
        assert r.exit_code == EXIT_WRITE, (k, r.exit_code, r.output, r.exception)
        assert r.stdout == ""
        assert "Traceback" not in r.output
        assert r.stderr.startswith(f"Error: cannot write the index at {idx}: No space left on device"), (k, r.stderr)
        assert "hint: free some space" in r.stderr
        assert [p.name for p in idx.iterdir() if p.name.endswith(".tmp")] == [], k
        _, problems = check_index(idx)
        assert problems == [], (k, problems)
    assert failed >= len(points) // 2
    # With room again, the update completes and gives what a fresh build gives.
    idx = tmp_path / f"idx-{name}-{points[-1]}"
    again = simdoc("pairs", corpus, "--index", idx, "-q", "-j", "1")
    assert again.returncode == 0, again.stderr
    assert again.stdout == fresh_output(corpus, tmp_path)


# ---------------------------------------------------------------- a real full file system (root only)


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 4 MiB tmpfs, where the machine lets us mount one (root, not in every container)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode(errors='replace').strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _fill(mnt: Path, leave: int) -> Path:
    """Fill the file system but about ``leave`` bytes."""
    filler = mnt / "filler"
    with filler.open("wb", buffering=0) as fh:
        while shutil.disk_usage(mnt).free > leave:
            try:
                fh.write(b"\0" * min(1 << 16, shutil.disk_usage(mnt).free - leave or 1))
            except OSError:
                break
    return filler


def test_a_full_tmpfs_under_the_index(small_tmpfs, tmp_path):
    corpus = tmp_path / "c"
    make_corpus(corpus, 60, seed=3)
    idx = small_tmpfs / "idx"
    first = simdoc("pairs", corpus, "--index", idx, "-q", "-j", "1")
    assert first.returncode == 0, first.stderr
    make_corpus(corpus / "new", 200, seed=4)
    filler = _fill(small_tmpfs, 64 << 10)
    r = simdoc("pairs", corpus, "--index", idx, "-j", "1")
    assert_one_error(r, f"cannot write the index at {idx}: No space left on device")
    assert r.stdout == ""
    assert [p.name for p in idx.iterdir() if p.name.endswith(".tmp")] == []
    assert simdoc("check", "--index", idx).returncode == 0
    filler.unlink()
    again = simdoc("pairs", corpus, "--index", idx, "-q", "-j", "1")
    assert again.returncode == 0, again.stderr
    assert again.stdout == fresh_output(corpus, tmp_path)


def test_a_read_only_file_system_under_the_index(small_tmpfs, tmp_path):
    corpus = tmp_path / "c"
    make_corpus(corpus, 20, seed=5)
    idx = small_tmpfs / "idx"
    assert simdoc("pairs", corpus, "--index", idx, "-q").returncode == 0
    make_corpus(corpus / "new", 5, seed=6)
    assert subprocess.run(["mount", "-o", "remount,ro", str(small_tmpfs)]).returncode == 0
    try:
        r = simdoc("pairs", corpus, "--index", idx)
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(small_tmpfs)])
    assert_one_error(r, f"cannot write the index at {idx}: Read-only file system", "where you may write")


def test_a_full_tmpfs_under_the_index_on_a_cluster(small_tmpfs, tmp_path, cluster):
    """The workers write the index too (parts, signature rows, band keys, buckets): no room for
    them is the same one Error line and exit 6, the index stays sound, and with room again the
    same command gives the answer of a fresh build."""
    pytest.importorskip("distributed")
    corpus = tmp_path / "c"
    make_corpus(corpus, 60, seed=7)
    idx = small_tmpfs / "idx"
    cluster.start_worker()
    cluster.wait_for_workers(1)
    on_cluster = ("--scheduler", cluster.address)
    first = simdoc("pairs", corpus, "--index", idx, "-q", *on_cluster)
    assert first.returncode == 0, first.stderr
    make_corpus(corpus / "new", 200, seed=8)
    filler = _fill(small_tmpfs, 64 << 10)
    r = simdoc("pairs", corpus, "--index", idx, *on_cluster)
    assert_one_error(r, f"cannot write the index at {idx}: No space left on device")
    assert r.stdout == ""
    assert [p.name for p in idx.iterdir() if p.name.endswith(".tmp")] == []
    assert simdoc("check", "--index", idx).returncode == 0
    filler.unlink()
    again = simdoc("pairs", corpus, "--index", idx, "-q", *on_cluster)
    assert again.returncode == 0, again.stderr
    assert again.stdout == fresh_output(corpus, tmp_path)
    assert not (idx / "dask-parts").exists()


# ---------------------------------------------------------------- a new index where nothing may be written


@pytest.mark.parametrize("code", [errno.EROFS, errno.ENOSPC, errno.EACCES])
@pytest.mark.parametrize("where", ["idx", "a/b/idx"])
def test_a_new_index_that_cannot_be_made_is_exit_6(tmp_path, monkeypatch, code, where):
    """Issue 28 item 9: on a read-only file system the directory of a new index cannot be made,
    which was exit 4 (an index error) where README says 6. The error comes from mkdir, as it
    would from a real read-only mount."""
    from conftest import assert_clean_error

    place = tmp_path / "ro"
    place.mkdir()
    real = os.mkdir

    def mkdir(path, *args, **kw):
        if str(path).startswith(str(place)):
            raise OSError(code, os.strerror(code), str(path))
        return real(path, *args, **kw)

    monkeypatch.setattr(os, "mkdir", mkdir)
    r = CliRunner().invoke(cli, ["pairs", str(SAMPLE_CORPUS), "--index", str(place / where), "-q"])
    assert_clean_error(r, 6, f"cannot create the index directory {place / where}: {os.strerror(code)}")
    assert len([line for line in r.stderr.splitlines() if line.startswith("Error:")]) == 1
    assert list(place.iterdir()) == []
