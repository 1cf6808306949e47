"""Memory is bounded on every input: JSON Lines members, WARC records, and `show` on a huge file."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import tempfile
import tracemalloc
from pathlib import Path

import pytest
from conftest import TEXT_A, write

from simdoc.corpus import formats as records
from simdoc.corpus import warc
from simdoc.corpus.formats import read_jsonl

MB = 1 << 20


# Started from a small launcher: the kernel keeps a process's peak RSS across exec, and a
# child forked from pytest (hundreds of MB after importing every test module, dask and
# pandas among them) would start its count there. The launcher's own children start small.
_LAUNCHER = """
import os, subprocess, sys
proc = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(proc.pid, 0)
with open(sys.argv[1], "w") as fh:
    fh.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def _rss_of(*args: object) -> tuple[float, subprocess.CompletedProcess]:
    """Peak RSS in MB of ``simdoc ARGS`` (its own, see _LAUNCHER) and what it printed."""
    env = dict(os.environ)
    env.pop("SIMDOC_INDEX", None)
    with tempfile.NamedTemporaryFile("r") as peak:
        r = subprocess.run(
            [sys.executable, "-c", _LAUNCHER, peak.name, sys.executable, "-m", "simdoc", *map(str, args)],
            capture_output=True, text=True, env=env,
        )
        return int(peak.read() or 0) / 1024, r


def _gz_jsonl(path: Path, texts: list[str | bytes]) -> None:
    with gzip.open(path, "wb", compresslevel=1) as fh:
        for t in texts:
            if isinstance(t, bytes):  # a raw line, written as it is
                fh.write(t + b"\n")
            else:
                fh.write((json.dumps({"text": t}) + "\n").encode())


def _huge_line(n_bytes: int) -> bytes:
    return b'{"text": "' + b"abcdefghij" * (n_bytes // 10) + b'"}'


# ---------------------------------------------------------------- JSON Lines (item 8)


def test_a_jsonl_reader_holds_at_most_its_line_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(records, "MEMBER_BYTES", 64 << 10)
    monkeypatch.setattr(records, "_CHUNK", 16 << 10)
    path = tmp_path / "d.jsonl.gz"
    _gz_jsonl(path, [TEXT_A, _huge_line(8 * MB), "a line after the huge one"])
    tracemalloc.start()
    try:
        res, docs, notes, _ = read_jsonl(str(path), "d.jsonl.gz")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 * MB, peak  # the 8 MB line was never held
    assert [d for d, *_ in docs] == ["d.jsonl.gz/#1", "d.jsonl.gz/#3"]
    assert notes == ["line 2: longer than 65536 bytes, skipped (a JSON Lines document is parsed whole)"]
    assert res.status == "ok" and res.text == ""


@pytest.mark.parametrize("cut", [1, 7, 64 << 10])
def test_a_line_at_or_past_the_bound_and_chunk_edges(tmp_path, monkeypatch, cut):
    monkeypatch.setattr(records, "MEMBER_BYTES", 1000)
    monkeypatch.setattr(records, "_CHUNK", cut)
    lines = [json.dumps({"text": "x" * n}).encode() for n in (10, 988, 989, 2000, 0)]
    path = tmp_path / "d.jsonl"
    path.write_bytes(b"\n".join(lines))  # no newline at the end
    res, docs, notes, _ = read_jsonl(str(path), "d.jsonl")
    sizes = {d: len(t) for d, t, *_ in docs}
    # A line of exactly 1000 bytes is read; 1001 bytes and more are skipped.
    assert [len(x) for x in lines[:3]] == [22, 1000, 1001]
    assert sizes == {"d.jsonl/#1": 10, "d.jsonl/#2": 988, "d.jsonl/#5": 0}
    assert [n.split(":")[0] for n in notes] == ["2 lines (3, 4)"]
    # Each document's offset and length locate its line in the file, across chunk edges.
    data = path.read_bytes()
    for _, text, offset, length in docs:
        assert json.loads(data[offset : offset + length])["text"] == text


def test_a_decompression_bomb_of_one_huge_line_is_skipped_in_bounded_memory(tmp_path):
    corpus = tmp_path / "c"
    corpus.mkdir()
    _gz_jsonl(corpus / "bomb.jsonl.gz", [TEXT_A, _huge_line(100 * MB), TEXT_A])
    assert (corpus / "bomb.jsonl.gz").stat().st_size < 2 * MB
    peak, r = _rss_of("pairs", corpus, "--index", tmp_path / "idx", "-j", "1")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "bomb.jsonl.gz/#1\tbomb.jsonl.gz/#3\t1.0000\t1.0000\n"
    assert "bomb.jsonl.gz: line 2: longer than 64 MiB, skipped" in r.stderr
    # Reading the line whole took ~2.6 GB; python, numpy and numba alone take ~150 MB.
    assert peak < 600, peak


def test_max_bytes_cuts_each_jsonl_member_not_the_file(run, tmp_path):
    corpus = tmp_path / "c"
    long = "héllo wörld " * 50
    write(corpus / "d.jsonl", "".join(json.dumps({"text": t}) + "\n" for t in (long, long[:30], "tail document")))
    r = run("pairs", corpus, "--index", tmp_path / "idx", "--max-bytes", "31", "--threshold", "0.9")
    assert r.exit_code == 0, r.stderr
    assert "d.jsonl: 2 lines (1, 2): text longer than --max-bytes 31; only the first 31 bytes are indexed" in r.stderr
    # The first member's text is cut to 31 bytes (a character cut in two is left out): the second's.
    assert r.stdout == "d.jsonl/#1\td.jsonl/#2\t1.0000\t1.0000\n"
    assert "simdoc: 3 documents" in r.stderr  # the members past the first 31 bytes of the file are there


def test_warc_bodies_are_cut_at_the_bound(tmp_path, monkeypatch):
    from conftest import warc_record

    body = ("word " * 400).encode()
    path = tmp_path / "c.warc.gz"
    path.write_bytes(
        gzip.compress(warc_record("http://example.org/big", body, 1, "text/plain"))
        + gzip.compress(warc_record("http://example.org/small", b"small", 2, "text/plain"))
    )
    monkeypatch.setattr(records, "MEMBER_BYTES", 100)
    docs, notes = warc.split_warc(str(path), "c.warc.gz")
    assert {m[0]: m[1] for m in docs} == {"c.warc.gz/#http://example.org/big": "word " * 20, "c.warc.gz/#http://example.org/small": "small"}
    assert notes == ["response 1 (http://example.org/big): body longer than 100 bytes; only the first 100 bytes are indexed"]
    docs, notes = warc.split_warc(str(path), "c.warc.gz", max_bytes=10)
    assert {m[0]: m[1] for m in docs}["c.warc.gz/#http://example.org/big"] == "word word "
    assert "body longer than --max-bytes 10" in notes[0]


# ---------------------------------------------------------------- show on a huge document (item 9)


def _long_text(n_words: int, seed: int = 1) -> str:
    import random

    rng = random.Random(seed)
    vocabulary = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(5000)]
    return " ".join(rng.choice(vocabulary) for _ in range(n_words))


