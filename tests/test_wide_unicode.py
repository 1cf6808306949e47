"""A text file in UTF-16 or UTF-32, told by its byte-order mark, is read in that encoding (simdoc.corpus.encodings).

Windows' Notepad saved "Unicode" text as UTF-16 LE with a byte-order mark for
decades; such a file holds a NUL byte for every ASCII letter, and was skipped
as binary. It is now the text it holds: the same document as its UTF-8 copy,
however it is read (whole, in one compiled batch, streamed when compressed)
and verified (read again alone, or with the pairs of its component). A file
that starts with such a mark and holds NUL characters is still binary.
"""

from __future__ import annotations

import codecs
import gzip
import json
import random

import numpy as np
import pytest
from conftest import records, write
from hypothesis import given, settings
from hypothesis import strategies as st

import simdoc.corpus.files as files
import simdoc.corpus.plain as plain
import simdoc.corpus.streaming as streaming
import simdoc.stages.shingle as shingle_stage
from simdoc import kernel_choice
from simdoc.corpus.reading_rules import READING_RULES

WORDS = "абвгдежзийклмнопрстуфхцчшщъыьэюяabcdefghij"


def _text(seed: int, words: int = 800) -> str:
    rng = random.Random(seed)
    return " ".join("".join(rng.choice(WORDS) for _ in range(rng.randint(3, 8))) for _ in range(words)) + " 😀 end"


def _corpus(root, text: str):
    write(root / "u8.txt", text.encode())
    write(root / "u16le.txt", codecs.BOM_UTF16_LE + text.encode("utf-16-le"))
    write(root / "u16be.txt", codecs.BOM_UTF16_BE + text.encode("utf-16-be"))
    write(root / "u32.txt", text.encode("utf-32"))
    write(root / "u16.txt.gz", gzip.compress(text.encode("utf-16")))  # streamed
    write(root / "odd.txt", text.encode("utf-16") + b"A")  # ends inside a character
    write(root / "bin.dat", codecs.BOM_UTF16_LE + b"\x00\x00" * 100 + b"abc")  # NUL characters: binary
    write(root / "bin.dat.gz", gzip.compress(codecs.BOM_UTF16_LE + b"\x00\x00" * 100 + b"abc"))  # (streamed)
    return root


@pytest.mark.parametrize("kernels", [False, True])
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_every_way_of_reading_gives_the_utf8_copy(run, tmp_path, monkeypatch, kernels, jobs):
    if kernels:  # the compiled batch read, the verification's buffer and its kernels, not only the reference
        monkeypatch.setattr(kernel_choice, "SMALL_BYTES", 0)
    corpus = _corpus(tmp_path / "c", _text(1))
    r = run("pairs", corpus, "--index", tmp_path / "idx", "-t", "0.5", "-j", jobs)
    assert r.exit_code == 0, r.stderr
    names = ["odd.txt", "u16.txt.gz", "u16be.txt", "u16le.txt", "u32.txt", "u8.txt"]
    assert [x[:2] for x in records(r)] == [[a, b] for i, a in enumerate(names) for b in names[i + 1 :]]
    assert all(x[2:] == ["1.0000", "1.0000"] for x in records(r))
    assert "bin.dat: binary file (NUL character), skipped" in r.stderr
    assert "bin.dat.gz: binary file (NUL character), skipped" in r.stderr
    assert "odd.txt: UTF-16 text ends inside a character: its last 1 byte(s) are left out" in r.stderr


@pytest.mark.parametrize("kernels", [False, True])
def test_a_lone_pair_is_verified(run, tmp_path, monkeypatch, kernels):
    """Two files no other pair needs are compared from one buffer (simdoc.stages.verify_lone); a
    UTF-16 one is left to the general way there."""
    if kernels:
        monkeypatch.setattr(kernel_choice, "SMALL_BYTES", 0)
    text = _text(2)
    write(tmp_path / "c" / "a.txt", text.encode())
    write(tmp_path / "c" / "b.txt", text.encode("utf-16"))
    write(tmp_path / "c" / "x.txt", _text(3).encode())
    write(tmp_path / "c" / "y.txt", _text(3).encode())
    r = run("pairs", tmp_path / "c", "--index", tmp_path / "idx", "-t", "0.5")
    assert r.exit_code == 0, r.stderr
    assert records(r) == [["a.txt", "b.txt", "1.0000", "1.0000"], ["x.txt", "y.txt", "1.0000", "1.0000"]]


MARKS = {"utf-16-le": codecs.BOM_UTF16_LE, "utf-16-be": codecs.BOM_UTF16_BE, "utf-32-le": codecs.BOM_UTF32_LE, "utf-32-be": codecs.BOM_UTF32_BE}


