"""A byte that is not UTF-8 is compared as itself (simdoc.corpus.encodings.UNDECODABLE), in every format.

Until reading rules 3 such bytes were compared as U+FFFD. A text in a
single-byte encoding (windows-1251, KOI8-R, Greek, Hebrew...) lost every letter
so, keeping only its word lengths: three different Russian texts scored 1.0000
against each other, and `dedup -q` listed two of them for `xargs rm`. Kept as
themselves, the bytes of such a text stand for its letters one for one: two
windows-1251 texts score what their UTF-8 versions score (with no capitals,
which are not folded then), whatever way the file is read.
"""

from __future__ import annotations

import gzip
import json
import random

import numpy as np
import pytest
from conftest import records, warc_record, write
from hypothesis import given, settings
from hypothesis import strategies as st

import simdoc.corpus.encodings as encodings
import simdoc.corpus.files as files
import simdoc.corpus.formats as formats
import simdoc.corpus.jsonl_at as jsonl_at
import simdoc.corpus.long_text as long_text
import simdoc.corpus.plain as plain
import simdoc.corpus.streaming as streaming
import simdoc.corpus.warc as warc
import simdoc.stages.shingle as shingle_stage
from simdoc.corpus.reading_rules import READING_RULES

LETTERS = "абвгдежзийклмнопрстуфхцчшщъыьэюя"


def _russian(seed: int, words: int = 2000) -> str:
    rng = random.Random(seed)
    return " ".join("".join(rng.choice(LETTERS) for _ in range(rng.randint(1, 10))) for _ in range(words))


def _edited(text: str, seed: int, n: int) -> str:
    rng = random.Random(seed)
    words = text.split()
    for i in rng.sample(range(len(words)), n):
        words[i] = "замена"
    return " ".join(words)


def test_different_texts_in_another_encoding_are_not_pairs(run, tmp_path):
    corpus = tmp_path / "c"
    for i in range(3):
        write(corpus / f"t{i}.txt", _russian(i).encode("cp1251"))
    r = run("pairs", corpus, "--index", tmp_path / "idx", "-t", "0.5")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""  # (as U+FFFD the three scored 1.0000)
    assert "t0.txt: invalid UTF-8 at byte 0 (such bytes are compared as they are)" in r.stderr
    d = run("dedup", corpus, "--index", tmp_path / "idx", "-t", "0.8", "-q")
    assert d.exit_code == 0 and d.stdout == "", d.stderr


@pytest.mark.parametrize("unit, k", [("char", 5), ("word", 3)])
def test_two_texts_in_windows_1251_score_what_their_utf8_versions_score(run, tmp_path, unit, k):
    a = _russian(1, 400)
    b = _edited(a, 2, 30)
    got = {}
    for encoding in ("cp1251", "utf-8"):
        write(tmp_path / encoding / "a.txt", a.encode(encoding))
        write(tmp_path / encoding / "b.txt", b.encode(encoding))
        r = run("show", tmp_path / encoding / "a.txt", tmp_path / encoding / "b.txt", "--unit", unit, "--k", k, "-f", "json")
        assert r.exit_code == 0, r.stderr
        got[encoding] = json.loads(r.stdout)
    for key in ("set_jaccard", "bag_jaccard", "shingles_a", "shingles_b", "shingles_common"):
        assert got["cp1251"][key] == got["utf-8"][key], key
    assert 0.5 < got["cp1251"]["set_jaccard"] < 1


@given(st.lists(st.sampled_from(sorted(LETTERS + "  ")), min_size=1, max_size=60), st.lists(st.sampled_from(sorted(LETTERS + " ")), max_size=60))
@settings(max_examples=40, deadline=None)
def test_any_such_pair_scores_what_its_utf8_versions_score(tmp_path_factory, left, right):
    """The reading function the scan and the verification share: letters one for one, bytes for characters."""
    from simdoc.shingling import ShingleSpec, shingle_texts
    from simdoc.similarity import pair_jaccard

    root = tmp_path_factory.mktemp("pair")
    texts = {}
    for encoding in ("cp1251", "utf-8"):
        for name, chars in (("a", left), ("b", right)):
            path = root / f"{name}.{encoding}.txt"
            path.write_bytes("".join(chars).encode(encoding))
            text = files.read_document(str(path)).text
            texts[name, encoding] = text.decode() if isinstance(text, bytes) else text
    spec = ShingleSpec("char", 3)

    def score(encoding):
        sets = shingle_texts([texts["a", encoding], texts["b", encoding]], spec)
        return pair_jaccard(sets, np.array([0]), np.array([1]))[0]

    assert score("cp1251") == score("utf-8")


