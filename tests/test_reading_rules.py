"""Reading rules 2 (simdoc.corpus.reading_rules.READING_RULES), and an index made under rules 1 brought up to them.

* A file's format is told by its suffix in any case: ``B.JSONL`` is JSON Lines,
  ``A.TXT.GZ`` gzip. Until 2026-11-27 only ``.parquet`` and the HTML suffixes
  were matched in any case: ``B.JSONL`` was indexed as one plain document (its
  records' braces and quotes shingled with their text, its two identical records
  never paired), ``A.TXT.GZ`` skipped as binary, ``W.WARC`` shingled with its
  headers. Archives made on other systems often name files in capitals.
* A text cut by ``--max-bytes`` inside a character ends before it, in every
  format. A plain file, a compressed one and a WARC body ended with U+FFFD and
  an "invalid UTF-8" warning, where a JSON Lines member's text dropped the
  partial character: the same text scored 0.5 against itself.

An index made under rules 1 (no ``reading_rules`` in its shingle stage) reads
again the files it may have read another way, once.
"""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
from conftest import records, warc_record, write
from hypothesis import given, settings
from hypothesis import strategies as st

import simdoc.corpus.encodings as encodings
import simdoc.corpus.read as read
import simdoc.stages.shingle as shingle_stage
from simdoc.corpus.encodings import incomplete_tail
from simdoc.corpus.files import compression_of
from simdoc.corpus.read import how_read
from simdoc.corpus.reading_rules import READING_RULES, read_by_case
from simdoc.corpus.walk import is_jsonl, is_warc

PROSE = (
    "the quick brown fox jumps over the lazy dog while the farmer sleeps in the barn "
    "and the rain falls softly on the fields of wheat and barley near the river bank"
)


def _corpus(root, capitals: bool):
    name = str.upper if capitals else str.lower
    line = json.dumps({"text": PROSE}) + "\n"
    write(root / name("b.jsonl"), line + line)
    write(root / "c.jsonl", line)
    write(root / name("a.txt.gz"), gzip.compress(PROSE.encode()))
    write(root / "doc.txt", PROSE + " again")
    write(root / name("w.warc"), warc_record("http://example.com/", PROSE, 1))
    return root


@pytest.mark.parametrize(
    "name, way",
    [("B.JSONL", "jsonl"), ("x.NdJson", "jsonl"), ("b.JSONL.GZ", "jsonl"), ("C.WARC.GZ", "warc"), ("c.Warc.Wet", "warc"),
     ("A.TXT.GZ", "streamed"), ("a.txt.Bz2", "streamed"), ("P.PARQUET", "parquet"), ("H.HTM", "html"), ("R.TXT", "whole")],
)
def test_suffixes_in_any_case(name, way):
    assert how_read(name, 10) == way
    assert how_read(name.lower(), 10) == way
    assert is_jsonl(name) == (way == "jsonl") and is_warc(name) == (way == "warc")
    assert (compression_of(name) is None) == (name.lower().rsplit(".", 1)[-1] not in ("gz", "bz2", "xz", "zst"))


def test_capitals_are_read_as_their_format(run, tmp_path):
    upper = run("pairs", _corpus(tmp_path / "upper", True), "--index", tmp_path / "u.idx", "-t", "0.5")
    lower = run("pairs", _corpus(tmp_path / "lower", False), "--index", tmp_path / "l.idx", "-t", "0.5")
    assert upper.exit_code == 0 and lower.exit_code == 0, (upper.stderr, lower.stderr)
    assert "skipped" not in upper.stderr
    def pairs(result, case=str):  # a pair's two ids are printed in id order, which case changes
        return {(frozenset(map(case, r[:2])), *r[2:]) for r in records(result)}

    assert pairs(upper, str.lower) == pairs(lower)
    assert ["B.JSONL/#1", "B.JSONL/#2", "1.0000", "1.0000"] in records(upper)  # its two records, a pair


def test_read_by_case_names_only_files_read_another_way():
    ids = ["a/B.JSONL", "a/b.jsonl", "R.TXT", "Dir.JSONL/x.txt", "A.TXT.GZ", "p.PARQUET", "w.Warc", "README"]
    assert read_by_case(ids) == {"a/B.JSONL", "A.TXT.GZ", "p.PARQUET", "w.Warc"}
    assert read_by_case(["a.txt", "B.jsonl", "C/d.md"]) == set()


