"""corpus.read.read_again: an indexed document read again the way the index read it."""

from __future__ import annotations

import gzip
import json

import pytest
from conftest import warc_record, write

from simdoc.corpus.files import read_document
from simdoc.corpus.warc import split_warc
from simdoc.corpus.read import read_again, text_digest

TEXT = "A harbour crane lifts the morning's first container onto the quay.\n"


def _file_digest(path) -> bytes:
    return bytes.fromhex(read_document(str(path)).digest)


def test_a_file_is_compared_by_the_digest_of_its_bytes(tmp_path):
    path = write(tmp_path / "a.txt", TEXT)
    digest = _file_digest(path)
    got = read_again(str(path), "a.txt", "whole", digest)
    assert (got.text, got.same, got.problem) == (TEXT, True, None)
    write(path, TEXT + "and one more line\n")
    got = read_again(str(path), "a.txt", "whole", digest)
    assert got.text == TEXT + "and one more line\n" and got.same is False  # today's text, flagged
    path.unlink()
    got = read_again(str(path), "a.txt", "whole", digest)
    assert got.text is None and got.same is False and got.problem


def test_ascii_bytes_only_when_asked_and_only_for_whole_files(tmp_path):
    path = write(tmp_path / "a.txt", TEXT)
    digest = _file_digest(path)
    assert read_again(str(path), "a.txt", "whole", digest, ascii_bytes=True).text == TEXT.encode()
    assert read_again(str(path), "a.txt", "streamed", digest, ascii_bytes=True).text == TEXT


def test_max_bytes_reads_the_prefix_the_index_digested(tmp_path):
    path = write(tmp_path / "a.txt", TEXT)
    prefix = bytes.fromhex(read_document(str(path), max_bytes=10).digest)
    got = read_again(str(path), "a.txt", "whole", prefix, max_bytes=10)
    assert got.same and got.text == TEXT[:10]


def test_an_html_page_gives_its_visible_text(tmp_path):
    pytest.importorskip("resiliparse")
    page = f"<html><body><p>{TEXT}</p></body></html>"
    path = write(tmp_path / "p.html", page)
    got = read_again(str(path), "p.html", "html", _file_digest(path))
    assert got.same and "harbour crane" in got.text and "<p>" not in got.text


def test_a_jsonl_member_is_compared_by_the_digest_of_its_text(tmp_path):
    lines = [{"id": "x", "text": TEXT}, {"id": "y", "text": "another line"}]
    path = write(tmp_path / "d.jsonl", "".join(json.dumps(r) + "\n" for r in lines))
    got = read_again(str(path), "d.jsonl/#x", "jsonl", text_digest(TEXT), source="d.jsonl", fields=("text", "id"))
    assert got.text == TEXT and got.same
    lines[0]["text"] = TEXT.upper()
    write(path, "".join(json.dumps(r) + "\n" for r in lines))
    got = read_again(str(path), "d.jsonl/#x", "jsonl", text_digest(TEXT), source="d.jsonl", fields=("text", "id"))
    assert got.text == TEXT.upper() and not got.same
    write(path, json.dumps(lines[1]) + "\n")
    got = read_again(str(path), "d.jsonl/#x", "jsonl", text_digest(TEXT), source="d.jsonl", fields=("text", "id"))
    assert got.text is None and "no longer in d.jsonl" in got.problem


def test_a_warc_member_is_read_at_its_offset_and_searched_for_only_when_asked(tmp_path):
    records = [warc_record(f"http://example.org/{i}", f"{TEXT} page {i}", i + 1) for i in range(3)]
    path = tmp_path / "crawl.warc.gz"
    path.write_bytes(b"".join(gzip.compress(r) for r in records))
    members, _ = split_warc(str(path), "crawl.warc.gz", None)
    doc_id, text, offset, _ = members[1]
    got = read_again(str(path), doc_id, "warc", text_digest(text), source="crawl.warc.gz", offset=offset)
    assert got.text == text and got.same
    # Another record put in front: the member is no longer at its offset.
    path.write_bytes(gzip.compress(warc_record("http://example.org/new", "a new first page", 9)) + path.read_bytes())
    moved = read_again(str(path), doc_id, "warc", text_digest(text), source="crawl.warc.gz", offset=offset)
    assert moved.text is None or not moved.same
    found = read_again(str(path), doc_id, "warc", text_digest(text), source="crawl.warc.gz", offset=offset, search=True)
    assert found.text == text and found.same
