"""Crawl files as crawlers write them (issue 30 items 1-5, issue 28 item 6).

Every test writes its own WARC or WET file, runs `simdoc pairs` on it and
checks each pair's exact Jaccard against the Jaccard of the texts the test
expects, computed here with simdoc's own shingling.
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma

import pytest
from click.testing import CliRunner

from simdoc.cli import cli
from conftest import printed_jaccard as jaccard_of, tsv_pairs as pairs

def page(i: int, change: int = 0) -> str:
    """A text of its own for each ``i`` (60 words drawn with seed ``i``); ``change`` words of
    it replaced (a near-duplicate)."""
    import random

    rng = random.Random(i)
    words = [rng.choice(VOCABULARY) + rng.choice(("", "s", "ed", "ing")) for _ in range(60)]
    for c in range(change):
        words[3 + 7 * c] = f"edit{c}"
    return " ".join(words)


VOCABULARY = (
    "harbour lantern festival port ellery saturday august stall music parade boat quay baker bread tide "
    "crane rope museum hour ferry strike island gazette courier lentil soup policy remote work essay pool "
    "river bridge market garden school library window winter summer mountain valley forest meadow"
).split()


def record(uri: str, body: bytes | str, rid: int, *, kind: str = "response", status: int = 200,
           ctype: str = "text/plain; charset=utf-8", length_delta: int = 0, length: int | None = None) -> bytes:
    """One WARC record. A response or revisit gets an HTTP header (``status``, ``ctype``); a
    resource or conversion record has ``ctype`` as its own Content-Type. ``length``: a false Content-Length."""
    raw = body.encode() if isinstance(body, str) else body
    if kind in ("response", "revisit"):
        block = f"HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\n\r\n".encode() + raw
        warc_type = "application/http; msgtype=response"
    else:
        block, warc_type = raw, ctype
    claimed = len(block) + length_delta if length is None else length
    head = (
        f"WARC/1.0\r\nWARC-Type: {kind}\r\n"
        f"WARC-Record-ID: <urn:uuid:00000000-0000-0000-0000-{rid:012d}>\r\n"
        f"WARC-Target-URI: {uri}\r\nWARC-Date: 2024-01-01T00:00:00Z\r\n"
        f"Content-Type: {warc_type}\r\nContent-Length: {claimed}\r\n\r\n"
    ).encode()
    return head + block + b"\r\n\r\n"






def skipped(index) -> list[dict]:
    r = CliRunner().invoke(cli, ["stats", "--index", str(index), "--skipped", "--format", "json"])
    assert r.exit_code == 0, r.stderr
    return [json.loads(line) for line in r.stdout.splitlines()]


def crawl(n: int = 4) -> tuple[list[bytes], dict[str, str]]:
    """Records of two near-duplicate pairs (0~1, 2~3) and an unrelated page, with their texts."""
    texts = {"http://e.org/0": page(0), "http://e.org/1": page(0, 2), "http://e.org/2": page(2), "http://e.org/3": page(2, 1),
             "http://e.org/9": "opening hours of the town museum, closed on mondays"}
    return [record(u, t, i + 1) for i, (u, t) in enumerate(texts.items())], texts


def expected(name: str, texts: dict[str, str], a: str, b: str) -> tuple[tuple[str, str], str]:
    return (f"{name}/#{a}", f"{name}/#{b}"), jaccard_of(texts[a], texts[b])


# ---------------------------------------------------------------- issue 28 item 6: broken records


def test_a_record_cut_short_is_skipped_and_listed_and_the_others_are_kept(tmp_path):
    records, texts = crawl()
    data = b"".join(records[:4]) + records[4][:-40]  # cut inside the last record's body
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "crawl.warc").write_bytes(data)
    got, err = pairs(tmp_path / "c", tmp_path / "i")
    assert got == dict([expected("crawl.warc", texts, "http://e.org/0", "http://e.org/1"),
                        expected("crawl.warc", texts, "http://e.org/2", "http://e.org/3")])
    assert "record 5 (http://e.org/9)" in err and "file cut short?" in err
    assert "simdoc: 4 documents" in err
    left = skipped(tmp_path / "i")
    assert [s["id"] for s in left] == ["crawl.warc/#http://e.org/9"] and "Content-Length" in left[0]["reason"]


def test_a_header_line_that_is_no_field_then_a_folded_line_is_read_past_not_a_traceback(tmp_path):
    """A damaged header (seen: a single-stream .warc.gz decoded past a damaged byte) can hold a
    line with no colon and then one that starts with a blank, as a folded field's next line
    would: it continued the field named by the whole bad line, which was never a key (KeyError,
    and the run ended in a traceback)."""
    records, texts = crawl()
    bad = records[4].replace(b"WARC-Date:", b"garbled line with no colon\r\n  folded after it\r\nWARC-Date:", 1)
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "crawl.warc").write_bytes(b"".join(records[:4]) + bad)
    got, err = pairs(tmp_path / "c", tmp_path / "i")
    assert "Traceback" not in err
    assert got == dict([expected("crawl.warc", texts, "http://e.org/0", "http://e.org/1"),
                        expected("crawl.warc", texts, "http://e.org/2", "http://e.org/3")])
    assert "simdoc: 5 documents" in err  # the bad lines are not fields; the record is read


@pytest.mark.parametrize("claimed", [10**12, "+300"])
def test_a_false_content_length_swallows_no_record(tmp_path, claimed):
    records, texts = crawl()
    body = page(0, 2)
    if claimed == "+300":  # longer than the record, inside the file: does not end where a record starts
        bad = record("http://e.org/1", body, 2, length_delta=300)
    else:
        bad = record("http://e.org/1", body, 2, length=claimed)
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "crawl.warc.gz").write_bytes(gzip.compress(records[0] + bad + b"".join(records[2:])))
    got, err = pairs(tmp_path / "c", tmp_path / "i")
    assert got == dict([expected("crawl.warc.gz", texts, "http://e.org/2", "http://e.org/3")])
    assert "simdoc: 4 documents" in err  # 0, 2, 3, 9: the two records after the bad one are there
    assert "record 2 (http://e.org/1)" in err and "reading on from the next record header" in err
    assert [s["id"] for s in skipped(tmp_path / "i")] == ["crawl.warc.gz/#http://e.org/1"]


# ---------------------------------------------------------------- issue 30 item 2-3: every compression


def _zstd(data: bytes) -> bytes:
    zstandard = pytest.importorskip("zstandard")
    return zstandard.ZstdCompressor().compress(data)


COMPRESSIONS = {
    "crawl.warc": lambda recs: b"".join(recs),
    "crawl.warc.gz": lambda recs: b"".join(gzip.compress(r) for r in recs),  # one member a record
    "one-member.warc.gz": lambda recs: gzip.compress(b"".join(recs)),  # gzip crawl.warc
    "crawl.warc.bz2": lambda recs: bz2.compress(b"".join(recs)),
    "crawl.warc.xz": lambda recs: lzma.compress(b"".join(recs)),
    "crawl.warc.zst": lambda recs: _zstd(b"".join(recs)),
}


@pytest.mark.parametrize("name", list(COMPRESSIONS))
def test_every_compression_gives_the_records_and_verifies_them(tmp_path, name):
    records, texts = crawl()
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / name).write_bytes(COMPRESSIONS[name](records))
    got, err = pairs(tmp_path / "c", tmp_path / "i")
    assert got == dict([expected(name, texts, "http://e.org/0", "http://e.org/1"), expected(name, texts, "http://e.org/2", "http://e.org/3")])
    assert "simdoc: 5 documents" in err and "changed since" not in err and "warning" not in err.lower()
    # Verified again from the index alone: each record is found again where it was.
    r = CliRunner().invoke(cli, ["pairs", "--index", str(tmp_path / "i"), "--all-candidates", "--format", "tsv"])
    assert r.exit_code == 0 and "changed since" not in r.stderr and "no longer" not in r.stderr, r.stderr
    from simdoc.stages.reread import reader_of
    from simdoc.store.loaded import open_index

    loaded = open_index(tmp_path / "i")
    reader = reader_of(loaded)
    sets = reader.read_sets(list(range(len(loaded.docs().ids))))
    assert all(s is not None for s in sets.values())


# ---------------------------------------------------------------- issue 30 item 1: WET


@pytest.mark.parametrize("name", ["crawl.warc.wet.gz", "crawl.warc.wet", "crawl.wet", "conversions.warc"])
def test_wet_conversion_records_are_documents(tmp_path, name):
    _, texts = crawl()
    info = b"WARC/1.0\r\nWARC-Type: warcinfo\r\nContent-Type: application/warc-fields\r\nContent-Length: 9\r\n\r\nsoftware:\r\n\r\n"
    recs = [info] + [record(u, t, i + 1, kind="conversion", ctype="text/plain") for i, (u, t) in enumerate(texts.items())]
    data = b"".join(gzip.compress(r) for r in recs) if name.endswith(".gz") else b"".join(recs)
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / name).write_bytes(data)
    got, err = pairs(tmp_path / "c", tmp_path / "i")
    assert got == dict([expected(name, texts, "http://e.org/0", "http://e.org/1"), expected(name, texts, "http://e.org/2", "http://e.org/3")])
    assert "simdoc: 5 documents" in err  # the text only: no WARC header is in a document


def test_resource_records_are_documents(tmp_path):
    _, texts = crawl()
    recs = [record(u, t, i + 1, kind="resource", ctype="text/plain") for i, (u, t) in enumerate(texts.items())]
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "r.warc").write_bytes(b"".join(recs))
    got, _ = pairs(tmp_path / "c", tmp_path / "i")
    assert got == dict([expected("r.warc", texts, "http://e.org/0", "http://e.org/1"), expected("r.warc", texts, "http://e.org/2", "http://e.org/3")])


# ---------------------------------------------------------------- issue 30 item 4: charsets


def test_a_record_with_an_unknown_charset_loses_nothing_else(tmp_path):
    records, texts = crawl()
    odd = record("http://e.org/odd", page(0, 1).encode(), 50, ctype="text/plain; charset=utf8mb4")
    latin = record("http://e.org/latin", page(2, 2).replace("bread", "pâté").encode("latin-1"), 51, ctype="text/plain; charset=iso-8859-1")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "crawl.warc").write_bytes(b"".join(records) + odd + latin)
    got, err = pairs(tmp_path / "c", tmp_path / "i")
    texts["http://e.org/odd"] = page(0, 1)  # read as UTF-8
    texts["http://e.org/latin"] = page(2, 2).replace("bread", "pâté")
    want = dict(expected("crawl.warc", texts, a, b) for a, b in [
        ("http://e.org/0", "http://e.org/1"), ("http://e.org/0", "http://e.org/odd"), ("http://e.org/1", "http://e.org/odd"),
        ("http://e.org/2", "http://e.org/3"), ("http://e.org/2", "http://e.org/latin"), ("http://e.org/3", "http://e.org/latin"),
    ])
    assert got == {k: v for k, v in want.items() if float(v) >= 0.6}
    assert "simdoc: 7 documents" in err and "skipped" not in err
    assert "response 6 (http://e.org/odd): unknown charset 'utf8mb4', read as UTF-8" in err


# ---------------------------------------------------------------- issue 30 item 5: HTTP status, revisits


def test_error_pages_and_revisits_are_left_out_and_listed_unless_asked_for(tmp_path):
    records, texts = crawl()
    errors = [record(f"http://e.org/missing{i}", "404 page not found, the page you asked for is not here " + "x" * i, 60 + i, status=404)
              for i in range(2)]
    revisit = record("http://e.org/0", page(0), 70, kind="revisit")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "crawl.warc").write_bytes(b"".join(records) + b"".join(errors) + revisit)
    got, err = pairs(tmp_path / "c", tmp_path / "i")
    assert got == dict([expected("crawl.warc", texts, "http://e.org/0", "http://e.org/1"), expected("crawl.warc", texts, "http://e.org/2", "http://e.org/3")])
    assert "simdoc: 5 documents" in err
    left = {s["id"]: s["reason"] for s in skipped(tmp_path / "i")}
    assert left == {
        "crawl.warc/#http://e.org/missing0": "HTTP status 404, left out (--all-responses includes it)",
        "crawl.warc/#http://e.org/missing1": "HTTP status 404, left out (--all-responses includes it)",
        "crawl.warc/#http://e.org/0": "revisit record, left out (--all-responses includes it)",
    }
    # Kept across an update that does not read the file again.
    (tmp_path / "c" / "note.txt").write_text("a note", encoding="utf-8")
    pairs(tmp_path / "c", tmp_path / "i")
    assert len(skipped(tmp_path / "i")) == 3
    # Asking for them is a parameter of the index.
    r = CliRunner().invoke(cli, ["pairs", str(tmp_path / "c"), "--index", str(tmp_path / "i"), "--all-responses"])
    assert r.exit_code == 4 and "--all-responses" in r.stderr and "--rebuild" in r.stderr
    got, err = pairs(tmp_path / "c", tmp_path / "i", "--all-responses", "--rebuild")
    e0, e1 = (f"404 page not found, the page you asked for is not here {'x' * i}" for i in range(2))
    assert got[("crawl.warc/#http://e.org/missing0", "crawl.warc/#http://e.org/missing1")] == jaccard_of(e0, e1)
    assert "simdoc: 9 documents" in err  # 5 pages, 2 error pages, the revisit (no body) and the note
    assert skipped(tmp_path / "i") == []


# ---------------------------------------------------------------- issue 30 item 6: main content


def boilerplate_page(article: str, site: str) -> str:
    """A page whose article is wrapped in a site's navigation, sidebar and footer."""
    nav = "".join(f'<li><a href="/{w}">{w} {site}</a></li>' for w in ["home", "news", "sport", "weather", "contact", "about us", "shop"])
    return (
        f"<html><head><title>t</title></head><body><header><nav><ul>{nav}</ul></nav></header>"
        f"<main><article><h1>Title</h1><p>{article}</p><p>{article[::-1]}</p></article></main>"
        f"<aside><ul>{nav}</ul></aside><footer><p>Copyright {site} 2024. All rights reserved. Privacy. Cookies.</p></footer>"
        "</body></html>"
    )


