"""An HTML page is parsed whole, so one longer than MEMBER_BYTES is skipped, never held (issue 28 item 7)."""

from __future__ import annotations

import gzip
import tracemalloc

import pytest
from conftest import TEXT_A, write

from simdoc.corpus import formats as records
from simdoc.corpus.files import read_document
from simdoc.corpus.read import read_again, read_file

MB = 1 << 20


def _page(n_bytes: int) -> bytes:
    """An HTML page of about ``n_bytes`` bytes, TEXT_A first."""
    body = b"<p>" + TEXT_A.encode() + b"</p>" + b"<p>lorem ipsum dolor</p>" * (n_bytes // 24)
    return b"<html><body>" + body + b"</body></html>"


def test_a_page_past_the_bound_is_skipped_unread_by_every_reader(tmp_path, monkeypatch):
    monkeypatch.setattr(records, "MEMBER_BYTES", 64 << 10)
    page = _page(8 * MB)
    plain = write(tmp_path / "big.html", page)
    packed = write(tmp_path / "big.html.gz", gzip.compress(page, 1))
    for path in (plain, packed):
        tracemalloc.start()
        try:
            got = read_file(str(path), path.name, "html", None, False, ("text", None))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 1 * MB, peak  # the 8 MB page was never held
        assert got.result.text is None and got.result.status == "unreadable"
        assert got.result.warning.startswith("longer than 65536 bytes, skipped (an HTML page is parsed whole; --max-bytes N")
        # Verification reads it again the same way: it can never be a pair.
        again = read_again(str(path), path.name, "html", b"\0" * 16)
        assert again.text is None and not again.same and again.problem.startswith("longer than 65536 bytes, skipped")


def test_a_page_at_the_bound_is_read_and_max_bytes_reads_the_first_bytes_of_a_longer_one(tmp_path, monkeypatch):
    pytest.importorskip("resiliparse")
    page = _page(4000)
    path = write(tmp_path / "p.html", page)
    monkeypatch.setattr(records, "MEMBER_BYTES", len(page))  # exactly the bound: read
    got = read_file(str(path), "p.html", "html", None, False, ("text", None))
    assert got.result.status == "ok" and TEXT_A.strip() in got.result.text
    monkeypatch.setattr(records, "MEMBER_BYTES", len(page) - 1)  # one byte past it: skipped
    assert read_file(str(path), "p.html", "html", None, False, ("text", None)).result.status == "unreadable"
    # --max-bytes up to the bound reads the page's first bytes, as it always did.
    got = read_file(str(path), "p.html", "html", 200, False, ("text", None))
    assert got.result.status == "partial" and TEXT_A.strip() in got.result.text
    again = read_again(str(path), "p.html", "html", bytes.fromhex(read_document(str(path), 200).digest), max_bytes=200)
    assert again.same and TEXT_A.strip() in again.text
    # A --max-bytes over the bound does not lift it.
    assert read_file(str(path), "p.html", "html", len(page), False, ("text", None)).result.status == "unreadable"


def test_pairs_skips_a_long_page_and_stats_lists_it(run, tmp_path, monkeypatch):
    monkeypatch.setattr(records, "MEMBER_BYTES", 4096)
    corpus = tmp_path / "c"
    write(corpus / "a.txt", TEXT_A)
    write(corpus / "b.txt", TEXT_A)
    write(corpus / "big.html", _page(10_000))
    write(corpus / "big.html.gz", gzip.compress(_page(10_000)))  # 10 kB once decompressed, a few hundred bytes stored
    idx = tmp_path / "idx"
    r = run("pairs", corpus, "--index", idx, "-j", "1", "--verbose")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "a.txt\tb.txt\t1.0000\t1.0000\n"
    why = "longer than 4096 bytes, skipped (an HTML page is parsed whole; --max-bytes N, at most 4096, indexes its first N bytes)"
    assert f"big.html: {why}" in r.stderr and f"big.html.gz: {why}" in r.stderr
    s = run("stats", "--index", idx, "--skipped")
    assert s.exit_code == 0, s.stderr
    assert s.stdout.splitlines() == [f"big.html\t{why}", f"big.html.gz\t{why}"]
