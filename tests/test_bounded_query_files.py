"""A JSON Lines file of queries is not held, whatever its size (issue 28 item 7).

`simdoc query` read a JSON Lines file of queries whole: every member's text
at once, so a 4 GB file of queries held 4 GB of text. Now a file over
HELD_BYTES (or a compressed one) has its members' texts spilled to a
temporary file as it is read and read back one at a time as the batches take
them: what is held is each member's id and where its text is. What it prints
(ids, order, warnings) is what reading it whole printed.
"""

from __future__ import annotations

import gzip
import json
import random

import pytest
from click.testing import CliRunner

from simdoc.cli import cli
from simdoc.corpus import file_texts
from conftest import warc_record
from test_bounded_long_queries import _peak_mb

MB = 1 << 20


@pytest.fixture(scope="module")
def tiny_index(tmp_path_factory):
    root = tmp_path_factory.mktemp("idx")
    corpus = root / "c"
    corpus.mkdir()
    words = [f"w{i}" for i in range(300)]
    rng = random.Random(3)
    for name in ("a.txt", "b.txt"):
        (corpus / name).write_text(" ".join(rng.choice(words) for _ in range(200)))
    r = CliRunner().invoke(cli, ["pairs", str(corpus), "--index", str(root / "i"), "-q"])
    assert r.exit_code == 0, r.stderr
    return root / "i", corpus


def _queries(path, size: int, seed: int) -> None:
    rng = random.Random(seed)
    with open(path, "wb") as f:
        n = 0
        while f.tell() < size:
            n += 1
            text = "".join(rng.choices("abcdefgh ", k=8000))
            if path.suffix == ".warc":
                f.write(warc_record(f"http://example.org/{n}", text, n))
            else:
                f.write(json.dumps({"id": n, "text": text}).encode() + b"\n")


@pytest.mark.parametrize("suffix", [".jsonl", ".warc"])
def test_a_big_file_of_queries_costs_no_more_than_a_small_one(tmp_path, tiny_index, suffix):
    index, _ = tiny_index
    peaks = []
    for size in (3 * MB, 30 * MB):
        path = tmp_path / f"q{size}{suffix}"
        _queries(path, size, size)
        peak, r = _peak_mb(["query", path, "--index", index, "--no-verify", "--format", "jsonl"])
        assert r.returncode == 0, r.stderr
        assert b"queries, 0 matches" in r.stderr, r.stderr
        peaks.append(peak)
    # Before: every member's text held: 191 and 219 MB (JSON Lines). Now one batch at a time: 191 and 191 MB.
    assert peaks[1] < peaks[0] + 10, peaks


def _mixed(path, compress: bool) -> None:
    base = (path.parent / "base.txt").read_text() if (path.parent / "base.txt").exists() else None
    lines = []
    for n in range(40):
        if n % 7 == 3:
            lines.append("not json")
        elif n % 11 == 5:
            lines.append(json.dumps({"id": "x", "body": "no text"}))
        else:
            text = base if (base and n % 5 == 0) else f"query {n} " + " ".join(f"w{(n * k) % 300}" for k in range(60))
            lines.append(json.dumps({"id": n % 6 if n % 2 else "dup", "text": text + "\ud800" * (n == 9)}))
    raw = ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")
    path.write_bytes(gzip.compress(raw) if compress else raw)


@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize("fmt", ["tsv", "jsonl"])
def test_a_spilled_file_of_queries_prints_what_reading_it_whole_printed(tmp_path, tiny_index, monkeypatch, compress, fmt):
    index, corpus = tiny_index
    (tmp_path / "base.txt").write_text((corpus / "a.txt").read_text())
    path = tmp_path / ("q.jsonl.gz" if compress else "q.jsonl")
    _mixed(path, compress)
    outs = []
    for held in (1 << 40, 0):  # whole, then spilled
        if not compress or held == 0:
            monkeypatch.setattr(file_texts, "HELD_BYTES", held)
        else:  # a compressed file is always spilled: its whole reading, by hand
            monkeypatch.setattr(file_texts, "compression_of", lambda p: None)
            monkeypatch.setattr(file_texts, "HELD_BYTES", 1 << 40)
        r = CliRunner().invoke(cli, ["query", str(path), "--index", str(index), "--id-field", "id", "--format", fmt, "-t", "0.1"])
        monkeypatch.undo()
        outs.append((r.exit_code, r.stdout, r.stderr))
    assert outs[0] == outs[1]
    assert "an id that repeats" in outs[0][2] and "not valid JSON" in outs[0][2] and outs[0][1].count("\n") > 3


def test_a_spilled_warc_file_of_queries_prints_what_reading_it_whole_printed(tmp_path, tiny_index, monkeypatch):
    index, corpus = tiny_index
    base = (corpus / "a.txt").read_text()
    crawl = tmp_path / "crawl.warc"
    records = [warc_record(f"http://example.org/{n % 4}", base if n % 5 == 0 else f"page {n} " + "w1 w2 " * n, n) for n in range(1, 20)]
    crawl.write_bytes(b"".join(records) + b"WARC/1.0\r\nbroken")
    outs = []
    for held in (1 << 40, 0):  # whole, then spilled
        monkeypatch.setattr(file_texts, "HELD_BYTES", held)
        r = CliRunner().invoke(cli, ["query", str(crawl), "--index", str(index), "-t", "0.1"])
        outs.append((r.exit_code, r.stdout, r.stderr))
    assert outs[0] == outs[1]
    assert "#<urn:uuid:" in outs[0][1] and "record 20" in outs[0][2] and outs[0][1].count("\n") >= 3, outs[0]


@pytest.mark.parametrize("suffix", [".jsonl", ".warc"])
def test_a_file_of_queries_that_cannot_be_spilled_is_one_error_exit_6(tmp_path, tiny_index, monkeypatch, suffix):
    # A full $TMPDIR while the members' texts are written out: one Error line and the documented
    # exit 6, never a traceback, and never taken for a fault of the queries' own file.
    import errno
    import tempfile

    index, _ = tiny_index
    path = tmp_path / f"q{suffix}"
    _queries(path, 200_000, 5)
    real = tempfile.TemporaryFile

    class Full:
        def __init__(self, *args, **kwargs):
            self.file = real(*args, **kwargs)
            self.written = 0

        def write(self, raw):
            self.written += len(raw)
            if self.written > 50_000:
                raise OSError(errno.ENOSPC, "No space left on device")
            return self.file.write(raw)

        def __getattr__(self, name):
            return getattr(self.file, name)

    monkeypatch.setattr(file_texts, "HELD_BYTES", 1000)
    monkeypatch.setattr(file_texts.tempfile, "TemporaryFile", Full)
    r = CliRunner().invoke(cli, ["query", str(path), "--index", str(index), "--no-verify"])
    assert r.exit_code == 6, (r.exit_code, r.stderr, r.exception)
    assert r.stderr.startswith("Error: cannot write the queries' texts to a temporary file in "), r.stderr
    assert "No space left on device" in r.stderr and "Traceback" not in r.stderr
    assert r.stdout == ""
