"""A run killed at any point leaves a readable index; concurrent writers are serialised."""

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from simdoc.cli import cli
from simdoc.store.directory import IndexStore

FAULT_POINTS = [
    "publish:verified",
    "publish:docs",
    "publish:minhash",
    "publish:signatures",
    "publish:bands",
    "publish:buckets",
    "manifest:before",
    "manifest:after",
]


def simdoc(*args, env_extra=None, timeout=120) -> subprocess.CompletedProcess:
    env = dict(os.environ, **(env_extra or {}))
    env.pop("SIMDOC_INDEX", None)
    return subprocess.run(
        [sys.executable, "-m", "simdoc", *map(str, args)], capture_output=True, text=True, env=env, timeout=timeout
    )


def make_corpus(root: Path, n: int, seed: int) -> None:
    rng = random.Random(seed)
    words = "amber basil cedar delta ember fjord grove heron iris jade kelp lotus".split()
    for i in range(n):
        p = root / f"d{i % 7}" / f"doc{i:04d}.txt"
        p.parent.mkdir(parents=True, exist_ok=True)
        body = " ".join(rng.choice(words) for _ in range(150))
        p.write_text(body, encoding="utf-8")
        if i % 5 == 0:
            (root / f"d{i % 7}" / f"copy{i:04d}.txt").write_text(body + " tail", encoding="utf-8")


def fresh_output(corpus: Path, tmp: Path, *options: str) -> str:
    r = simdoc("pairs", corpus, "--index", tmp / "fresh", "-q", "-j", "1", *options)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.parametrize("point", FAULT_POINTS)
def test_killed_at_each_write_point_leaves_a_usable_index(tmp_path, point):
    corpus = tmp_path / "c"
    make_corpus(corpus, 40, seed=1)
    idx = tmp_path / "idx"
    assert simdoc("pairs", corpus, "--index", idx, "-q", "-j", "1").returncode == 0
    old = simdoc("pairs", "--index", idx, "-q").stdout
    # The corpus grows; the update dies at `point`.
    make_corpus(corpus / "new", 10, seed=2)
    # A near copy of an old document, whose id sorts first: every old document's number
    # changes, so that old buckets read with the new docs table would name other documents.
    probe = tmp_path / "probe.txt"
    probe.write_text((corpus / "d0" / "doc0000.txt").read_text(encoding="utf-8"), encoding="utf-8")
    (corpus / "0-new").mkdir()
    (corpus / "0-new" / "probe-copy.txt").write_text(probe.read_text(encoding="utf-8") + " again", encoding="utf-8")
    old_answer = _answer(idx, probe)
    died = simdoc("pairs", corpus, "--index", idx, "-q", "-j", "1", "--threshold", "0.5", env_extra={"SIMDOC_FAULT": point})
    assert died.returncode == 75, (point, died.stderr)
    # Whatever was left is sound, and a query answers from one build: the old one or the new.
    chk = simdoc("check", "--index", idx)
    assert chk.returncode == 0, (point, chk.stdout, chk.stderr)
    left = _answer(idx, probe)
    readable = simdoc("pairs", "--index", idx, "-q")
    assert readable.returncode == 0, readable.stderr
    # ...and the next full run gives exactly what a fresh build gives.
    again = simdoc("pairs", corpus, "--index", idx, "-q", "-j", "1", "--threshold", "0.5")
    assert again.returncode == 0, again.stderr
    assert again.stdout == fresh_output(corpus, tmp_path, "--threshold", "0.5")
    assert old  # the old index had pairs to lose
    new_answer = _answer(idx, probe)
    assert "d0/doc0000.txt" in old_answer[1] and "0-new/probe-copy.txt" not in old_answer[1]
    assert "0-new/probe-copy.txt" in new_answer[1]
    assert left in (old_answer, new_answer), (point, left)


def _answer(idx: Path, probe: Path) -> tuple[int, str]:
    """What `simdoc query` says of ``probe`` on ``idx``: (exit code, stdout); never a traceback."""
    r = simdoc("query", probe, "--index", idx, "--threshold", "0.9", "-q")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode in (0, 4), r.stderr
    return r.returncode, r.stdout


