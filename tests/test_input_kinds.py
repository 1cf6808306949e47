"""Input selection and kinds: compressed files (.gz, .bz2, .xz, .zst), --include and --exclude globs."""

import bz2
import gzip
import lzma
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from click.testing import CliRunner
from conftest import warc_record

from simdoc.cli import cli
from simdoc.corpus.files import read_document

TEXT = "Compressed or not, this document tells the same long story about river barges and tides. " * 5


def compress(kind: str, data: bytes) -> bytes:
    if kind == "gz":
        return gzip.compress(data)
    if kind == "bz2":
        return bz2.compress(data)
    if kind == "xz":
        return lzma.compress(data)
    zstandard = pytest.importorskip("zstandard")
    return zstandard.ZstdCompressor().compress(data)


@pytest.mark.parametrize("kind", ["gz", "bz2", "xz", "zst"])
def test_compressed_copy_pairs_with_the_plain_file(tmp_path, kind):
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "plain.txt").write_text(TEXT, encoding="utf-8")
    (corpus / f"packed.txt.{kind}").write_bytes(compress(kind, TEXT.encode()))
    (corpus / "other.txt").write_text("nothing alike at all, a shopping list: eggs, flour", encoding="utf-8")
    r = CliRunner().invoke(cli, ["pairs", str(corpus), "--index", str(tmp_path / "idx"), "-j", "1"])
    assert r.exit_code == 0, r.stderr
    assert r.stdout == f"packed.txt.{kind}\tplain.txt\t1.0000\t1.0000\n"
    assert read_document(str(corpus / f"packed.txt.{kind}")).text == TEXT


def test_corrupt_archive_is_skipped_with_a_warning(tmp_path):
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "a.txt").write_text(TEXT, encoding="utf-8")
    (corpus / "b.txt").write_text(TEXT, encoding="utf-8")
    (corpus / "broken.gz").write_bytes(b"\x1f\x8b\x08\x00 this is not really gzip data")
    r = CliRunner().invoke(cli, ["pairs", str(corpus), "--index", str(tmp_path / "idx"), "-j", "1"])
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "a.txt\tb.txt\t1.0000\t1.0000\n"
    assert "broken.gz: cannot decompress" in r.stderr and "(1 file skipped)" in r.stderr
    res = read_document(str(corpus / "broken.gz"))
    assert res.text is None and "cannot decompress" in res.warning


def test_max_bytes_counts_decompressed_bytes(tmp_path):
    path = tmp_path / "big.txt.gz"
    path.write_bytes(gzip.compress(b"abcdefghij" * 10_000))
    res = read_document(str(path), max_bytes=25)
    assert res.text == "abcdefghijabcdefghijabcde" and res.status == "partial"


def test_include_and_exclude_globs(tmp_path):
    corpus = tmp_path / "c"
    (corpus / "keep").mkdir(parents=True)
    (corpus / "drop").mkdir()
    for d in ("keep", "drop"):
        (corpus / d / "a.txt").write_text(TEXT, encoding="utf-8")
        (corpus / d / "a.md").write_text(TEXT, encoding="utf-8")
    runner = CliRunner()
    idx = tmp_path / "idx"
    r = runner.invoke(cli, ["pairs", str(corpus), "--index", str(idx), "--include", "*.txt", "--exclude", "drop/*"])
    assert r.exit_code == 0, r.stderr
    assert "simdoc: 1 document," in r.stderr and r.stdout == ""
    r = runner.invoke(cli, ["pairs", str(corpus), "--index", str(tmp_path / "i2"), "--include", "*.txt", "--include", "*.md", "--exclude", "keep/*"])
    assert r.stdout == "drop/a.md\tdrop/a.txt\t1.0000\t1.0000\n"
    # The globs are index parameters.
    again = runner.invoke(cli, ["pairs", str(corpus), "--index", str(idx), "--include", "*.md"])
    assert again.exit_code == 4 and "include" in again.stderr
    same = runner.invoke(cli, ["pairs", str(corpus), "--index", str(idx)])
    assert same.exit_code == 0 and "simdoc: 1 document," in same.stderr


