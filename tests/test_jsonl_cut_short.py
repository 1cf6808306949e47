"""A compressed JSON Lines file cut short (a download that stopped) keeps the lines before the cut.

It was skipped whole: one truncated shard of a crawl lost every record it held, only
warned about. The data before the cut decompresses as it was written (the data
ends; none of it is damaged), so those lines are indexed, as a WARC file's records
before a cut are; the line the cut is in, and whatever followed, are lost: warned
about and listed by ``stats --skipped`` as ``FILE/#LINE``. ``dedup --write`` cannot
rewrite such a file whole and writes nothing (exit 3). A file whose data is
damaged (a CRC that fails) is still skipped whole: what it decompressed to before
the check failed may be wrong.
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import random
import zlib

import pytest
from conftest import records

zstandard = pytest.importorskip("zstandard")

WORDS = [f"w{i}" for i in range(300)]


def _lines(n: int, seed: int = 4) -> list[bytes]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        out.append(json.dumps({"text": " ".join(rng.choice(WORDS) for _ in range(80))}).encode() + b"\n")
        if i % 5 == 0:
            out.append(out[-1])  # a copy: pairs to find all along the file
    return out


def _pack(kind: str, data: bytes) -> bytes:
    return {
        "gz": gzip.compress,
        "bz2": lambda d: bz2.compress(d, compresslevel=1),  # 100 kB blocks: a cut keeps the blocks before it
        "xz": lzma.compress,
        "zst": lambda d: zstandard.ZstdCompressor().compress(d),
    }[kind](data)


def _prefix(kind: str, cut: bytes) -> bytes:
    """What a streaming decompressor gives of ``cut`` before its data ends."""
    if kind == "gz":
        return zlib.decompressobj(31).decompress(cut)
    if kind == "bz2":
        return bz2.BZ2Decompressor().decompress(cut)
    if kind == "xz":
        return lzma.LZMADecompressor().decompress(cut)
    return zstandard.ZstdDecompressor().stream_reader(io.BytesIO(cut)).read()


@pytest.mark.parametrize("kind", ["gz", "bz2", "xz", "zst"])
@pytest.mark.parametrize("fraction", [0.35, 0.8])
def test_the_lines_before_the_cut_are_indexed_and_the_cut_listed(run, tmp_path, kind, fraction):
    lines = _lines(600)
    data = _pack(kind, b"".join(lines))
    cut = data[: int(len(data) * fraction)]
    kept = _prefix(kind, cut).count(b"\n")
    assert kept < len(lines)
    corpus, same = tmp_path / "c", tmp_path / "same"
    corpus.mkdir(), same.mkdir()
    (corpus / f"shard.jsonl.{kind}").write_bytes(cut)
    (same / f"shard.jsonl.{kind}").write_bytes(_pack(kind, b"".join(lines[:kept])))  # those lines, whole
    r = run("pairs", corpus, "--index", tmp_path / "idx", "-t", "0.9", "-j", "1")
    if not kept:  # the cut is in the first line (bz2's first block): nothing to index
        assert r.exit_code == 3 and "line 1: the compressed data ends" in r.stderr, r.stderr
        return
    assert r.exit_code == 0, r.stderr
    expected = run("pairs", same, "--index", tmp_path / "same.idx", "-t", "0.9", "-j", "1")
    assert r.stdout == expected.stdout and records(r)  # the same pairs, verified from the cut file
    assert f"shard.jsonl.{kind}: line {kept + 1}: the compressed data ends in this line (file cut short?)" in r.stderr
    for _ in range(2):  # listed on every later run too
        s = run("stats", "--index", tmp_path / "idx", "--skipped")
        assert s.stdout.splitlines() == [f"shard.jsonl.{kind}/#{kept + 1}\tline {kept + 1}: " + s.stdout.split(": ", 1)[1].rstrip("\n")]
        assert run("pairs", corpus, "--index", tmp_path / "idx", "-t", "0.9").stdout == expected.stdout


def test_dedup_write_refuses_a_file_cut_short(run, tmp_path):
    corpus = tmp_path / "c"
    corpus.mkdir()
    data = _pack("gz", b"".join(_lines(600)))
    (corpus / "shard.jsonl.gz").write_bytes(data[: len(data) * 9 // 10])
    r = run("dedup", corpus, "--index", tmp_path / "idx", "-t", "0.9", "--write", tmp_path / "out")
    assert r.exit_code == 3, (r.exit_code, r.stderr)
    assert "the compressed data ends early (file cut short?); nothing written" in r.stderr
    assert "changed or is gone" not in r.stderr  # its members are as indexed
    assert not (tmp_path / "out").exists()
    listed = run("dedup", corpus, "--index", tmp_path / "idx", "-t", "0.9")
    assert listed.exit_code == 0 and listed.stdout  # the copies are named, as for any file


def test_a_damaged_file_is_still_skipped_whole(run, tmp_path):
    corpus = tmp_path / "c"
    corpus.mkdir()
    data = bytearray(_pack("gz", b"".join(_lines(600))))
    data[-6] ^= 0xFF  # its CRC: every byte decompressed, and the check fails
    (corpus / "shard.jsonl.gz").write_bytes(bytes(data))
    (corpus / "other.txt").write_text("something else to index")
    r = run("pairs", corpus, "--index", tmp_path / "idx", "-t", "0.9")
    assert r.exit_code == 0, r.stderr
    assert "shard.jsonl.gz: cannot decompress" in r.stderr and r.stdout == ""


def test_an_index_that_skipped_a_cut_file_reads_it_again(run, tmp_path, monkeypatch):
    import simdoc.corpus.formats as formats
    import simdoc.stages.shingle as shingle_stage

    corpus = tmp_path / "c"
    corpus.mkdir()
    data = _pack("gz", b"".join(_lines(600)))
    (corpus / "shard.jsonl.gz").write_bytes(data[: len(data) * 9 // 10])
    (corpus / "other.txt").write_text("something else to index")
    idx = tmp_path / "idx"

    def as_then(stream, kind):  # rules 1: a cut file was undecompressable, and skipped whole
        def read(n: int) -> bytes:
            try:
                return stream.read(n)
            except Exception as exc:
                raise formats.Undecompressable(str(exc)) from None

        return read if kind is not None else stream.read

    with monkeypatch.context() as m:
        m.setattr(formats, "_reading", as_then)
        m.setattr(shingle_stage, "READING_RULES", 1)
        before = run("pairs", corpus, "--index", idx, "-t", "0.9")
    assert before.exit_code == 0 and before.stdout == "" and "1 file skipped" in before.stderr, before.stderr
    fresh = run("pairs", corpus, "--index", tmp_path / "fresh", "-t", "0.9")
    assert fresh.stdout
    for _ in range(2):
        again = run("pairs", corpus, "--index", idx, "-t", "0.9")
        assert again.exit_code == 0, again.stderr
        assert again.stdout == fresh.stdout


@pytest.mark.parametrize("kind", ["gz", "xz"])
def test_a_cut_after_the_last_newline_names_no_line_it_cannot_know(run, tmp_path, kind):
    # Only the stream's end is missing (gzip's 8-byte trailer, xz's index and footer): every line
    # was read whole. It cannot be told whether another line followed; it is not said that one was cut.
    lines = _lines(40)
    data = _pack(kind, b"".join(lines))
    cut = data[:-8] if kind == "gz" else data[:-12]  # gzip: CRC and size; xz: the stream footer
    assert _prefix(kind, cut) == b"".join(lines)
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / f"shard.jsonl.{kind}").write_bytes(cut)
    r = run("pairs", corpus, "--index", tmp_path / "idx", "-t", "0.9", "-q")
    assert r.exit_code == 0, r.stderr
    assert len(r.stdout.splitlines()) == 8  # every copy paired: no line lost
    assert "1 file damaged or cut short" in r.stderr  # -q still names it
    s = run("stats", "--index", tmp_path / "idx", "--skipped")
    n = len(lines) + 1
    assert s.stdout == (
        f"shard.jsonl.{kind}/#{n}\tline {n}: the compressed data ends before this line (file cut short?); "
        "any lines from here on are lost, skipped\n"
    )