def test_main_content_keeps_only_the_article_of_html_files_and_warc_records(tmp_path):
    pytest.importorskip("resiliparse")
    a, b = page(1), page(1, 2)
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "a.html").write_text(boilerplate_page(a, "alpha"), encoding="utf-8")
    (corpus / "b.html").write_text(boilerplate_page(b, "beta"), encoding="utf-8")
    (corpus / "crawl.warc").write_bytes(
        record("http://e.org/a", boilerplate_page(a, "gamma"), 1, ctype="text/html; charset=utf-8")
        + record("http://e.org/z", boilerplate_page(page(5), "delta"), 2, ctype="text/html")
    )
    main = {"a.html": f"Title\n\n{a}\n\n{a[::-1]}", "b.html": f"Title\n\n{b}\n\n{b[::-1]}", "crawl.warc/#http://e.org/a": f"Title\n\n{a}\n\n{a[::-1]}"}
    full, _ = pairs(corpus, tmp_path / "full", "--threshold", "0.5")
    assert ("a.html", "b.html") in full and float(full[("a.html", "b.html")]) < float(jaccard_of(main["a.html"], main["b.html"]))
    got, _ = pairs(corpus, tmp_path / "main", "--main-content", "--threshold", "0.5")
    assert got == {(x, y): jaccard_of(main[x], main[y]) for x, y in [("a.html", "b.html"), ("a.html", "crawl.warc/#http://e.org/a"),
                                                                       ("b.html", "crawl.warc/#http://e.org/a")]}
    assert got[("a.html", "crawl.warc/#http://e.org/a")] == "1.0000"  # the same article on two sites
    # A parameter of the index: another value needs --rebuild.
    r = CliRunner().invoke(cli, ["pairs", str(corpus), "--index", str(tmp_path / "full"), "--main-content"])
    assert r.exit_code == 4 and "--main-content" in r.stderr and "--rebuild" in r.stderr
    # Verified from the index alone, read again as indexed.
    again = CliRunner().invoke(cli, ["pairs", "--index", str(tmp_path / "main"), "--all-candidates", "--format", "tsv", "--threshold", "0.5"])
    assert again.exit_code == 0 and "changed since" not in again.stderr, again.stderr
    shown = CliRunner().invoke(cli, ["show", str(corpus), "--index", str(tmp_path / "main"), "a.html", "b.html", "--format", "json"])
    assert shown.exit_code == 0 and f"{json.loads(shown.stdout)['set_jaccard']:.4f}" == got[("a.html", "b.html")], shown.stderr


