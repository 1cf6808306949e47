"""An HTML page that is not UTF-8 is read in the charset its <meta> names (simdoc.corpus.html).

A page saved from a site in windows-1251 or KOI8-R names its charset in a
``<meta>``, as browsers read it; a WARC record's page may too, when its
``Content-Type`` names none. Read as UTF-8, every letter of such a page was
one byte kept as itself, and the page never paired with its UTF-8 copy.
"""

from __future__ import annotations

import json
import random

import pytest
from conftest import records, warc_record, write

from simdoc.corpus.html import declared, meta_charset

LETTERS = "абвгдежзийклмнопрстуфхцчшщъыьэюя"


@pytest.mark.parametrize(
    "head, charset",
    [
        (b'<meta charset="windows-1251">', "cp1251"),
        (b"<META CHARSET='KOI8-R'/>", "koi8-r"),
        (b"<meta charset=shift_jis>", "shift_jis"),
        (b'<meta http-equiv="Content-Type" content="text/html; charset=windows-1251">', "cp1251"),
        (b'<meta content="text/html;charset=ISO-8859-5" http-equiv="content-type">', "iso8859-5"),
        (b'<meta charset="iso-8859-1">', "cp1252"),  # WHATWG: these labels mean windows-1252
        (b'<meta charset="us-ascii">', "cp1252"),
        (b'<meta charset="gb2312">', "gbk"),
        (b'<meta charset="utf-8">', None),
        (b'<meta charset="utf-16le">', None),  # a page's bytes say UTF-16 themselves
        (b'<meta charset="no-such-charset">', None),
        (b'<meta charset="base64">', None),  # a codec, not a text encoding
        (b'<meta name="description" content="charset">', None),
        (b"<p>charset=cp1251</p>", None),
        (b" " * 1024 + b'<meta charset="windows-1251">', None),  # past the first 1024 bytes
    ],
)
def test_meta_charset(head, charset):
    assert meta_charset(b"<html><head>" + head if len(head) < 1024 else head) == charset


def _russian(seed: int, words: int = 500) -> str:
    rng = random.Random(seed)
    return "Заголовок " + " ".join("".join(rng.choice(LETTERS) for _ in range(rng.randint(3, 8))) for _ in range(words))


def _page(meta: str, text: str) -> str:
    return f"<html><head>{meta}<title>t</title></head><body><p>{text}</p></body></html>"


def test_a_page_is_read_in_the_charset_its_meta_names(run, tmp_path):
    text = _russian(1)
    corpus = tmp_path / "c"
    write(corpus / "a1251.html", _page('<meta charset="windows-1251">', text).encode("cp1251"))
    write(corpus / "akoi.html", _page("<meta charset='koi8-r'>", text).encode("koi8-r"))
    write(corpus / "autf8.html", _page('<meta charset="utf-8">', text).encode())
    # Saved again in UTF-8, its old <meta> kept: UTF-8 stands.
    write(corpus / "stale.html", _page('<meta http-equiv="Content-Type" content="text/html; charset=windows-1251">', text).encode())
    page = _page('<meta charset="windows-1251">', text).encode("cp1251")
    write(corpus / "w.warc", warc_record("http://a.example/", page, 1, "text/html") + warc_record("http://b.example/", page, 2, "text/html; charset=utf-8"))
    write(corpus / "other.html", _page('<meta charset="windows-1251">', _russian(2)).encode("cp1251"))
    r = run("pairs", corpus, "--index", tmp_path / "idx", "-t", "0.5", "-j", "1")
    assert r.exit_code == 0, r.stderr
    same = ["a1251.html", "akoi.html", "autf8.html", "stale.html", "w.warc/#http://a.example/"]
    assert {frozenset(x[:2]) for x in records(r)} == {frozenset((x, y)) for x in same for y in same if x < y}
    assert all(x[3] == "1.0000" for x in records(r))  # verified: the documents read again alike
    # The record whose Content-Type names UTF-8 is read so (its bytes kept as themselves), and said.
    assert "w.warc: response 2 (http://b.example/): bytes invalid in their charset, compared as they are" in r.stderr
    assert "a1251.html" not in r.stderr and "akoi.html" not in r.stderr


def test_a_byte_invalid_in_the_named_charset_is_kept_and_said(run, tmp_path):
    raw = _page('<meta charset="windows-1251">', _russian(3)).encode("cp1251").replace(b"</p>", b"\x98</p>")  # 0x98: no character
    write(tmp_path / "a.html", raw)
    _, text, clean = declared(raw.decode("utf-8", "surrogateescape"))
    assert not clean and "\udc98" in text and "Заголовок" in text
    r = run("show", tmp_path / "a.html", tmp_path / "a.html", "-f", "json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["set_jaccard"] == 1.0
    assert "a.html: bytes invalid in cp1251, the charset its <meta> names (such bytes are compared as they are)" in r.stderr


def test_show_reads_a_page_as_the_index_does(run, tmp_path):
    text = _russian(4)
    write(tmp_path / "a.html", _page('<meta charset="windows-1251">', text).encode("cp1251"))
    write(tmp_path / "b.txt", text.encode())
    r = run("show", tmp_path / "a.html", tmp_path / "b.txt", "-f", "json")
    assert r.exit_code == 0 and r.stderr == "", r.stderr
    assert json.loads(r.stdout)["set_jaccard"] == 1.0