def test_every_format_reads_such_bytes_alike(run, tmp_path):
    """A plain file read whole and streamed (compressed), a JSON Lines line, a WARC body with no
    charset and an HTML page: the same windows-1251 text, the same document; a different one, not."""
    text, other = _russian(5, 600).encode("cp1251"), _russian(6, 600).encode("cp1251")
    corpus = tmp_path / "c"
    write(corpus / "a.txt", text)
    write(corpus / "b.txt.gz", gzip.compress(text))
    write(corpus / "d.jsonl", b'{"text": "' + text + b'"}\n{"text": "' + other + b'"}\n')
    write(corpus / "w.warc", warc_record("http://a.example/", text, 1, "text/plain") + warc_record("http://b.example/", other, 2, "text/plain"))
    write(corpus / "p.html", b"<html><body><p>" + text + b"</p></body></html>")
    write(corpus / "o.txt", other)
    r = run("pairs", corpus, "--index", tmp_path / "idx", "-t", "0.5", "-j", "1")
    assert r.exit_code == 0, r.stderr
    same = {"a.txt", "b.txt.gz", "d.jsonl/#1", "w.warc/#http://a.example/", "p.html"}
    others = {"d.jsonl/#2", "w.warc/#http://b.example/", "o.txt"}
    want = {frozenset((x, y)) for group in (same, others) for x in group for y in group if x < y}
    got = records(r)
    assert {frozenset(x[:2]) for x in got} == want
    assert all(x[3] == "1.0000" for x in got)
    assert "w.warc: 2 records (response 1 (http://a.example/), response 2 (http://b.example/)): bytes invalid in their charset, compared as they are" in r.stderr


def test_dedup_lists_a_copy_in_another_encoding_and_keeps_the_near_one(run, tmp_path):
    corpus = tmp_path / "c"
    text = _russian(3)
    write(corpus / "a.txt", text.encode("cp1251"))
    write(corpus / "b.txt", text.encode("cp1251"))
    write(corpus / "u.txt", text.encode())  # its UTF-8 version: other bytes, not a copy as compared
    write(corpus / "x.txt", _russian(4).encode("cp1251"))
    r = run("dedup", corpus, "--index", tmp_path / "idx", "-t", "0.9", "-q")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "b.txt\n" and r.stderr == ""


def test_show_prints_such_bytes_escaped(run, tmp_path):
    """As a name's: ``\\xNN`` in text (a strict UTF-8 stdout cannot write them, a terminal cannot
    show them), ``"\\udcNN"`` in JSON, which json.loads and surrogateescape give back."""
    a, b = _russian(7, 300), _edited(_russian(7, 300), 1, 10)
    write(tmp_path / "a.txt", a.encode("cp1251"))
    write(tmp_path / "b.txt", b.encode("cp1251"))
    r = run("show", tmp_path / "a.txt", tmp_path / "b.txt", "--full")
    assert r.exit_code == 0, r.stderr
    first = "".join(f"\\x{c:02x}" for c in a.split()[0].encode("cp1251"))
    assert first in r.stdout, r.stdout[:300]
    assert "\ufffd" not in r.stdout  # every letter a byte escaped, none replaced
    j = run("show", tmp_path / "a.txt", tmp_path / "b.txt", "-f", "json")
    first = json.loads(j.stdout)["passages"][0]["text"]
    assert first.encode("utf-8", "surrogateescape").decode("cp1251") in a  # "\udcNN" escapes, the bytes back