def test_include_is_an_index_setting_and_says_so(tmp_path):
    """Issue 27, item 5: --include on an existing index is an error that names it an index setting."""
    corpus = tmp_path / "c"
    for name in ("a.txt", "b.txt", "a.md"):
        (corpus / name).parent.mkdir(parents=True, exist_ok=True)
        (corpus / name).write_text(TEXT, encoding="utf-8")
    runner = CliRunner()
    idx = tmp_path / "idx"
    assert runner.invoke(cli, ["pairs", str(corpus), "--index", str(idx)]).exit_code == 0
    for cmd, flag in (("pairs", "--include"), ("clusters", "--exclude"), ("dedup", "--include")):
        r = runner.invoke(cli, [cmd, str(corpus), "--index", str(idx), flag, "*.md"])
        assert r.exit_code == 4 and r.stdout == ""
        assert "--include and --exclude choose the documents an index holds, they do not filter its output" in r.stderr
        assert f"drop {flag} to use the index as built" in r.stderr and "another --index" in r.stderr
    # Another --index holds just those documents; the first index is untouched.
    narrow = runner.invoke(cli, ["pairs", str(corpus), "--index", str(tmp_path / "md.idx"), "--include", "*.txt"])
    assert narrow.stdout == "a.txt\tb.txt\t1.0000\t1.0000\n"
    helped = runner.invoke(cli, ["pairs", "--help"])
    assert "An index setting" in " ".join(helped.stdout.split())


def test_files_outside_include_are_never_warned_about_or_counted(tmp_path):
    """Issue 27, item 5: warnings and the skip count are of the included files only."""
    corpus = tmp_path / "c"
    (corpus / "docs").mkdir(parents=True)
    (corpus / "src" / "deep").mkdir(parents=True)
    for name in ("docs/a.txt", "docs/b.txt"):
        (corpus / name).write_text(TEXT, encoding="utf-8")
    (corpus / "docs" / "bin.txt").write_bytes(b"binary\0inside")  # included: warned and counted
    (corpus / "src" / "blob.o").write_bytes(b"\0\1\2")  # binary, not included
    (corpus / "src" / "link.c").symlink_to(corpus / "docs" / "a.txt")  # a link, not included
    (corpus / "docs" / "link.txt").symlink_to(corpus / "docs" / "a.txt")  # a link, included
    os.mkfifo(corpus / "src" / "pipe")  # not a regular file, not included
    loop = corpus / "src" / "deep" / "up"
    loop.symlink_to(corpus / "src")
    runner = CliRunner()
    args = ["pairs", str(corpus), "--index", str(tmp_path / "idx"), "--include", "docs/*", "--follow-symlinks"]
    r = runner.invoke(cli, args)
    assert r.exit_code == 0, r.stderr
    warned = sorted(line for line in r.stderr.splitlines() if line.startswith("warning:"))
    assert warned == ["warning: docs/bin.txt: binary file (NUL byte), skipped"]
    assert "(1 file skipped)" in r.stderr
    r = runner.invoke(cli, ["pairs", str(corpus), "--index", str(tmp_path / "idx2"), "--include", "*.txt"])
    warned = sorted(line.split(":")[1].strip() for line in r.stderr.splitlines() if line.startswith("warning:"))
    assert warned == ["docs/bin.txt", "docs/link.txt"] and "(2 files skipped)" in r.stderr
    listed = runner.invoke(cli, ["stats", "--index", str(tmp_path / "idx2"), "--skipped"])
    assert [line.split("\t")[0] for line in listed.stdout.splitlines()] == ["docs/bin.txt", "docs/link.txt"]
    # --exclude too; and without globs every one of them is reported.
    r = runner.invoke(cli, ["pairs", str(corpus), "--index", str(tmp_path / "idx3"), "--exclude", "src/*"])
    assert "(2 files skipped)" in r.stderr
    r = runner.invoke(cli, ["pairs", str(corpus), "--index", str(tmp_path / "idx4")])
    assert "(6 files skipped)" in r.stderr


