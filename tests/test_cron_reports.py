"""What a cron job sees: skipped files counted even with --quiet, listed by `stats --skipped`, and a true time."""

from __future__ import annotations

import json
import re
import time

import pytest
from conftest import TEXT_A, TEXT_C, write


@pytest.fixture
def corpus_with_skips(tmp_path):
    root = tmp_path / "c"
    write(root / "a.txt", TEXT_A)
    write(root / "b.txt", TEXT_A)
    write(root / "c.txt", TEXT_C)
    for i in range(25):
        write(root / "bin" / f"blob{i:02d}.dat", b"\x00\x01binary")
    (root / "link.txt").symlink_to(root / "a.txt")
    return root


SKIPPED = 26  # 25 binary files and a symbolic link


@pytest.mark.parametrize("command", ["pairs", "clusters", "dedup"])
def test_quiet_still_says_how_many_files_were_skipped(run, corpus_with_skips, tmp_path, command):
    idx = tmp_path / "idx"
    for _ in range(2):  # when they are found, and on every later run
        r = run(command, corpus_with_skips, "--index", idx, "-q")
        assert r.exit_code == 0, r.stderr
        lines = r.stderr.splitlines()
        assert len(lines) == 1, r.stderr
        assert re.match(rf"^simdoc: {SKIPPED} files skipped; `simdoc stats --skipped --index .*` lists them$", lines[0])
        assert str(idx) in lines[0]
    r = run(command, "--index", idx, "-q")  # from the index alone, too
    assert r.stderr.startswith(f"simdoc: {SKIPPED} files skipped")


def test_quiet_says_nothing_when_nothing_was_skipped(run, small_corpus, tmp_path):
    r = run("pairs", small_corpus, "--index", tmp_path / "idx", "-q")
    assert r.exit_code == 0 and r.stderr == ""


@pytest.mark.parametrize("command", ["clusters", "dedup"])
def test_every_summary_counts_the_skipped_files(run, corpus_with_skips, tmp_path, command):
    r = run(command, corpus_with_skips, "--index", tmp_path / "idx")
    assert r.exit_code == 0, r.stderr
    assert f"({SKIPPED} files skipped)" in r.stderr.splitlines()[-1]


def test_stats_lists_the_skipped_files_from_the_manifest(run, corpus_with_skips, tmp_path):
    idx = tmp_path / "idx"
    assert run("pairs", corpus_with_skips, "--index", idx, "-q").exit_code == 0
    r = run("stats", "--index", idx, "--skipped")
    assert r.exit_code == 0, r.stderr
    rows = [line.split("\t") for line in r.stdout.splitlines()]
    assert len(rows) == SKIPPED and all(len(row) == 2 for row in rows)
    assert rows[0] == ["bin/blob00.dat", "binary file (NUL byte), skipped"]
    assert rows[-1][0] == "link.txt" and "symbolic link" in rows[-1][1]
    j = run("stats", "--index", idx, "--skipped", "--format", "json")
    assert [json.loads(line) for line in j.stdout.splitlines()] == [{"id": a, "reason": b} for a, b in rows]
    text = run("stats", "--index", idx)
    assert f"{SKIPPED} files skipped" in text.stdout and "stats --skipped" in text.stdout


def test_the_summary_time_covers_the_printing(run, small_corpus, tmp_path, monkeypatch):
    import simdoc.cli.reports as reports
    import simdoc.cli.stages as cli_module

    real_clock = time.perf_counter
    slow = {"by": 0.0}
    monkeypatch.setattr(time, "perf_counter", lambda: real_clock() + slow["by"])

    def slow_printing(real):
        def write(*args, **kw):
            out = real(*args, **kw)
            slow["by"] += 1000.0  # as if the reader of stdout took 1000 s
            return out

        return write

    monkeypatch.setattr(cli_module, "write_records", slow_printing(cli_module.write_records))
    monkeypatch.setattr(reports, "emit", slow_printing(reports.emit))
    for command in ("pairs", "clusters", "dedup"):
        r = run(command, small_corpus, "--index", tmp_path / "idx")
        assert r.exit_code == 0, r.stderr
        seconds = float(re.search(r" in ([\d.]+) s$", r.stderr.splitlines()[-1]).group(1))
        assert seconds >= 1000, (command, r.stderr)
