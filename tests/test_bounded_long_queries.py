"""A query's own text is not held, whatever its length (issue 28 item 7, the last part).

`simdoc query` read a query file (or stdin) whole and lowercased a copy of it:
a 34 MB query of base64 took 0.54 GB, a 136 MB one 0.78 GB. Now a plain file
over LARGE_CHARS bytes (or a compressed one) is streamed, once to be signed and
again for each pass of each exact comparison, and long text on stdin is
copied to an anonymous temporary file first (simdoc.corpus.long_text). What it
prints is what reading it whole printed.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import random
import subprocess
import sys
import tempfile

import pytest
from click.testing import CliRunner

from simdoc.cli import cli
from test_bounded_memory import _LAUNCHER

MB = 1 << 20


# Small sizes, for speed: queries over 1 MiB are long, read 1 MiB at a time, as the defaults
# (4 MiB, 8 MiB) do at scale.
_ENTRY = (
    "import simdoc.corpus.streaming as s\n"
    "s.LARGE_CHARS = s.CHUNK_BYTES = 1 << 20\n"
    "from simdoc.__main__ import main\n"
    "main()\n"
)


def _peak_mb(args: list[object], stdin_path=None) -> tuple[float, subprocess.CompletedProcess]:
    """Peak RSS in MB of ``simdoc ARGS`` (its own, measured by a small launcher)."""
    env = dict(os.environ)
    env.pop("SIMDOC_INDEX", None)
    with tempfile.NamedTemporaryFile("r") as peak, open(stdin_path or os.devnull, "rb") as stdin:
        r = subprocess.run(
            [sys.executable, "-c", _LAUNCHER, peak.name, sys.executable, "-c", _ENTRY, *map(str, args)],
            stdin=stdin, capture_output=True, env=env,
        )
        return int(peak.read() or 0) / 1024, r


@pytest.fixture(scope="module")
def small_index(tmp_path_factory):
    root = tmp_path_factory.mktemp("idx")
    corpus = root / "c"
    corpus.mkdir()
    rng = random.Random(7)
    for name in ("a.txt", "b.txt"):
        (corpus / name).write_bytes(base64.encodebytes(rng.randbytes(20_000)))
    r = CliRunner().invoke(cli, ["pairs", str(corpus), "--index", str(root / "i"), "-q"])
    assert r.exit_code == 0, r.stderr
    return root / "i"


@pytest.mark.parametrize("via", ["file", "stdin"])
def test_a_long_query_costs_no_more_than_a_short_one(tmp_path, small_index, via):
    peaks = []
    for raw in (2 * MB, 18 * MB):  # 2.7 and 24 MB of base64 of random bytes: long queries
        query = tmp_path / f"q{raw}.txt"
        query.write_bytes(base64.encodebytes(random.Random(raw).randbytes(raw)))
        args = ["query", "-" if via == "stdin" else query, "--index", small_index, "--format", "jsonl"]
        peak, r = _peak_mb(args, query if via == "stdin" else None)
        assert r.returncode == 0, r.stderr
        assert r.stdout == b"" and b"simdoc: 1 query, 0 matches" in r.stderr
        peaks.append(peak)
    # Before: the text held whole (its bytes, its str, a lowercased copy): 181 and 224 MB. Now
    # a chunk at a time (its bytes, str and folded copies): 179 and 179 MB.
    assert peaks[1] < peaks[0] + 15, peaks
    assert peaks[1] < 300, peaks


_WORDS = ["alpha", "Beta", "GAMMA", "ΣΑΣ", "delta", "x.", "café", "e\u0301t\u00e9", "1", "bee", "l'île", "\t", "Σ."]


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n))


def test_a_streamed_query_prints_what_the_whole_query_did(tmp_path, monkeypatch):
    """The same estimates and exact Jaccards, whether the query is held whole (shingled with its
    batch, compared whole) or streamed in chunks that cut words and UTF-8 sequences, signed as
    read and compared in passes over hash ranges, each reading it again: from a file, a
    compressed file and stdin (with undecodable bytes)."""
    import simdoc.corpus.long_text as long_text
    import simdoc.corpus.streaming as streaming
    import simdoc.similarity as similarity

    rng = random.Random(28)
    corpus = tmp_path / "c"
    corpus.mkdir()
    base = _text(rng, 40_000)
    (corpus / "a.txt").write_text(base)
    (corpus / "b.txt").write_text(base.replace("bee", "BEE", 300))
    (corpus / "c.txt").write_text(_text(rng, 30_000))
    idx = tmp_path / "i"
    runner = CliRunner()
    assert runner.invoke(cli, ["pairs", str(corpus), "--index", str(idx), "-q"]).exit_code == 0
    query = base.replace("delta", "Delta", 200)
    (tmp_path / "q.txt").write_text(query)
    (tmp_path / "q.txt.gz").write_bytes(gzip.compress(query.encode()))
    piped = query.encode()[:50_001] + b"\xff\xc3" + query.encode()[50_001:]

    def run() -> tuple[str, str]:
        args = ["--index", str(idx), "--format", "jsonl", "--threshold", "0.3"]
        files = runner.invoke(cli, ["query", str(tmp_path / "q.txt"), str(tmp_path / "q.txt.gz"), *args])
        stdin = runner.invoke(cli, ["query", "-", *args], input=piped)
        assert files.exit_code == 0 and stdin.exit_code == 0, (files.stderr, stdin.stderr)
        return files.stdout, stdin.stdout

    whole = run()
    assert whole[0].count('"doc": "b.txt"') == 2 and whole[1].count('"doc": "b.txt"') == 1, whole
    readings: list[tuple[str, str]] = []  # (query, form) of each reading of a long query
    for cls in (long_text.LongFile, long_text.SpilledText):
        monkeypatch.setattr(cls, "shingle", _spy(readings, cls.shingle))
    monkeypatch.setattr(streaming, "LARGE_CHARS", 1 << 14)
    monkeypatch.setattr(streaming, "CHUNK_BYTES", 4099)  # cuts words, and UTF-8 sequences
    monkeypatch.setattr(similarity, "PAIR_BYTES", 3 << 20)  # several passes
    assert run() == whole
    printed = [json.loads(line)["query"] for line in (whole[0] + whole[1]).splitlines()]
    for name in (str(tmp_path / "q.txt"), str(tmp_path / "q.txt.gz"), "-"):
        forms = [form for n, form in readings if n == name]
        # Signed as read, then read again for each pass: two or more for each candidate.
        assert forms[0] == "stream" and forms.count("sets64") >= 2 * printed.count(name) > 0, (name, forms)


def _spy(readings: list, method):
    def shingle(self, spec, form, warn, part=None, sink=None):
        readings.append((self.name, form))
        return method(self, spec, form, warn, part, sink)

    return shingle


def test_a_query_file_that_changes_between_passes_is_not_compared(tmp_path, monkeypatch):
    """Two passes over two versions would sum to no Jaccard of either: the query is said to have
    changed, once, and nothing of it is printed."""
    import simdoc.corpus.long_text as long_text
    import simdoc.corpus.streaming as streaming
    import simdoc.similarity as similarity

    rng = random.Random(5)
    corpus = tmp_path / "c"
    corpus.mkdir()
    base = _text(rng, 20_000)
    (corpus / "a.txt").write_text(base)
    (corpus / "b.txt").write_text(base.replace("bee", "BEE", 100))
    idx = tmp_path / "i"
    runner = CliRunner()
    assert runner.invoke(cli, ["pairs", str(corpus), "--index", str(idx), "-q"]).exit_code == 0
    q = tmp_path / "q.txt"
    q.write_text(base)
    monkeypatch.setattr(streaming, "LARGE_CHARS", 1 << 14)
    monkeypatch.setattr(similarity, "PAIR_BYTES", 1 << 20)
    method = long_text.LongFile.shingle
    calls = []

    def shingle(self, spec, form, warn, part=None, sink=None):
        calls.append(form)
        if len(calls) == 3:
            q.write_text(base.replace("alpha", "omega"))
        return method(self, spec, form, warn, part, sink)

    monkeypatch.setattr(long_text.LongFile, "shingle", shingle)
    r = runner.invoke(cli, ["query", str(q), "--index", str(idx)])
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""
    assert r.stderr.count("q.txt: changed while it was read; its candidates are not compared") == 1
    assert "changed or gone since it was indexed" not in r.stderr


def test_a_long_query_on_stdin_that_cannot_be_copied_is_one_error(tmp_path, small_index, monkeypatch):
    import errno

    import simdoc.corpus.long_text as long_text
    import simdoc.corpus.streaming as streaming

    def full(*_args, **_kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(streaming, "LARGE_CHARS", 1 << 10)
    monkeypatch.setattr(long_text.tempfile, "TemporaryFile", full)
    r = CliRunner().invoke(cli, ["query", "-", "--index", str(small_index)], input="bees and honey " * 200)
    assert r.exit_code == 6, (r.exit_code, r.stderr, r.exception)
    assert r.stderr.startswith("Error: cannot copy the query on stdin to a temporary file in ")
    assert "No space left on device" in r.stderr and "Traceback" not in r.stderr