def test_several_folders_and_files_make_one_corpus(tmp_path):
    for d in ("site-a", "site-b"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "page.txt").write_text(TEXT, encoding="utf-8")
    (tmp_path / "notes.txt").write_text(TEXT, encoding="utf-8")
    (tmp_path / "other.txt").write_text("an unrelated shopping list: eggs, flour, lemons", encoding="utf-8")
    runner = CliRunner()
    idx = tmp_path / "idx"
    args = [str(tmp_path / "site-a"), str(tmp_path / "site-b"), str(tmp_path / "notes.txt")]
    r = runner.invoke(cli, ["pairs", *args, "--index", str(idx)])
    assert r.exit_code == 0, r.stderr
    assert r.stdout.splitlines() == [
        "notes.txt\tsite-a/page.txt\t1.0000\t1.0000",
        "notes.txt\tsite-b/page.txt\t1.0000\t1.0000",
        "site-a/page.txt\tsite-b/page.txt\t1.0000\t1.0000",
    ]
    # The same files through --files-from (NUL-separated) give the same ids and pairs.
    listing = b"\0".join(os.fsencode(a) for a in args)
    r2 = runner.invoke(cli, ["pairs", "--files0-from", "-", "-0", "--index", str(tmp_path / "i2")], input=listing)
    assert r2.exit_code == 0, r2.stderr
    assert r2.stdout_bytes.split(b"\0")[:4] == [b"notes.txt", b"site-a/page.txt", b"1.0000", b"1.0000"]
    # Newline-separated list with shingle, then pairs from the index.
    r3 = runner.invoke(cli, ["shingle", "--files-from", "-", "--index", str(tmp_path / "i3")], input="\n".join(args) + "\n")
    assert r3.exit_code == 0, r3.stderr
    r4 = runner.invoke(cli, ["pairs", "--index", str(tmp_path / "i3")])
    assert r4.stdout == r.stdout
    none = runner.invoke(cli, ["shingle", "--index", str(tmp_path / "i4")])
    assert none.exit_code == 2


def test_single_file_corpus(tmp_path):
    f = tmp_path / "one.txt"
    f.write_text(TEXT, encoding="utf-8")
    r = CliRunner().invoke(cli, ["pairs", str(f), "--index", str(tmp_path / "idx")])
    assert r.exit_code == 0 and r.stdout == "" and "simdoc: 1 document," in r.stderr


