"""The HTTP header of a WARC response ends at its first blank line, however its lines end; one
whose end is not within the room a header has is skipped and listed, never read as an empty page.

Before: a header whose last line ended in LF and whose blank line was CRLF ("\\n\\r\\n", which
warcio reads as the header's end) was not seen to end, so the whole block was taken as header and
the page indexed as an empty document, without a word; so was a page whose header ran past 64 KiB
(many large cookies): its text lost, no warning, nothing in `stats --skipped`.
"""

from __future__ import annotations

from click.testing import CliRunner

from simdoc.cli import cli
from simdoc.corpus import warc

TEXT = "the ferry timetable for the winter months, with every crossing to the islands listed " * 6


def _response(uri: str, http_head: bytes, payload: bytes, rid: int) -> bytes:
    block = http_head + payload
    head = (
        "WARC/1.0\r\nWARC-Type: response\r\n"
        f"WARC-Record-ID: <urn:uuid:00000000-0000-0000-0000-{rid:012d}>\r\n"
        f"WARC-Target-URI: {uri}\r\nWARC-Date: 2024-01-01T00:00:00Z\r\n"
        f"Content-Type: application/http; msgtype=response\r\nContent-Length: {len(block)}\r\n\r\n"
    ).encode()
    return head + block + b"\r\n\r\n"


def test_http_header_ends_at_its_first_blank_line_whatever_ends_its_lines():
    for head, start in ((b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n", 45), (b"HTTP/1.1 200 OK\nContent-Type: text/plain\n\n", 42),
                        (b"HTTP/1.1 200 OK\nContent-Type: text/plain\n\r\n", 43), (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\n\r\n", 44)):
        status, fields, at = warc._http(head + b"body")
        assert (status, fields["content-type"], at) == (200, "text/plain", start), head
        assert (head + b"body")[at:] == b"body"


def test_pages_with_odd_or_huge_http_headers_are_indexed_or_listed_never_emptied(tmp_path):
    c = tmp_path / "c"
    c.mkdir()
    cookies = b"".join(b"Set-Cookie: c%d=%s\r\n" % (i, b"x" * 1000) for i in range(70))  # 70 KB of header
    records = [
        _response("http://e.org/mixed", b"HTTP/1.1 200 OK\nContent-Type: text/plain\n\r\n", TEXT.encode(), 1),
        _response("http://e.org/cookies", b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n" + cookies + b"\r\n", TEXT.encode(), 2),
    ]
    (c / "crawl.warc").write_bytes(b"".join(records))
    (c / "page.txt").write_text(TEXT)
    r = CliRunner().invoke(cli, ["pairs", str(c), "--index", str(tmp_path / "idx"), "-j", "1"])
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "crawl.warc/#http://e.org/mixed\tpage.txt\t1.0000\t1.0000\n"
    assert "2 documents" in r.stderr
    assert "response 2 (http://e.org/cookies): no end of its HTTP header in 64 KiB, skipped" in r.stderr
    s = CliRunner().invoke(cli, ["stats", "--index", str(tmp_path / "idx"), "--skipped"])
    assert s.stdout == "crawl.warc/#http://e.org/cookies\tno end of its HTTP header in 64 KiB, skipped\n"
    t = CliRunner().invoke(cli, ["stats", "--index", str(tmp_path / "idx")])
    assert "documents: 2 (0 with no shingles" in t.stdout
