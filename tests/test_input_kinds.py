"""Input selection and kinds: compressed files (.gz, .bz2, .xz, .zst), --include and --exclude globs."""

import bz2
import gzip
import lzma

import pytest
from click.testing import CliRunner

from simdoc.cli import cli
from simdoc.corpus import read_document

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
    assert "simdoc: 1 documents" in r.stderr and r.stdout == ""
    r = runner.invoke(cli, ["pairs", str(corpus), "--index", str(tmp_path / "i2"), "--include", "*.txt", "--include", "*.md", "--exclude", "keep/*"])
    assert r.stdout == "drop/a.md\tdrop/a.txt\t1.0000\t1.0000\n"
    # The globs are index parameters.
    again = runner.invoke(cli, ["pairs", str(corpus), "--index", str(idx), "--include", "*.md"])
    assert again.exit_code == 4 and "include" in again.stderr
    same = runner.invoke(cli, ["pairs", str(corpus), "--index", str(idx)])
    assert same.exit_code == 0 and "simdoc: 1 documents" in same.stderr