def test_jsonl_documents(tmp_path):
    import json as _json

    corpus = tmp_path / "c"
    corpus.mkdir()
    lines = [
        {"id": "a1", "text": TEXT},
        {"id": "a2", "text": "a different text about mountain goats and their steep paths, nothing else"},
        {"id": "a3", "text": TEXT.replace("barges", "boats")},
        {"id": "a1", "text": "a repeated id"},
        {"noise": True},
    ]
    body = "\n".join(_json.dumps(x) for x in lines) + "\nnot json\n\n"
    (corpus / "data.jsonl").write_text(body, encoding="utf-8")
    (corpus / "more.jsonl.gz").write_bytes(gzip.compress((_json.dumps({"id": "b", "text": TEXT}) + "\n").encode()))
    runner = CliRunner()
    idx = tmp_path / "idx"
    r = runner.invoke(cli, ["pairs", str(corpus), "--index", str(idx), "--id-field", "id", "-j", "1"])
    assert r.exit_code == 0, r.stderr
    assert r.stdout.splitlines()[:1] == ["data.jsonl/#a1\tmore.jsonl.gz/#b\t1.0000\t1.0000"]
    assert "data.jsonl/#a1\tdata.jsonl/#a3" in r.stdout
    assert "line 4: id 'a1' is taken (by line 1)" in r.stderr and "line 5: no string field 'text'" in r.stderr
    assert "line 6: not valid JSON" in r.stderr
    assert "simdoc: 5 documents" in r.stderr  # a1, a2, a3, a1@4 and b; the bad lines are skipped
    # Unchanged JSON Lines files are not re-read; a changed one is re-read as a whole.
    import os
    for p in corpus.iterdir():
        st = p.stat()
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns - 3600 * 10**9))
    same = runner.invoke(cli, ["pairs", str(corpus), "--index", str(idx), "--id-field", "id", "-j", "1"])
    assert same.stdout == r.stdout
    # A first --new report: everything is new to it.
    runner.invoke(cli, ["pairs", str(corpus), "--index", str(idx), "--new", "-j", "1"])
    with open(corpus / "data.jsonl", "a", encoding="utf-8") as fh:
        fh.write(_json.dumps({"id": "a9", "text": TEXT}) + "\n")
    new = runner.invoke(cli, ["pairs", str(corpus), "--index", str(idx), "--new", "-j", "1"])
    assert new.exit_code == 0, new.stderr
    assert all("data.jsonl/#a9" in line for line in new.stdout.splitlines())
    assert len(new.stdout.splitlines()) == 3
    full = runner.invoke(cli, ["pairs", str(corpus), "--index", str(tmp_path / "full"), "--id-field", "id", "-j", "1"])
    after = runner.invoke(cli, ["pairs", "--index", str(idx)])
    assert after.stdout == full.stdout
    chk = runner.invoke(cli, ["check", "--index", str(idx)])
    assert chk.exit_code == 0, chk.stdout


def test_jsonl_ids_default_to_line_numbers(tmp_path):
    import json as _json

    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "d.ndjson").write_text("\n".join(_json.dumps({"body": TEXT}) for _ in range(2)), encoding="utf-8")
    r = CliRunner().invoke(cli, ["pairs", str(corpus), "--index", str(tmp_path / "idx"), "--text-field", "body"])
    assert r.stdout == "d.ndjson/#1\td.ndjson/#2\t1.0000\t1.0000\n"


def test_warc_and_html_pages(tmp_path):
    pytest.importorskip("resiliparse")
    page = "<html><head><script>var x = 1;</script><style>p{}</style></head><body><p>" + TEXT + "</p></body></html>"
    other = "<html><body><p>A page about something else: opening hours of the town museum.</p></body></html>"
    records = [
        warc_record("http://example.org/a", page.encode(), 1, "text/html; charset=utf-8"),
        warc_record("http://example.org/b", other.encode(), 2, "text/html"),
        warc_record("http://example.org/a", page.encode(), 3, "text/html"),
        warc_record("http://example.org/img", b"\x89PNG...", 4, "image/png"),
    ]
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "crawl.warc.gz").write_bytes(b"".join(gzip.compress(r) for r in records))
    (corpus / "mirror.html").write_text(page.replace("<p>", "<p><b>").replace("</p>", "</b></p>"), encoding="utf-8")
    (corpus / "plain.txt").write_text(TEXT, encoding="utf-8")
    r = CliRunner().invoke(cli, ["pairs", str(corpus), "--index", str(tmp_path / "idx"), "-j", "1"])
    assert r.exit_code == 0, r.stderr
    ids = {"crawl.warc.gz/#http://example.org/a", "crawl.warc.gz/#http://example.org/a#<urn:uuid:00000000-0000-0000-0000-000000000003>", "mirror.html", "plain.txt"}
    got = [line.split("\t") for line in r.stdout.splitlines()]
    assert {g[0] for g in got} | {g[1] for g in got} == ids
    assert all(g[3] == "1.0000" for g in got) and len(got) == 6
    assert "simdoc: 5 documents" in r.stderr  # a, a again, b, mirror.html, plain.txt; the image is not a document


