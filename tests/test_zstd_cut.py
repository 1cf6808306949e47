"""A .zst file cut short is damaged, as a cut .gz, .bz2 or .xz file is: skipped with a warning.

zstandard's stream reader ends quietly where its input ends, so a cut .zst file was indexed as
a shorter text (a plain file's first part as its whole text, a JSON Lines file's lines before the
cut) and a cut WARC .zst lost its last records, all without a word.
"""

import bz2
import gzip
import io
import json
import lzma
import random

import pytest
from click.testing import CliRunner
from conftest import warc_record
from hypothesis import given, settings
from hypothesis import strategies as st

from simdoc.cli import cli
from simdoc.corpus.files import read_document
from simdoc.corpus.zstd_frames import FrameWalk

zstandard = pytest.importorskip("zstandard")

TEXT = " ".join(f"word{random.Random(1).randrange(10**6)}-{i}" for i in range(400))


def packed(kind: str, data: bytes) -> bytes:
    return {"gz": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress, "zst": zstandard.ZstdCompressor().compress}[kind](data)


@pytest.mark.parametrize("kind", ["gz", "bz2", "xz", "zst"])
def test_a_compressed_text_cut_short_is_skipped_with_a_warning(tmp_path, kind):
    data = packed(kind, TEXT.encode())
    path = tmp_path / f"cut.txt.{kind}"
    path.write_bytes(data[: len(data) // 2])
    res = read_document(str(path))
    assert res.text is None and res.status == "unreadable" and "cannot decompress" in res.warning


def test_a_cut_jsonl_zst_file_keeps_its_lines_before_the_cut_and_lists_the_cut(tmp_path):
    # (It was skipped whole with a warning; since 2026-11-27 a JSON Lines file cut short keeps the
    # lines before the cut, as a WARC file keeps its records: tests/test_jsonl_cut_short.py.)
    corpus = tmp_path / "c"
    corpus.mkdir()
    lines = "".join(json.dumps({"text": f"{TEXT} {i}"}) + "\n" for i in range(200)).encode()  # 1 MB: 8 zstd blocks
    data = packed("zst", lines)
    cut = data[: len(data) * 2 // 3]
    (corpus / "cut.jsonl.zst").write_bytes(cut)
    (corpus / "whole.jsonl.zst").write_bytes(data)
    kept = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(cut)).read().count(b"\n")
    assert 0 < kept < 200
    r = CliRunner().invoke(cli, ["pairs", str(corpus), "--index", str(tmp_path / "idx"), "-j", "1", "-t", "0.99"])
    assert r.exit_code == 0, r.stderr
    named = {f for line in r.stdout.splitlines() for f in line.split("\t")[:2] if f.startswith("cut.")}
    assert named == {f"cut.jsonl.zst/#{i}" for i in range(1, kept + 1)}  # each paired with its whole copy
    assert f"cut.jsonl.zst: line {kept + 1}: the compressed data ends in this line (file cut short?)" in r.stderr
    s = CliRunner().invoke(cli, ["stats", "--index", str(tmp_path / "idx"), "--skipped"])
    assert s.stdout.startswith(f"cut.jsonl.zst/#{kept + 1}\tline {kept + 1}: the compressed data ends")


def test_a_cut_warc_zst_file_keeps_its_first_records_and_says_it_was_cut(tmp_path):
    corpus = tmp_path / "c"
    corpus.mkdir()
    frames = [packed("zst", warc_record(f"http://x/{i}", f"{TEXT} {i}", i)) for i in range(6)]
    cut = sum(map(len, frames[:4]))  # ends between two frames: no record is cut, two are lost
    (corpus / "cut.warc.zst").write_bytes(b"".join(frames)[: cut + 5])
    r = CliRunner().invoke(cli, ["pairs", str(corpus), "--index", str(tmp_path / "idx"), "-j", "1"])
    assert r.exit_code == 0, r.stderr
    assert "cut.warc.zst: Compressed file ended before the end-of-stream marker was reached" in r.stderr
    assert "4 documents" in r.stderr


def test_whole_zst_files_of_every_kind_of_frame_are_read_whole(tmp_path):
    data = TEXT.encode()
    frames = [
        zstandard.ZstdCompressor(write_checksum=True).compress(data[:1000]),
        zstandard.ZstdCompressor(write_content_size=False).compress(data[1000:2000]),
        b"\x50\x2a\x4d\x18" + (3).to_bytes(4, "little") + b"abc",  # a skippable frame
        zstandard.ZstdCompressor(level=19, write_checksum=True, write_content_size=False).compress(data[2000:]),
    ]
    path = tmp_path / "whole.txt.zst"
    path.write_bytes(b"".join(frames))
    assert read_document(str(path)).text == TEXT
    path.write_bytes(b"")  # an empty file holds no frame, and is no cut one
    assert read_document(str(path)).status != "unreadable"


def _frames(draw_sizes, checksum, content_size):
    rng = random.Random(len(draw_sizes))
    out = []
    for n in draw_sizes:
        raw = bytes(rng.choice(b"ab \n") for _ in range(n)) if n % 2 else bytes(rng.randrange(256) for _ in range(n))
        out.append(zstandard.ZstdCompressor(write_checksum=checksum, write_content_size=content_size).compress(raw))
    return out


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 300_000), min_size=1, max_size=3), st.booleans(), st.booleans(), st.data())
def test_the_walk_is_whole_exactly_between_frames(sizes, checksum, content_size, data):
    frames = _frames(sizes, checksum, content_size)
    blob = b"".join(frames)
    ends = {0}
    for f in frames:
        ends.add(max(ends) + len(f))
    cuts = sorted(ends | set(data.draw(st.lists(st.integers(0, len(blob)), max_size=20))))
    for cut in cuts:
        walk = FrameWalk()
        step = data.draw(st.integers(1, 70_000))
        for i in range(0, cut, step):
            walk.feed(blob[i : min(cut, i + step)])
        assert walk.whole() == (cut in ends), cut