def test_show_searches_only_the_first_part_of_a_huge_document_and_says_so(run, tmp_path, monkeypatch):
    from simdoc.reports import evidence

    monkeypatch.setattr(evidence, "PASSAGE_BYTES", 4096)
    text = _long_text(3000)
    corpus = tmp_path / "c"
    write(corpus / "a.txt", text)
    write(corpus / "b.txt", "a new opening sentence " + text)
    write(corpus / "c.jsonl", json.dumps({"text": text}) + "\n")
    idx = tmp_path / "idx"
    assert run("pairs", corpus, "--index", idx, "-q").exit_code == 0
    for a, b in (("a.txt", "b.txt"), ("a.txt", "c.jsonl/#1")):
        r = run("show", corpus, "--index", idx, a, b, "--format", "json")
        assert r.exit_code == 0, r.stderr
        shown = json.loads(r.stdout)
        assert shown["passages_searched_bytes"] == 4096 and shown["cut_a"] and shown["cut_b"]
        assert shown["words_a"] < 1000 and shown["passages"]  # the first 4 KiB of each, not all of it
        assert shown["set_jaccard"] > 0.9  # the numbers are the whole documents'
        assert f"{a}: only its first 4096 bytes are searched for shared passages" in r.stderr
        assert "changed since it was indexed" not in r.stderr
    text_out = run("show", corpus, "--index", idx, "a.txt", "b.txt")
    assert "shared passages" in text_out.stdout and "in the first 4096 bytes of each document" in text_out.stdout
    # A change past the part searched is still seen: the digest is of the whole file.
    write(corpus / "a.txt", text + " and an ending added later")
    import importlib

    monkeypatch.setattr(importlib.import_module("simdoc.cli.show"), "refresh_signatures", lambda *a, **k: [])  # changed after the refresh
    r = run("show", corpus, "--index", idx, "a.txt", "b.txt", "--format", "json")
    assert "a.txt changed since it was indexed" in r.stderr