def test_sigkill_at_random_moments(tmp_path):
    """Runs killed at random instants, first builds, updates and rebuilds: each time, what is
    left passes `check`, and `query` answers as the index before the run or as the index the
    run would have made (the next complete run's), never with a mix of the two."""
    corpus = tmp_path / "c"
    make_corpus(corpus, 400, seed=3)
    probe = tmp_path / "probe.txt"
    probe.write_text((corpus / "d0" / "doc0000.txt").read_text(encoding="utf-8"), encoding="utf-8")
    idx = tmp_path / "idx"
    rng = random.Random(7)
    env = dict(os.environ)
    env.pop("SIMDOC_INDEX", None)
    old = _answer(idx, probe)  # no index yet: a clean exit 4
    assert old == (4, "")
    for attempt in range(4):
        # Each run adds a near copy of the probe, so that the old and the new answer differ; its
        # id sorts first, so that every document's number changes and a mix would show.
        (corpus / f"{attempt}-new").mkdir()
        (corpus / f"{attempt}-new" / "probe-copy.txt").write_text(probe.read_text(encoding="utf-8") + f" round {attempt}")
        how = ["--rebuild"] if attempt % 2 else []
        proc = subprocess.Popen(
            [sys.executable, "-m", "simdoc", "pairs", str(corpus), "--index", str(idx), "-q", "-j", "2", *how],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        time.sleep(rng.uniform(0.05, 1.2))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        chk = simdoc("check", "--index", idx)
        assert "Traceback" not in chk.stderr, chk.stderr
        if (idx / "manifest.json").exists():
            assert chk.returncode == 0, (attempt, chk.stdout, chk.stderr)
        else:  # killed before its first manifest: still no index, and check says so
            assert chk.returncode == 4 and "no simdoc index" in chk.stderr, chk.stderr
        left = _answer(idx, probe)
        # The next complete run carries on from what was left: its answer is the new one.
        done = simdoc("pairs", corpus, "--index", idx, "-q", "-j", "2")
        assert done.returncode == 0, done.stderr
        new = _answer(idx, probe)
        assert new[0] == 0 and f"{attempt}-new/probe-copy.txt" in new[1]
        assert left in (old, new), (attempt, left, old, new)
        old = new
    final = simdoc("pairs", corpus, "--index", idx, "-q")
    assert final.returncode == 0, final.stderr
    assert final.stdout == fresh_output(corpus, tmp_path)


def test_stages_of_two_builds_are_named_by_check_and_refused_by_query(tmp_path):
    """Stages run one by one can leave new shingles under old signatures and buckets: `check`
    names each stage out of date (exit 0: nothing is damaged), and `query`, which changes
    nothing, refuses them with one line instead of reading buckets that name other documents."""
    corpus = tmp_path / "c"
    make_corpus(corpus, 20, seed=10)
    idx = tmp_path / "idx"
    runner = CliRunner()
    for args in (["shingle", str(corpus)], ["signature"], ["index"]):
        r = runner.invoke(cli, [*args, "--index", str(idx), "-q"])
        assert r.exit_code == 0, r.output
    probe = corpus / "d0" / "doc0000.txt"
    before = runner.invoke(cli, ["query", str(probe), "--index", str(idx)])
    assert before.exit_code == 0 and "d0/doc0000.txt\t1.0000" in before.stdout
    (corpus / "0-first.txt").write_text("a document whose id sorts before every other one", encoding="utf-8")
    assert runner.invoke(cli, ["shingle", str(corpus), "--index", str(idx), "-q"]).exit_code == 0
    chk = runner.invoke(cli, ["check", "--index", str(idx)])
    assert chk.exit_code == 0 and chk.stdout == "", chk.output
    assert "check: signature: out of date" in chk.stderr and "check: index: out of date" in chk.stderr
    r = runner.invoke(cli, ["query", str(probe), "--index", str(idx)])
    assert r.exit_code == 4 and r.stdout == ""
    assert "the signature stage of the index" in r.stderr and "built from another shingle build" in r.stderr
    assert "Traceback" not in r.output
    # A pairs run brings every stage up to date, and the query answers again.
    assert runner.invoke(cli, ["pairs", "--index", str(idx), "-q"]).exit_code == 0
    after = runner.invoke(cli, ["query", str(probe), "--index", str(idx)])
    assert after.exit_code == 0 and after.stdout == before.stdout


@pytest.mark.parametrize("point", ["manifest:after", "publish:verified"])
def test_a_new_report_killed_before_it_printed_leaves_its_pairs_to_the_next(tmp_path, point):
    """Issue 18.2: after a `--new` run killed between publishing its documents and printing
    them, the next report (which adds documents of its own) has the killed run's pairs too:
    `--new` means new since the last report that completed."""
    corpus = tmp_path / "c"
    make_corpus(corpus, 20, seed=11)
    idx = tmp_path / "idx"
    first = simdoc("pairs", corpus, "--index", idx, "--new", "-q", "-j", "1")
    assert first.returncode == 0 and first.stdout, first.stderr
    body = (corpus / "d0" / "doc0000.txt").read_text(encoding="utf-8")
    (corpus / "late").mkdir()
    (corpus / "late" / "copy.txt").write_text(body + " late", encoding="utf-8")
    died = simdoc("pairs", corpus, "--index", idx, "--new", "-q", "-j", "1", env_extra={"SIMDOC_FAULT": point})
    assert died.returncode == 75 and died.stdout == "", died.stderr
    # The next night brings a near copy of its own.
    (corpus / "later").mkdir()
    (corpus / "later" / "copy.txt").write_text(body + " later", encoding="utf-8")
    report = simdoc("pairs", corpus, "--index", idx, "--new", "-q", "-j", "1")
    assert report.returncode == 0, report.stderr
    pairs = {tuple(line.split("\t")[:2]) for line in report.stdout.splitlines()}
    assert ("d0/doc0000.txt", "late/copy.txt") in pairs and ("late/copy.txt", "later/copy.txt") in pairs, pairs
    assert ("d0/doc0000.txt", "later/copy.txt") in pairs
    # That report completed: the one after it has nothing new.
    again = simdoc("pairs", corpus, "--index", idx, "--new", "-q", "-j", "1")
    assert again.returncode == 0 and again.stdout == "", again.stdout


def test_second_writer_fails_fast_with_exit_5(tmp_path):
    corpus = tmp_path / "c"
    make_corpus(corpus, 10, seed=4)
    idx = tmp_path / "idx"
    with IndexStore(idx).writing():
        r = simdoc("pairs", corpus, "--index", idx)
    assert r.returncode == 5
    assert r.stdout == ""
    assert "being written by another simdoc run" in r.stderr and f"pid {os.getpid()}" in r.stderr
    assert "--wait" in r.stderr


def test_second_writer_waits_with_wait(tmp_path):
    corpus = tmp_path / "c"
    make_corpus(corpus, 10, seed=4)
    idx = tmp_path / "idx"
    released = threading.Event()

    def hold():
        with IndexStore(idx).writing():
            time.sleep(0.8)
        released.set()

    t = threading.Thread(target=hold)
    t.start()
    time.sleep(0.1)
    r = simdoc("pairs", corpus, "--index", idx, "--wait", "30", "-q")
    t.join()
    assert released.is_set()
    assert r.returncode == 0, r.stderr
    assert r.stdout == fresh_output(corpus, tmp_path)


def test_two_concurrent_writers_both_finish_correctly(tmp_path):
    corpus = tmp_path / "c"
    make_corpus(corpus, 300, seed=5)
    idx = tmp_path / "idx"
    env = dict(os.environ)
    env.pop("SIMDOC_INDEX", None)
    cmd = [sys.executable, "-m", "simdoc", "pairs", str(corpus), "--index", str(idx), "-q", "--wait", "60"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1] for o in outs]
    expected = fresh_output(corpus, tmp_path)
    assert outs[0][0] == outs[1][0] == expected
    assert simdoc("check", "--index", idx).returncode == 0