@pytest.mark.parametrize("name", list(COMPRESSIONS))
def test_the_file_digest_is_of_its_bytes_whatever_is_read_again(tmp_path, name):
    """One pass reads the records and digests the file; going back after a broken record digests nothing twice."""
    import hashlib

    from simdoc.corpus.warc import read_warc

    records, _ = crawl()
    records[1] = record("http://e.org/1", page(0, 2), 2, length=10**12)
    path = tmp_path / name
    path.write_bytes(COMPRESSIONS[name](records))
    got = read_warc(str(path), name)
    assert got.digest == hashlib.blake2b(path.read_bytes(), digest_size=16).hexdigest()
    assert [d[0] for d in got.docs] == [f"{name}/#http://e.org/{i}" for i in (0, 2, 3, 9)]


def test_a_broken_record_with_a_nul_in_its_uri_is_listed_by_a_name_the_manifest_takes(tmp_path):
    records, texts = crawl()
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "crawl.warc").write_bytes(b"".join(records[:4]) + record("http://e.org/\0x", "cut", 9, length=999))
    got, err = pairs(tmp_path / "c", tmp_path / "i")
    assert got == dict([expected("crawl.warc", texts, "http://e.org/0", "http://e.org/1"), expected("crawl.warc", texts, "http://e.org/2", "http://e.org/3")])
    assert [s["id"] for s in skipped(tmp_path / "i")] == ["crawl.warc/#http://e.org/%00x"]
    assert CliRunner().invoke(cli, ["check", "--index", str(tmp_path / "i")]).exit_code == 0