def test_an_index_made_when_suffixes_were_lowercase_only_is_read_again(run, tmp_path, monkeypatch):
    corpus = _corpus(tmp_path / "c", True)
    idx = tmp_path / "idx"
    right = read._way_by_name

    def lowercase_only(end: str) -> str:  # the rule before: a suffix in capitals named no format
        return "whole" if end != end.lower() and not end.lower().endswith((".parquet", ".html", ".htm", ".xhtml")) else right(end)

    with monkeypatch.context() as m:
        m.setattr(read, "_way_by_name", lowercase_only)
        m.setattr(shingle_stage, "READING_RULES", 1)
        before = run("pairs", corpus, "--index", idx, "-t", "0.5")
    assert before.exit_code == 0, before.stderr
    assert "B.JSONL\t" in before.stdout  # read as one document, as then

    fresh = run("pairs", corpus, "--index", tmp_path / "fresh", "-t", "0.5")
    for _ in range(2):  # read again once, then up to date
        again = run("pairs", corpus, "--index", idx, "-t", "0.5")
        assert again.exit_code == 0, again.stderr
        assert again.stdout == fresh.stdout
    stage = json.loads((idx / "manifest.json").read_text())["stages"]["shingle"]
    assert stage["reading_rules"] == READING_RULES


@pytest.mark.parametrize("text", ["é" * 9, "a€b€", "x😀y😀", "plain"])
def test_incomplete_tail_is_the_split_character(text):
    raw = text.encode()
    for n in range(len(raw) + 1):
        cut = raw[:n]
        kept = cut[: n - incomplete_tail(cut)]
        assert text.startswith(kept.decode())  # whole characters only
        assert kept == raw or len(text[: len(kept.decode()) + 1].encode()) > n  # and all of those the cut holds


def test_incomplete_tail_leaves_invalid_bytes_as_they_are():
    assert incomplete_tail(b"ab\xff") == 0 and incomplete_tail(b"ab\x80\x80\x80\x80") == 0 and incomplete_tail(b"a\xe0\x80") == 0
    assert incomplete_tail(b"ab\xe2\x82") == 2 and incomplete_tail(b"\xf0\x9f\x98") == 3 and incomplete_tail(b"\xc3\xa9") == 0


def _cut_corpus(root):
    text = "é" * 40 + " ü" * 30
    write(root / "a.txt", text)
    write(root / "a.txt.gz", gzip.compress(text.encode()))
    write(root / "b.jsonl", json.dumps({"text": text}) + "\n")
    write(root / "w.warc", warc_record("http://example.com/", text, 1))
    return root


def test_a_cut_inside_a_character_is_the_same_in_every_format(run, tmp_path):
    r = run("pairs", _cut_corpus(tmp_path / "c"), "--index", tmp_path / "idx", "--max-bytes", "11", "-t", "0.1")
    assert r.exit_code == 0, r.stderr
    assert "U+FFFD" not in r.stderr and "invalid" not in r.stderr
    got = records(r)
    assert len(got) == 6 and all(x[2:] == ["1.0000", "1.0000"] for x in got), got  # 4 texts of 5 whole characters


def test_an_index_whose_cuts_left_u_fffd_is_read_again(run, tmp_path, monkeypatch):
    corpus = _cut_corpus(tmp_path / "c")
    idx = tmp_path / "idx"
    with monkeypatch.context() as m:
        m.setattr(encodings, "incomplete_tail", lambda raw: 0)  # the rule before: the split character decoded as U+FFFD
        m.setattr(shingle_stage, "READING_RULES", 1)
        before = run("pairs", corpus, "--index", idx, "--max-bytes", "11", "-t", "0.1")
    assert before.exit_code == 0 and "invalid UTF-8" in before.stderr, before.stderr  # the split character, not UTF-8
    fresh = run("pairs", corpus, "--index", tmp_path / "fresh", "--max-bytes", "11", "-t", "0.1")
    for _ in range(2):
        again = run("pairs", corpus, "--index", idx, "-t", "0.1")
        assert again.exit_code == 0, again.stderr
        assert again.stdout == fresh.stdout