_DECODERS = (encodings, plain, streaming, long_text, jsonl_at, formats, warc)


def test_an_index_made_when_such_bytes_were_u_fffd_is_read_again(run, tmp_path, monkeypatch, settled):
    corpus = tmp_path / "c"
    for i in range(3):
        write(corpus / f"t{i}.txt", _russian(i, 300).encode("cp1251"))
    lines = b"".join(b'{"text": "' + _russian(i, 300).encode("cp1251") + b'"}\n' for i in (3, 4))
    write(corpus / "d.jsonl", lines)
    write(corpus / "w.warc", b"".join(warc_record(f"http://x.example/{i}", _russian(i, 300).encode("cp1251"), i, "text/plain") for i in (5, 6)))
    write(corpus / "plain.txt", "an ordinary text in UTF-8 " * 20)
    page = f'<html><head><meta charset="windows-1251"></head><body><p>{_russian(9, 300)}</p></body></html>'
    write(corpus / "p.html", page.encode("cp1251"))  # read in its <meta>'s charset now (simdoc.corpus.html)
    write(corpus / "u.txt", _russian(9, 300))
    idx = tmp_path / "idx"
    with monkeypatch.context() as m:
        for module in _DECODERS:  # the rule before: such bytes became U+FFFD
            m.setattr(module, "UNDECODABLE", "replace")
        m.setattr(shingle_stage, "READING_RULES", 2)
        before = run("pairs", corpus, "--index", idx, "-t", "0.5", "-j", "1")
    assert before.exit_code == 0, before.stderr
    assert len(records(before)) >= 21  # the seven texts in windows-1251 (the page too) scored 1.0 against each other
    fresh = run("pairs", corpus, "--index", tmp_path / "fresh", "-t", "0.5", "-j", "1")
    assert fresh.exit_code == 0 and records(fresh) == [["p.html", "u.txt", "1.0000", "1.0000"]], fresh.stderr
    for _ in range(2):  # read again once, then up to date
        again = run("pairs", corpus, "--index", idx, "-t", "0.5", "-j", "1", "-v")
        assert again.exit_code == 0, again.stderr
        assert again.stdout == fresh.stdout
    assert "shingle: up to date" in again.stderr
    stage = json.loads((idx / "manifest.json").read_text())["stages"]["shingle"]
    assert stage["reading_rules"] == READING_RULES == 3