def test_show_on_a_huge_one_line_file_stays_in_bounded_memory(tmp_path):
    text = _long_text(4_000_000)  # 26 MB on one line
    corpus = tmp_path / "c"
    write(corpus / "a.txt", text)
    write(corpus / "b.txt", text[: len(text) // 2] + " changed " + text[len(text) // 2 :])
    idx = tmp_path / "idx"
    _, built = _rss_of("pairs", corpus, "--index", idx, "-q", "-j", "1")
    assert built.returncode == 0, built.stderr
    # The first show may compile a kernel numba has not cached yet (LLVM takes ~100 MB more
    # on a fresh clone): measure the second, which is what the passage search costs.
    _rss_of("show", corpus, "--index", idx, "a.txt", "b.txt", "--format", "json")
    peak, r = _rss_of("show", corpus, "--index", idx, "a.txt", "b.txt", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["cut_a"]
    # Searching both whole took 2.7 GB (~50x their size); python, numpy and numba take ~150 MB.
    assert peak < 500, peak


@pytest.mark.parametrize("kind", ["", "gz", "bz2", "xz", "zst"])
def test_jsonl_is_read_line_by_line_whatever_its_compression(tmp_path, kind):
    import bz2
    import lzma

    body = "".join(json.dumps({"text": t}) + "\n" for t in ("first", "second", "third")).encode()
    if kind == "zst":
        zstandard = pytest.importorskip("zstandard")
        packed = zstandard.ZstdCompressor().compress(body)
    else:
        packed = {"": lambda b: b, "gz": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress}[kind](body)
    name = "d.jsonl" + (f".{kind}" if kind else "")
    (tmp_path / name).write_bytes(packed)
    res, docs, notes, _ = read_jsonl(str(tmp_path / name), name)
    assert res.status == "ok" and notes == [], res
    assert [m[:2] for m in docs] == [(f"{name}/#1", "first"), (f"{name}/#2", "second"), (f"{name}/#3", "third")]


# ---------------------------------------------------------------- query (issue 27, item 6)


def test_query_memory_does_not_grow_with_the_number_of_queries(tmp_path):
    """3,414 queries took 2.27 GB and 1,000 took 1.06 GB: each query's shingles were all held to the end."""
    import random

    rng = random.Random(5)
    vocabulary = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(3000)]
    texts = [" ".join(rng.choice(vocabulary) for _ in range(340)) for _ in range(200)]  # ~2 KB each
    corpus = tmp_path / "c"
    for i, t in enumerate(texts):
        write(corpus / f"d{i:03d}.txt", t)
    idx = tmp_path / "idx"
    _, built = _rss_of("pairs", corpus, "--index", idx, "-q", "-j", "1")
    assert built.returncode == 0, built.stderr

    def queries(n: int) -> Path:
        path = tmp_path / f"q{n}.jsonl"
        with open(path, "w") as fh:
            for i in range(n):  # each a near copy of an indexed document: every query has a match
                words = texts[i % len(texts)].split()
                words[i % len(words)] = "changed"
                fh.write(json.dumps({"text": " ".join(words)}) + "\n")
        return path

    # 1.2 MB of queries (more than one batch) and 4 MB. A kernel numba compiles on a fresh clone
    # (~100 MB of LLVM) would be in the first run: the smaller, where it hides no growth.
    few, many = queries(600), queries(2000)
    peak_few, r_few = _rss_of("query", few, "--index", idx)
    peak_many, r_many = _rss_of("query", many, "--index", idx)
    assert r_few.returncode == 0 and r_many.returncode == 0, r_many.stderr
    assert len(r_many.stdout.splitlines()) >= 2000 and "simdoc: 2000 queries" in r_many.stderr
    assert set(r_few.stdout.replace(str(few), "Q").splitlines()) <= set(r_many.stdout.replace(str(many), "Q").splitlines())
    # Holding every query's shingles took ~50 bytes a character: ~160 MB more for the 2.8 MB more
    # here. Streamed, the many queries cost what their JSON Lines file's texts take (~6 MB).
    assert peak_many - peak_few < 60, (peak_few, peak_many)


# ---------------------------------------------------------------- 10^5 records in one JSON Lines file (issue 29)


def _records(path: Path, n: int) -> None:
    """``n`` records of ~360 characters, a fifth of them near copies of an earlier one."""
    import random

    rng = random.Random(29)
    words = [f"w{i}" for i in range(5000)]
    base: list[list[str]] = []
    with open(path, "w") as fh:
        for _ in range(n):
            if base and rng.random() < 0.2:
                ws = list(rng.choice(base))
                ws[rng.randrange(len(ws))] = rng.choice(words)
            else:
                ws = [rng.choice(words) for _ in range(60)]
                if len(base) < 1000:
                    base.append(ws)
            fh.write(json.dumps({"text": " ".join(ws)}) + "\n")


def test_records_of_one_jsonl_file_are_banded_and_scored_without_holding_the_signatures(tmp_path):
    n, num_perm = 100_000, 512
    corpus = tmp_path / "c"
    corpus.mkdir()
    _records(corpus / "r.jsonl", n)
    idx = tmp_path / "idx"
    _, built = _rss_of("pairs", corpus, "--index", idx, "-q", "-j", "2", "-t", "0.8", "--num-perm", num_perm)
    assert built.returncode == 0, built.stderr
    # Banded again for another threshold, and every candidate estimated and verified: the memory-
    # mapped matrix is read at random, a block of rows at a time, its pages let go after each.
    peak, r = _rss_of("pairs", "--index", idx, "-t", "0.7", "-j", "1")
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) > 100_000
    matrix = n * num_perm * 4 / MB  # 195 MiB of signatures
    # Measured: 384 MiB; it held the matrix about twice (566 MiB) before the blocks. Python,
    # numpy and numba take ~150 MiB; the docs table, keys and pairs of 10^5 documents ~100.
    assert peak < 250 + matrix, (peak, matrix)