@pytest.mark.parametrize("rules", [1, 2])
def test_an_index_with_nothing_to_read_again_keeps_its_verified_pairs(run, tmp_path, monkeypatch, settled, rules):
    corpus = _corpus(tmp_path / "c", False)
    # A WARC file is read again (a body may be cut, at 64 MiB without --max-bytes; rules 2: it may
    # have had bytes not UTF-8), as is a JSON Lines file under rules 2.
    for name in ("w.warc", "b.jsonl", "c.jsonl"):
        (corpus / name).unlink()
    write(corpus / "e.txt", PROSE + " and again")
    idx = tmp_path / "idx"
    with monkeypatch.context() as m:
        m.setattr(shingle_stage, "READING_RULES", rules)
        assert run("pairs", corpus, "--index", idx, "-t", "0.5").exit_code == 0
    write(corpus / "new.txt", "something else entirely, of no likeness to the rest")
    r = run("pairs", corpus, "--index", idx, "-t", "0.5", "-v")
    assert r.exit_code == 0, r.stderr
    assert "verify: up to date" in r.stderr, r.stderr  # every pair found in the table, none read again
    stages = json.loads((idx / "manifest.json").read_text())["stages"]
    assert stages["shingle"]["reading_rules"] == stages["verified"]["reading_rules"] == READING_RULES


@pytest.mark.parametrize("charset, body, expected", [
    ("utf-8", "héllo".encode()[:2], "h"),  # the é cut in two: left out
    ("utf-16-le", "héllo".encode("utf-16-le")[:5], "hé"),
    ("latin-1", "héllo".encode("latin-1")[:2], "hé"),
    ("base64", b"aGVsbG8=", "aGVsbG8="),  # not a text codec (it would give bytes): read as UTF-8, as an uncut body is
])
def test_a_warc_body_cut_inside_a_character_in_its_charset(charset, body, expected):
    from simdoc.corpus import warc

    assert warc._decode(body, f"text/plain; charset={charset}", "r", warc._Notes(), cut=True) == expected


@given(st.text(max_size=40).filter(lambda t: not t.startswith("\ufeff") and "\0" not in t), st.integers(1, 200))  # (a NUL: binary)
@settings(max_examples=300, deadline=None)
def test_every_format_cuts_a_text_at_the_same_character(tmp_path_factory, text, n):
    """The JSON Lines rule (formats.cut_utf8: the longest prefix of at most N bytes of whole
    characters) is the rule of a plain file (read whole or streamed) and of a WARC body."""
    from simdoc.corpus import warc
    from simdoc.corpus.files import read_document
    from simdoc.corpus.formats import cut_utf8
    from simdoc.corpus.streaming import stream_document
    from simdoc.shingling import ShingleSpec, shingle_texts

    raw = text.encode()
    path = tmp_path_factory.mktemp("cut") / "doc.txt"
    path.write_bytes(raw)
    got = read_document(str(path), max_bytes=n).text
    got = got.decode() if isinstance(got, bytes) else got
    expected = cut_utf8(text, n)
    assert got == expected
    assert warc._decode(raw[:n], "text/plain; charset=utf-8", "r", warc._Notes(), cut=len(raw) > n) == expected
    spec = ShingleSpec("char", 3)
    streamed = stream_document(str(path), spec, n, False, "sets")[1]  # a long or compressed file's way
    whole = shingle_texts([expected], spec)
    assert np.array_equal(streamed.data, whole.data) and np.array_equal(streamed.counts, whole.counts)


def test_an_index_whose_warc_bodies_were_cut_at_their_bound_is_read_again(run, tmp_path, monkeypatch, settled):
    """Without --max-bytes a WARC body is still cut, at formats.MEMBER_BYTES (64 MiB; 11 bytes here):
    rules 1 ended it with U+FFFD there too, and an update must read it again as with --max-bytes."""
    from simdoc.corpus import formats, warc

    monkeypatch.setattr(formats, "MEMBER_BYTES", 11)
    corpus = _cut_corpus(tmp_path / "c")
    (corpus / "a.txt").unlink(), (corpus / "a.txt.gz").unlink(), (corpus / "b.jsonl").unlink()
    write(corpus / "x.warc", warc_record("http://example.com/x", "é" * 5, 2))  # not cut: the same text as w.warc's now
    idx = tmp_path / "idx"
    right = warc._decode
    with monkeypatch.context() as m:
        m.setattr(warc, "_decode", lambda body, ctype, what, notes, cut=False: right(body, ctype, what, notes))  # rules 1
        m.setattr(shingle_stage, "READING_RULES", 1)
        before = run("pairs", corpus, "--index", idx, "-t", "0.1", "-j", "1")
    assert before.exit_code == 0 and "invalid in their charset" in before.stderr, before.stderr
    fresh = run("pairs", corpus, "--index", tmp_path / "fresh", "-t", "0.1", "-j", "1")
    assert fresh.exit_code == 0 and "invalid in their charset" not in fresh.stderr, fresh.stderr
    assert fresh.stdout != before.stdout
    for _ in range(2):
        again = run("pairs", corpus, "--index", idx, "-t", "0.1", "-j", "1")
        assert again.exit_code == 0, again.stderr
        assert again.stdout == fresh.stdout


