"""`pairs --index` alone (no scan) prints a pair of exact copies only while both are still the
text indexed: a copy whose file moved is read again, as a stored pair is verified again."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from simdoc.cli import cli

TEXT = " ".join(f"w{i * 7 % 301}" for i in range(150))


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_a_copy_edited_since_indexing_is_left_out_not_printed_at_1(tmp_path):
    c, i = tmp_path / "c", tmp_path / "i"
    c.mkdir()
    (c / "a.txt").write_text(TEXT)
    (c / "b.txt").write_text(TEXT)
    lines = [json.dumps({"text": TEXT + " x"})] * 3 + [json.dumps({"text": "unrelated words here"})]
    (c / "m.jsonl").write_text("\n".join(lines) + "\n")
    first = run("pairs", c, "--index", i, "-t", "0.5")
    assert first.exit_code == 0, first.output
    assert "a.txt\tb.txt\t1.0000\t1.0000" in first.stdout
    assert "m.jsonl/#1\tm.jsonl/#2\t1.0000\t1.0000" in first.stdout
    # Other texts: b.txt (same size), and the second line of m.jsonl (its first and third unchanged).
    (c / "b.txt").write_text(TEXT[::-1])
    lines[1] = json.dumps({"text": " ".join(f"v{i * 11 % 293}" for i in range(150))})
    (c / "m.jsonl").write_text("\n".join(lines) + "\n")
    r = run("pairs", "--index", i, "-t", "0.5")
    assert r.exit_code == 0, r.output
    assert "b.txt" not in r.stdout and "m.jsonl/#2" not in r.stdout, r.stdout
    assert "m.jsonl/#1\tm.jsonl/#3\t1.0000\t1.0000" in r.stdout  # moved, read again, still the copies indexed
    assert "b.txt: changed since it was indexed; its pairs are left out" in r.stderr
    assert "m.jsonl/#2: changed since it was indexed; its pairs are left out" in r.stderr
    clusters = run("clusters", "--index", i, "-t", "0.5")
    assert clusters.exit_code == 0 and "b.txt" not in clusters.stdout, clusters.output
    # What the corpus holds now, as a scan finds it: the same pairs.
    rebuilt = run("pairs", c, "--index", tmp_path / "j", "-t", "0.5")
    assert r.stdout == rebuilt.stdout
    # The bytes indexed again, with another stat: printed again.
    (c / "b.txt").write_text(TEXT)
    again = run("pairs", "--index", i, "-t", "0.5")
    assert "a.txt\tb.txt\t1.0000\t1.0000" in again.stdout and "b.txt: changed" not in again.stderr, again.output
