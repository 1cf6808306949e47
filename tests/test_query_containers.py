"""simdoc query reads a file as pairs would (issue 17, item 14).

A JSON Lines or WARC file is many queries, one per member, named as `pairs`
names members; an HTML page is its visible text, a compressed file its text.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import warc_record

from simdoc.cli import cli
from simdoc.corpus.file_texts import read_file_texts

HARBOUR = "The harbour festival opens at dawn with boats, lanterns, a brass band and fried fish on the long pier. " * 3
MUSEUM = "The town museum keeps winter hours: it opens at ten, closes at four, and is shut on every Monday. " * 3
UNRELATED = "Quantum chromodynamics describes quarks and gluons; confinement keeps colour charges bound. " * 3


def invoke(*args, data=None):
    return CliRunner().invoke(cli, [str(a) for a in args], input=data)


@pytest.fixture
def index(tmp_path) -> Path:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "harbour.txt").write_text(HARBOUR, encoding="utf-8")
    (corpus / "museum.txt").write_text(MUSEUM, encoding="utf-8")
    idx = tmp_path / "idx"
    r = invoke("pairs", corpus, "--index", idx)
    assert r.exit_code == 0, r.stderr
    return idx


def records(result) -> list[list[str]]:
    return [line.split("\t") for line in result.stdout.splitlines()]


def test_jsonl_lines_are_queries_named_like_pairs_ids(index, tmp_path):
    q = tmp_path / "new.jsonl"
    q.write_text(
        "\n".join(json.dumps(d) for d in ({"id": "x", "text": MUSEUM}, {"id": "y", "text": UNRELATED}, {"id": "z", "text": HARBOUR}))
        + "\n",
        encoding="utf-8",
    )
    r = invoke("query", q, "--index", index)
    assert r.exit_code == 0, r.stderr
    assert records(r) == [
        [f"{q}/#1", "museum.txt", "1.0000", "1.0000"],
        [f"{q}/#3", "harbour.txt", "1.0000", "1.0000"],
    ]
    assert "simdoc: 3 queries" in r.stderr
    by_id = invoke("query", q, "--index", index, "--id-field", "id")
    assert [rec[0] for rec in records(by_id)] == [f"{q}/#x", f"{q}/#z"]


def test_jsonl_queries_default_to_the_index_fields(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "data.jsonl").write_text(
        json.dumps({"key": "h", "body": HARBOUR}) + "\n" + json.dumps({"key": "m", "body": MUSEUM}) + "\n", encoding="utf-8"
    )
    idx = tmp_path / "idx"
    r = invoke("pairs", corpus, "--index", idx, "--text-field", "body", "--id-field", "key")
    assert r.exit_code == 0, r.stderr
    q = tmp_path / "q.ndjson"
    q.write_text(json.dumps({"key": "again", "body": MUSEUM}) + "\n", encoding="utf-8")
    r = invoke("query", q, "--index", idx)
    assert r.exit_code == 0, r.stderr
    assert records(r) == [[f"{q}/#again", "data.jsonl/#m", "1.0000", "1.0000"]]
    # A query file with other field names says which: one warning per line, no match.
    r = invoke("query", q, "--index", idx, "--text-field", "text")
    assert r.exit_code == 3 and r.stdout == ""
    assert "no string field 'text'" in r.stderr and "Error: no query could be read" in r.stderr


def test_warc_members_are_queries(index, tmp_path):
    pytest.importorskip("resiliparse")
    html = f"<html><head><script>var x = 1;</script></head><body><p>{HARBOUR}</p></body></html>"
    crawl = tmp_path / "crawl.warc.gz"
    crawl.write_bytes(
        gzip.compress(warc_record("http://example.org/fest", html.encode(), 1, "text/html"))
        + gzip.compress(warc_record("http://example.org/q", UNRELATED.encode(), 2, "text/plain"))
    )
    r = invoke("query", crawl, "--index", index)
    assert r.exit_code == 0, r.stderr
    assert records(r) == [[f"{crawl}/#http://example.org/fest", "harbour.txt", "1.0000", "1.0000"]]
    assert "simdoc: 2 queries" in r.stderr


def test_html_and_compressed_queries_are_their_text(index, tmp_path):
    pytest.importorskip("resiliparse")
    page = tmp_path / "page.html"
    page.write_text(f"<html><head><style>p {{ color: red }}</style></head><body><p><b>{MUSEUM}</b></p></body></html>", encoding="utf-8")
    packed = tmp_path / "museum.txt.gz"
    packed.write_bytes(gzip.compress(MUSEUM.encode()))
    r = invoke("query", page, packed, "--index", index)
    assert r.exit_code == 0, r.stderr
    assert records(r) == [[str(page), "museum.txt", "1.0000", "1.0000"], [str(packed), "museum.txt", "1.0000", "1.0000"]]


def test_read_file_texts_reports_what_it_cannot_read(tmp_path):
    missing = read_file_texts(str(tmp_path / "nope.txt"))
    assert missing.documents == [] and "nope.txt: cannot read" in missing.warnings[0]
    plain = tmp_path / "a.txt"
    plain.write_text("hello", encoding="utf-8")
    got = read_file_texts(str(plain), name="A")
    assert got.documents == [("A", "hello")] and not got.container