def test_an_index_made_before_simdoc_read_warc_itself_reads_its_warc_files_once_more(tmp_path, settled):
    from simdoc.store.directory import IndexStore
    from simdoc.store.manifest import dump

    records, texts = crawl()
    errors = [record(f"http://e.org/missing{i}", page(7 + i), 60 + i, status=404) for i in range(2)]  # pair with nothing
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "crawl.warc").write_bytes(b"".join(records) + b"".join(errors))
    (tmp_path / "c" / "note.txt").write_text("a note that pairs with nothing at all", encoding="utf-8")
    pairs(tmp_path / "c", tmp_path / "i", "--all-responses")  # as fastwarc read it: every status
    manifest = IndexStore(tmp_path / "i").read_manifest()
    for key in ("unicode", "min_length", "main_content", "all_responses"):
        del manifest["stages"]["shingle"]["params"][key]
    (tmp_path / "i" / "manifest.json").write_bytes(dump(manifest))
    got, err = pairs(tmp_path / "c", tmp_path / "i", "-v")
    assert got == dict([expected("crawl.warc", texts, "http://e.org/0", "http://e.org/1"), expected("crawl.warc", texts, "http://e.org/2", "http://e.org/3")])
    assert "read 1 file," in err  # the WARC file; note.txt is kept
    assert len(skipped(tmp_path / "i")) == 2
    _, err = pairs(tmp_path / "c", tmp_path / "i", "-v")
    assert "shingle: up to date" in err


