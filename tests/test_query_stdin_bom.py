"""`simdoc query -` reads a UTF-8 byte-order mark as `pairs` reads a file's: dropped.

A file saved with a BOM (Notepad's "UTF-8") is indexed without it, and
`simdoc query FILE` reads it so; `cat FILE | simdoc query -` shingled the
mark as a character and printed a lower Jaccard for the same bytes.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import simdoc.corpus.streaming as streaming
from simdoc.cli import cli

BOM = b"\xef\xbb\xbf"
TEXT = "Tide pools at low water: anemones, limpets and a crab under every stone. " * 30


@pytest.fixture
def indexed(tmp_path):
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "with-bom.txt").write_bytes(BOM + TEXT.encode())
    (corpus / "other.txt").write_bytes(b"Something else entirely about ferries and harbours. " * 20)
    idx = tmp_path / "idx"
    r = CliRunner().invoke(cli, ["pairs", str(corpus), "--index", str(idx), "-q"])
    assert r.exit_code == 0, r.stderr
    return corpus, idx


@pytest.mark.parametrize("long", [False, True])
def test_a_query_on_stdin_drops_the_bom_as_a_file_query_does(indexed, monkeypatch, long):
    corpus, idx = indexed
    runner = CliRunner()
    from_file = runner.invoke(cli, ["query", str(corpus / "with-bom.txt"), "--index", str(idx)])
    assert from_file.exit_code == 0, from_file.stderr
    assert from_file.stdout.split("\t")[1:] == ["with-bom.txt", "1.0000", "1.0000\n"]
    if long:  # a text on stdin past LARGE_CHARS is copied to a temporary file and streamed
        monkeypatch.setattr(streaming, "LARGE_CHARS", 1 << 10)
    r = runner.invoke(cli, ["query", "-", "--index", str(idx)], input=BOM + TEXT.encode())
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "-\t" + "\t".join(from_file.stdout.split("\t")[1:])