def _gzipped_warc_record(uri: str, text: str) -> bytes:
    """A response record whose body is sent gzipped (Content-Encoding, as wget keeps it)."""
    http = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Encoding: gzip\r\n\r\n" + gzip.compress(text.encode())
    head = f"WARC/1.0\r\nWARC-Type: response\r\nWARC-Target-URI: {uri}\r\nContent-Length: {len(http)}\r\n\r\n".encode()
    return head + http + b"\r\n\r\n"


def test_a_warc_file_shorter_than_max_bytes_whose_body_was_cut_is_read_again(run, tmp_path, monkeypatch, settled):
    """A gzipped body (Content-Encoding) decodes to more than its file holds: cut at --max-bytes
    inside a character, it ended with U+FFFD under rules 1, though the file is shorter than the cut."""
    from simdoc.corpus import warc

    corpus = tmp_path / "c"
    write(corpus / "z.warc", _gzipped_warc_record("http://example.com/z", "é" * 400))
    write(corpus / "e.txt", "é" * 150)  # 300 bytes: not cut, the text the body's cut keeps
    assert (corpus / "z.warc").stat().st_size < 301
    idx = tmp_path / "idx"
    right = warc._decode
    with monkeypatch.context() as m:
        m.setattr(warc, "_decode", lambda body, ctype, what, notes, cut=False: right(body, ctype, what, notes))  # rules 1
        m.setattr(shingle_stage, "READING_RULES", 1)
        before = run("pairs", corpus, "--index", idx, "--max-bytes", "301", "-t", "0.1", "-j", "1")
    assert before.exit_code == 0 and "invalid in their charset" in before.stderr, before.stderr
    fresh = run("pairs", corpus, "--index", tmp_path / "fresh", "--max-bytes", "301", "-t", "0.1", "-j", "1")
    assert fresh.exit_code == 0 and fresh.stdout != before.stdout
    for _ in range(2):
        again = run("pairs", corpus, "--index", idx, "--max-bytes", "301", "-t", "0.1", "-j", "1")
        assert again.exit_code == 0, again.stderr
        assert again.stdout == fresh.stdout


def test_a_warc_body_s_byte_order_mark_is_dropped_as_a_file_s_is(run, tmp_path):
    c = tmp_path / "c"
    write(c / "page.txt", "\ufeff" + PROSE)
    bodies = [("\ufeff" + PROSE).encode(), PROSE.encode()]
    write(c / "crawl.warc", b"".join(warc_record(f"http://x/{i}", body, i) for i, body in enumerate(bodies)))
    r = run("pairs", c, "--index", tmp_path / "idx", "-t", "0.5")
    assert r.exit_code == 0, r.stderr
    assert len(records(r)) == 3 and all(x[2:] == ["1.0000", "1.0000"] for x in records(r)), r.stdout
    from simdoc.store.loaded import open_index

    docs = open_index(tmp_path / "idx").docs()
    members = [bytes(docs.identities()[i]) for i in range(len(docs)) if docs.sources[i]]
    assert len(members) == 2 and len(set(members)) == 1  # the two records: one text, exact copies


def test_an_index_with_nothing_to_read_again_and_nothing_changed_takes_todays_rules(run, tmp_path, monkeypatch, settled):
    """Up to date under the old rules with nothing they read otherwise: today's rules are recorded
    at once (the next run does not look again), and no pair is verified again."""
    corpus = _corpus(tmp_path / "c", False)
    for name in ("w.warc", "b.jsonl", "c.jsonl"):  # read again under rules 2 (see above)
        (corpus / name).unlink()
    write(corpus / "e.txt", PROSE + " and again")
    idx = tmp_path / "idx"
    with monkeypatch.context() as m:
        m.setattr(shingle_stage, "READING_RULES", 2)
        before = run("pairs", corpus, "--index", idx, "-t", "0.5")
    assert before.exit_code == 0 and before.stdout, before.stderr
    r = run("pairs", corpus, "--index", idx, "-t", "0.5", "-v")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == before.stdout
    assert "shingle: up to date" in r.stderr and "verify: up to date" in r.stderr, r.stderr
    stages = json.loads((idx / "manifest.json").read_text())["stages"]
    assert stages["shingle"]["reading_rules"] == stages["verified"]["reading_rules"] == READING_RULES
    looked = []
    monkeypatch.setattr(shingle_stage, "read_not_utf8", lambda scan: looked.append(1) or set())
    assert run("pairs", corpus, "--index", idx, "-t", "0.5").stdout == before.stdout
    assert looked == []