@given(st.text(max_size=60).filter(lambda t: "\0" not in t), st.integers(4, 300), st.sampled_from(sorted(MARKS)))
@settings(max_examples=200, deadline=None)
def test_a_cut_keeps_whole_characters_read_whole_or_streamed(tmp_path_factory, text, n, codec):
    """--max-bytes N (past the mark) keeps the longest prefix of whole characters in N bytes, as
    in UTF-8, read whole and streamed alike."""
    from simdoc.shingling import ShingleSpec, shingle_texts

    mark = MARKS[codec]
    raw = mark + text.encode(codec)
    root = tmp_path_factory.mktemp("wide")
    (root / "a.txt").write_bytes(raw)
    (root / "a.txt.gz").write_bytes(gzip.compress(raw))
    expected = next(text[:i] for i in range(len(text), -1, -1) if len(mark) + len(text[:i].encode(codec)) <= n)
    assert files.read_document(str(root / "a.txt"), max_bytes=n).text == expected
    spec = ShingleSpec("char", 3)
    streamed = streaming.stream_document(str(root / "a.txt.gz"), spec, n, False, "sets")[1]
    want = shingle_texts([expected], spec)
    assert np.array_equal(streamed.data, want.data) and np.array_equal(streamed.counts, want.counts)


def test_show_reads_such_a_file(run, tmp_path):
    text = _text(4)
    write(tmp_path / "a.txt", text.encode("utf-16"))
    write(tmp_path / "b.txt", text.encode())
    r = run("show", tmp_path / "a.txt", tmp_path / "b.txt", "-f", "json")
    assert r.exit_code == 0 and r.stderr == "", r.stderr
    assert json.loads(r.stdout)["set_jaccard"] == 1.0


def test_an_index_that_skipped_them_as_binary_reads_them_again(run, tmp_path, monkeypatch, settled):
    corpus = _corpus(tmp_path / "c", _text(5))
    idx = tmp_path / "idx"
    with monkeypatch.context() as m:
        for module in (files, plain, streaming):  # the rule before: a NUL byte, binary
            m.setattr(module, "unicode_bom", lambda raw: None)
        m.setattr(shingle_stage, "READING_RULES", 2)
        before = run("pairs", corpus, "--index", idx, "-t", "0.5", "-j", "1")
    assert before.exit_code == 0 and before.stdout == "", before.stderr
    assert "u16le.txt: binary file (NUL byte), skipped" in before.stderr
    fresh = run("pairs", corpus, "--index", tmp_path / "fresh", "-t", "0.5", "-j", "1")
    assert len(records(fresh)) == 15
    for _ in range(2):  # read again once, then up to date
        again = run("pairs", corpus, "--index", idx, "-t", "0.5", "-j", "1", "-v")
        assert again.exit_code == 0, again.stderr
        assert again.stdout == fresh.stdout
    assert "shingle: up to date" in again.stderr
    assert json.loads((idx / "manifest.json").read_text())["stages"]["shingle"]["reading_rules"] == READING_RULES


@pytest.mark.parametrize("spilled", [False, True])
def test_a_query_on_stdin_is_read_as_a_file_is(run, tmp_path, monkeypatch, spilled):
    if spilled:  # past LARGE_CHARS, copied to a temporary file and read from there in chunks
        monkeypatch.setattr(streaming, "LARGE_CHARS", 100)
        monkeypatch.setattr(streaming, "CHUNK_BYTES", 1001)  # (odd: a chunk ends inside a character)
    text = _text(6)
    write(tmp_path / "c" / "a.txt", text.encode())
    assert run("pairs", tmp_path / "c", "--index", tmp_path / "idx").exit_code == 0
    r = run("query", "-", "--index", tmp_path / "idx", input=text.encode("utf-16"))
    assert r.exit_code == 0, r.stderr
    assert records(r) == [["-", "a.txt", "1.0000", "1.0000"]]


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-be", "utf-32"])
@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_json_lines_in_utf16_or_utf32_are_skipped_with_how_to_convert_them(run, tmp_path, codec, compress):
    """JSON Lines stay UTF-8 (their members are found again by byte offsets): such a file (Windows
    PowerShell 5 writes UTF-16) is skipped, and the warning says what it is and how to convert it,
    not that it is binary."""
    lines = "".join(json.dumps({"text": _text(i, 60)}, ensure_ascii=False) + "\n" for i in range(3))
    raw = (codecs.BOM_UTF16_BE + lines.encode(codec)) if codec == "utf-16-be" else lines.encode(codec)
    name = "data.jsonl.gz" if compress else "data.jsonl"
    write(tmp_path / "c" / name, gzip.compress(raw) if compress else raw)
    write(tmp_path / "c" / "u8.jsonl", lines.encode())
    r = run("pairs", tmp_path / "c", "--index", tmp_path / "i", "-t", "0.5", "-j", "1")
    assert r.exit_code == 0, r.stderr
    wide = "UTF-32" if codec == "utf-32" else "UTF-16"
    assert f"{name}: JSON Lines in {wide} (it starts with a {wide} byte-order mark), skipped" in r.stderr
    assert f"iconv -f {wide} -t UTF-8` does)" in r.stderr and "binary" not in r.stderr
    assert "simdoc: 3 documents" in r.stderr  # u8.jsonl's, read as ever