def test_lock_left_by_a_dead_process_is_taken_over(tmp_path):
    corpus = tmp_path / "c"
    make_corpus(corpus, 10, seed=6)
    idx = tmp_path / "idx"
    # A writer that dies while holding the lock: the kernel drops its flock.
    code = (
        "import os, sys; from simdoc.store.directory import IndexStore\n"
        f"cm = IndexStore({str(idx)!r}).writing(); cm.__enter__(); os._exit(9)\n"
    )
    assert subprocess.run([sys.executable, "-c", code]).returncode == 9
    assert "pid" in (idx / "lock").read_text()
    r = simdoc("pairs", corpus, "--index", idx, "-q")
    assert r.returncode == 0, r.stderr


def test_a_writer_waiting_on_a_removed_lock_file_takes_the_new_one(tmp_path):
    import fcntl

    idx = tmp_path / "idx"
    idx.mkdir()
    first = os.open(idx / "lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(first, fcntl.LOCK_EX)
    inside = threading.Event()
    leave = threading.Event()

    def second_writer():
        with IndexStore(idx).writing(wait=30):
            inside.set()
            leave.wait(10)

    t = threading.Thread(target=second_writer)
    t.start()
    time.sleep(0.2)  # the second writer now waits on the first lock file
    # The first writer gives up on a directory it made: it removes the lock file, then unlocks.
    os.unlink(idx / "lock")
    os.close(first)
    assert inside.wait(10)
    # The second writer holds the lock at the path, so a third one cannot get in.
    third = os.open(idx / "lock", os.O_RDWR)
    try:
        with pytest.raises(BlockingIOError):
            fcntl.flock(third, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(third)
        leave.set()
        t.join()


def test_reader_keeps_its_files_while_a_writer_replaces_them(tmp_path):
    from simdoc.store.loaded import open_index

    corpus = tmp_path / "c"
    make_corpus(corpus, 20, seed=8)
    idx = tmp_path / "idx"
    assert simdoc("pairs", corpus, "--index", idx, "-q").returncode == 0
    store = IndexStore(idx)
    with store.reading():
        loaded = open_index(idx)
        old_files = set(loaded.stage("signature")["files"])
        # A writer rebuilds with other parameters while we read.
        r = simdoc("pairs", corpus, "--index", idx, "-q", "--num-perm", "64", "--rebuild")
        assert r.returncode == 0, r.stderr
        assert all((idx / f).exists() for f in old_files)
        assert loaded.signatures().shape[1] == 128
    # The next writer cleans up what no stage refers to any more.
    assert simdoc("pairs", corpus, "--index", idx, "-q", "--threshold", "0.9").returncode == 0
    assert not any((idx / f).exists() for f in old_files)


def test_check_reports_a_flipped_byte(tmp_path):
    corpus = tmp_path / "c"
    make_corpus(corpus, 20, seed=9)
    idx = tmp_path / "idx"
    runner = CliRunner()
    assert runner.invoke(cli, ["pairs", str(corpus), "--index", str(idx), "-q"]).exit_code == 0
    ok = runner.invoke(cli, ["check", "--index", str(idx)])
    assert ok.exit_code == 0 and ok.stdout == ""
    target = next(idx.glob("signatures.*.npy"))
    raw = bytearray(target.read_bytes())
    raw[-1] ^= 0xFF
    target.write_bytes(bytes(raw))
    bad = runner.invoke(cli, ["check", "--index", str(idx)])
    assert bad.exit_code == 4
    assert target.name in bad.stdout and "checksum mismatch" in bad.stdout
    # pairs refuses to use it too.
    r = runner.invoke(cli, ["pairs", "--index", str(idx)])
    assert r.exit_code == 4 and "checksum mismatch" in r.stderr