@pytest.mark.parametrize("spans", [False, True])
def test_a_binary_parquet_column_is_text_read_as_a_files_bytes_are(run, tmp_path, monkeypatch, spans):
    """Its values are read as UTF-8, a byte that is not kept as itself (they were skipped: "not
    text"); one warning names the rows, however the file is cut into tasks."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    from simdoc.corpus import parquet

    if spans:  # a task of each row group
        monkeypatch.setattr(parquet, "TASK_BYTES", 1)
        monkeypatch.setattr(parquet, "CUT_BYTES", 0)
    corpus = tmp_path / "c"
    one, two = _russian(1, 300), _russian(2, 300)
    values = [one.encode(), two.encode(), one.encode("cp1251"), None, two.encode("cp1251"), b"plain ascii words " * 30]
    corpus.mkdir()
    pq.write_table(pa.table({"text": pa.array(values, pa.binary())}), corpus / "b.parquet", row_group_size=2)
    write(corpus / "a.txt", one.encode("cp1251"))
    write(corpus / "u.txt", two)
    r = run("pairs", corpus, "--index", tmp_path / "idx", "-t", "0.5", "-j", "1")
    assert r.exit_code == 0, r.stderr
    assert records(r) == [
        ["a.txt", "b.parquet/#3", "1.0000", "1.0000"],
        ["b.parquet/#2", "u.txt", "1.0000", "1.0000"],
    ]
    assert "b.parquet: invalid UTF-8 in 2 row(s), the first row 3 (such bytes are compared as they are); row 4: null text, skipped" in r.stderr
    cut = run("pairs", corpus, "--index", tmp_path / "cut", "-t", "0.5", "-j", "1", "--max-bytes", "101")
    assert cut.exit_code == 0, cut.stderr
    assert [x[:2] for x in records(cut)] == [["a.txt", "b.parquet/#3"], ["b.parquet/#2", "u.txt"]]
    assert all(x[3] == "1.0000" for x in records(cut))  # cut as a file is, read again alike


def test_an_id_field_in_another_encoding_names_its_member_by_its_bytes(run, tmp_path):
    """An --id-field value read with bytes that are not UTF-8 keeps them, as a file name does
    (printed ``\\xNN``); JSON's ``"\\udcNN"`` is that byte; any other lone surrogate still gives
    the line number. `show` takes the id as `pairs` prints it."""
    corpus = tmp_path / "c"
    one = _russian(1, 300).encode("cp1251")
    line = b'{"id": "%s", "text": "%s"}\n'
    write(corpus / "d.jsonl", b"".join([
        line % ("статья".encode("cp1251"), one),
        line % ("копия".encode("cp1251"), one),
        line % (b"\\ud800", _russian(2, 300).encode("cp1251")),
        line % (b"\\udcf1\\udcf2\\udce0\\udcf2\\udcfc\\udcff", _russian(3, 300).encode("cp1251")),  # "статья" again
    ]))
    r = run("pairs", corpus, "--index", tmp_path / "idx", "--id-field", "id", "-t", "0.5")
    assert r.exit_code == 0, r.stderr
    printed = ["d.jsonl/#\\xea\\xee\\xef\\xe8\\xff", "d.jsonl/#\\xf1\\xf2\\xe0\\xf2\\xfc\\xff"]
    assert records(r) == [[*printed, "1.0000", "1.0000"]]
    assert "line 3: its id has a lone surrogate (no character); its id is the line number" in r.stderr
    assert "id '\\xf1\\xf2\\xe0\\xf2\\xfc\\xff' is taken (by line 1); this one is '\\xf1\\xf2\\xe0\\xf2\\xfc\\xff@4'" in r.stderr
    s = run("show", corpus, "--index", tmp_path / "idx", "--id-field", "id", *printed, "-f", "json")
    assert s.exit_code == 0, s.stderr
    assert json.loads(s.stdout)["set_jaccard"] == 1.0


def test_show_takes_a_file_name_as_pairs_prints_it(run, tmp_path):
    corpus = tmp_path / "c"
    text = "the quick brown fox jumps over the lazy dog while the farmer sleeps in the barn"
    write(corpus / "b.txt", text)
    (corpus / "a\udce9.txt".encode("utf-8", "surrogateescape").decode("utf-8", "surrogateescape")).write_text(text)
    r = run("pairs", corpus, "--index", tmp_path / "idx", "-t", "0.5")
    assert records(r) == [["a\\xe9.txt", "b.txt", "1.0000", "1.0000"]]
    s = run("show", corpus, "--index", tmp_path / "idx", "a\\xe9.txt", "b.txt", "-f", "json")
    assert s.exit_code == 0, s.stderr
    assert json.loads(s.stdout)["set_jaccard"] == 1.0


def test_a_binary_parquet_id_column_names_rows_by_its_bytes(run, tmp_path):
    """Its values were printed as Python's repr (``b.parquet/#b'abc'``), a NUL in one unseen."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    corpus = tmp_path / "c"
    text = "the quick brown fox jumps over the lazy dog while the farmer sleeps in the barn"
    corpus.mkdir()
    ids = pa.array([b"abc", "статья".encode("cp1251"), b"a\x00b"], pa.binary())
    pq.write_table(pa.table({"text": [text] * 3, "id": ids}), corpus / "b.parquet")
    r = run("pairs", corpus, "--index", tmp_path / "idx", "--id-field", "id", "-t", "0.5")
    assert r.exit_code == 0, r.stderr
    assert sorted({x for p in records(r) for x in p[:2]}) == ["b.parquet/#3", "b.parquet/#\\xf1\\xf2\\xe0\\xf2\\xfc\\xff", "b.parquet/#abc"]
    assert "row 3: null or NUL-holding 'id', its id is the row number" in r.stderr