def test_report_commands_take_several_corpora_and_files_from(tmp_path):
    for d in ("site-a", "site-b"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "page.txt").write_text(TEXT, encoding="utf-8")
    runner = CliRunner()
    a, b = str(tmp_path / "site-a"), str(tmp_path / "site-b")
    r = runner.invoke(cli, ["clusters", a, b, "--index", str(tmp_path / "i1")])
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "1\t2\tsite-a/page.txt\tsite-b/page.txt\n"
    d = runner.invoke(cli, ["dedup", "--files-from", "-", "--index", str(tmp_path / "i2")], input=f"{a}\n{b}\n")
    assert d.exit_code == 0, d.stderr
    assert d.stdout == "site-b/page.txt\n"
    s = runner.invoke(cli, ["show", a, b, "site-a/page.txt", "site-b/page.txt", "--index", str(tmp_path / "i3"), "--format", "json"])
    assert s.exit_code == 0, s.stderr
    import json as _json

    shown = _json.loads(s.stdout)
    assert (shown["doc_a"], shown["doc_b"], shown["set_jaccard"]) == ("site-a/page.txt", "site-b/page.txt", 1.0)


def test_show_finds_passages_inside_jsonl(tmp_path):
    import json as _json

    corpus = tmp_path / "c"
    corpus.mkdir()
    rows = [{"id": "x", "text": TEXT}, {"id": "y", "text": TEXT.replace("tides", "currents")}]
    (corpus / "d.jsonl").write_text("\n".join(_json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    r = CliRunner().invoke(
        cli, ["show", str(corpus), "d.jsonl/#x", "d.jsonl/#y", "--id-field", "id", "--index", str(tmp_path / "i"), "--format", "json"]
    )
    assert r.exit_code == 0, r.stderr
    shown = _json.loads(r.stdout)
    assert shown["passages"] and "no passages" not in r.stderr


def test_show_reads_a_warc_member_at_its_offset(tmp_path):
    pytest.importorskip("resiliparse")
    import json as _json

    page = "<html><body><p>" + TEXT + "</p></body></html>"
    other = "<html><body><p>A page about something else: opening hours of the town museum.</p></body></html>"
    records = [
        warc_record("http://example.org/b", other.encode(), 1, "text/html"),
        warc_record("http://example.org/a", page.encode(), 2, "text/html"),
    ]
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "crawl.warc.gz").write_bytes(b"".join(gzip.compress(r) for r in records))
    (corpus / "plain.txt").write_text(TEXT.replace("tides", "currents"), encoding="utf-8")
    r = CliRunner().invoke(
        cli, ["show", str(corpus), "crawl.warc.gz/#http://example.org/a", "plain.txt", "--index", str(tmp_path / "i"), "--format", "json"]
    )
    assert r.exit_code == 0, r.stderr
    assert r.stderr == ""  # the record read at its offset is the one indexed
    shown = _json.loads(r.stdout)
    assert shown["passages"] and 0.5 < shown["set_jaccard"] < 1.0 and shown["words_a"] == len(TEXT.split())


def test_a_problem_on_many_jsonl_lines_is_one_short_warning(tmp_path):
    # Issue 17.15: a misspelt --text-field on a 20,000-line file gave one 889 KB warning line.
    import json as _json

    from simdoc.corpus.formats import split_jsonl

    text = "".join(_json.dumps({"body": f"text number {i}", "n": i}) + "\n" for i in range(20_000))
    docs, warnings = split_jsonl(text, "data.jsonl")
    assert docs == []
    assert warnings == [
        "20,000 lines (1, 2, 3, ...): no string field 'text', skipped",
        "the objects have the fields body, n: name the one with the text with --text-field",
    ]
    (tmp_path / "data.jsonl").write_text(text, encoding="utf-8")
    r = CliRunner().invoke(cli, ["pairs", str(tmp_path / "data.jsonl"), "--index", str(tmp_path / "idx")])
    assert r.exit_code == 3
    assert len(r.stderr) < 500, len(r.stderr)
    assert "20,000 lines" in r.stderr and "--text-field" in r.stderr


def test_jsonl_problems_are_counted_per_kind():
    from simdoc.corpus.formats import split_jsonl

    lines = ['{"id": "a", "text": "x"}', "nope", '{"id": "a", "text": "y"}', "nor this", '{"id": "a", "text": "z"}', "[1]"]
    docs, warnings = split_jsonl("\n".join(lines), "d.jsonl", id_field="id")
    assert [d[0] for d in docs] == ["d.jsonl/#a", "d.jsonl/#a@3", "d.jsonl/#a@5"]
    assert warnings == [
        "2 lines (2, 4): not valid JSON, skipped",
        "2 lines (3, 5): an id that repeats gets @LINE appended",
        "line 6: no string field 'text', skipped",
    ]


def test_how_a_file_is_read_is_told_by_the_end_of_its_name_as_by_the_whole_name():
    # how_read looks only at the end of a path's name (cached): it must agree with the
    # checks on the whole path for every ending, case and compression, and a long prefix.
    from simdoc.corpus import read as corpus_read
    from simdoc.corpus import streaming
    from simdoc.corpus.files import COMPRESSED, compression_of
    from simdoc.corpus.html import HTML_SUFFIXES, is_html
    from simdoc.corpus.parquet import PARQUET_SUFFIXES, is_parquet
    from simdoc.corpus.walk import JSONL_SUFFIXES, WARC_SUFFIXES, is_jsonl, is_warc

    def by_whole_name(path, size):
        for test, way in ((is_jsonl, "jsonl"), (is_warc, "warc"), (is_parquet, "parquet"), (is_html, "html")):
            if test(path):
                return way
        return "streamed" if size > streaming.STREAM_BYTES or compression_of(path) else "whole"

    endings = [*JSONL_SUFFIXES, *WARC_SUFFIXES, ".warc.wet", *PARQUET_SUFFIXES, *HTML_SUFFIXES, ".txt", "", ".gz.txt", "İ.html"]
    for ending in endings:
        for name in (ending, ending.upper()):
            for comp in ["", *COMPRESSED]:
                for prefix in ("", "a", "/some/long/folder/name.with.dots/doc"):
                    path = prefix + name + comp
                    for size in (10, streaming.STREAM_BYTES + 1):
                        assert corpus_read.how_read(path, size) == by_whole_name(path, size), path


def _by_whole_name(path, size):
    from simdoc.corpus import streaming
    from simdoc.corpus.files import compression_of
    from simdoc.corpus.html import is_html
    from simdoc.corpus.parquet import is_parquet
    from simdoc.corpus.walk import is_jsonl, is_warc

    for test, way in ((is_jsonl, "jsonl"), (is_warc, "warc"), (is_parquet, "parquet"), (is_html, "html")):
        if test(path):
            return way
    return "streamed" if size > streaming.STREAM_BYTES or compression_of(path) else "whole"


_PIECES = ["/", ".", "a", "K", "\u0130", "\u212a", "jsonl", "JSONL", "ndjson", "warc", "wet", "parquet", "PARQUET", "html", "htm", "xhtml",
           "HTML", "gz", "bz2", "xz", "zst", "txt", "..", "d.v2"]


@given(st.lists(st.sampled_from(_PIECES), max_size=12).map("".join), st.sampled_from([10, 1 << 40]))
@settings(max_examples=600, deadline=None)
def test_how_read_by_the_end_of_a_name_agrees_with_the_checks_on_the_whole_path(path, size):
    from simdoc.corpus import read as corpus_read

    assert corpus_read.how_read(path, size) == _by_whole_name(path, size), path


def test_how_read_decides_once_per_ending_not_once_per_file():
    # The shingle stage asks for every file of the corpus: 10^5 files with a few endings must be
    # a cache look-up each, not the suffix checks each (once keyed by the last 16 characters).
    from simdoc.corpus import read as corpus_read

    corpus_read._way_by_name.cache_clear()
    for i in range(3000):
        for ext in (".txt", ".md", ".jsonl.gz"):
            corpus_read.how_read(f"/corpus/d{i % 7:03d}/doc{i:07d}{ext}", 100)
    assert corpus_read._way_by_name.cache_info().misses <= 3