def test_a_body_sent_gzip_encoded_is_decoded_and_one_in_an_unknown_coding_skipped_alone(tmp_path):
    import zlib

    records, texts = crawl()

    def encoded(uri, text, rid, coding, data):
        block = f"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Encoding: {coding}\r\n\r\n".encode() + data
        head = (f"WARC/1.0\r\nWARC-Type: response\r\nWARC-Target-URI: {uri}\r\n"
                f"Content-Type: application/http; msgtype=response\r\nContent-Length: {len(block)}\r\n\r\n").encode()
        return head + block + b"\r\n\r\n"

    z = zlib.compressobj(wbits=-15)
    extra = [encoded("http://e.org/gz", page(0, 1), 20, "gzip", gzip.compress(page(0, 1).encode())),
             encoded("http://e.org/raw-deflate", page(2, 2), 21, "deflate", z.compress(page(2, 2).encode()) + z.flush()),
             encoded("http://e.org/br", page(0), 22, "br", b"\x8b\x02\x80not really brotli")]
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "crawl.warc").write_bytes(b"".join(records) + b"".join(extra))
    got, err = pairs(tmp_path / "c", tmp_path / "i")
    texts["http://e.org/gz"], texts["http://e.org/raw-deflate"] = page(0, 1), page(2, 2)
    want = dict(expected("crawl.warc", texts, a, b) for a, b in [
        ("http://e.org/0", "http://e.org/1"), ("http://e.org/0", "http://e.org/gz"), ("http://e.org/1", "http://e.org/gz"),
        ("http://e.org/2", "http://e.org/3"), ("http://e.org/2", "http://e.org/raw-deflate"), ("http://e.org/3", "http://e.org/raw-deflate"),
    ])
    assert got == {k: v for k, v in want.items() if float(v) >= 0.6}
    assert "response 8 (http://e.org/br): Content-Encoding 'br' cannot be decoded, skipped" in err
    assert [s["id"] for s in skipped(tmp_path / "i")] == ["crawl.warc/#http://e.org/br"]
