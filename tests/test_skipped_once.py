"""A skipped file is warned about once, when first seen or when it changes; the count stays (issue 27, item 8)."""

from __future__ import annotations

import json
import os

from click.testing import CliRunner
from conftest import TEXT_A, write

from simdoc.cli import cli

LINK = "warning: link.txt: symbolic link, not followed (--follow-symlinks follows links)"
BINARY = "warning: blob.bin: binary file (NUL byte), skipped"


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def warned(r) -> list[str]:
    return [line for line in r.stderr.splitlines() if line.startswith("warning:")]


def _corpus(tmp_path):
    corpus = tmp_path / "c"
    write(corpus / "a.txt", TEXT_A)
    write(corpus / "b.txt", TEXT_A)
    (corpus / "blob.bin").write_bytes(b"\0\1\2 binary")
    (corpus / "link.txt").symlink_to(corpus / "a.txt")
    return corpus


def test_skipped_files_are_warned_about_once_and_counted_every_time(tmp_path):
    corpus, idx = _corpus(tmp_path), tmp_path / "idx"
    first = invoke("pairs", corpus, "--index", idx)
    assert first.exit_code == 0, first.stderr
    assert warned(first) == [LINK, BINARY] and "(2 files skipped)" in first.stderr
    again = invoke("pairs", corpus, "--index", idx)  # unchanged
    assert warned(again) == [] and "(2 files skipped)" in again.stderr
    write(corpus / "new.txt", "a document added tonight, nothing like the others at all")
    added = invoke("pairs", corpus, "--index", idx)  # a new build: the binary file is read again
    assert warned(added) == [] and "3 documents (2 files skipped)" in added.stderr
    quiet = invoke("pairs", corpus, "--index", idx, "-q")
    assert quiet.stderr.startswith("simdoc: 2 files skipped;")
    # --verbose lists every one, whether the index is up to date or not.
    assert warned(invoke("pairs", corpus, "--index", idx, "-v")) == [LINK, BINARY]
    write(corpus / "new.txt", "the document added tonight, changed the morning after, still unlike the others")
    assert warned(invoke("pairs", corpus, "--index", idx, "-v")) == [LINK, BINARY]
    assert warned(invoke("clusters", corpus, "--index", idx)) == []


def test_a_skipped_file_that_changes_is_warned_about_again(tmp_path):
    corpus, idx = _corpus(tmp_path), tmp_path / "idx"
    assert invoke("pairs", corpus, "--index", idx).exit_code == 0
    (corpus / "blob.bin").write_bytes(b"\0 a longer binary file than before")
    r = invoke("pairs", corpus, "--index", idx)
    assert warned(r) == [BINARY] and "(2 files skipped)" in r.stderr
    (corpus / "link.txt").unlink()
    (corpus / "link.txt").symlink_to(corpus / "b.txt")
    os.utime(corpus / "link.txt", ns=(1, 1), follow_symlinks=False)  # another target, another time
    r = invoke("pairs", corpus, "--index", idx)
    assert warned(r) == [LINK]
    assert warned(invoke("pairs", corpus, "--index", idx)) == []
    # The manifest keeps each skipped file's size and time; stats --skipped lists them all.
    skipped = json.loads((idx / "manifest.json").read_text())["stages"]["shingle"]["skipped"]
    assert {s["id"]: s["mtime_ns"] for s in skipped}["link.txt"] == 1
    listed = invoke("stats", "--index", idx, "--skipped")
    assert [line.split("\t")[0] for line in listed.stdout.splitlines()] == ["blob.bin", "link.txt"]
    # Gone and back: a new file to warn about.
    (corpus / "blob.bin").unlink()
    r = invoke("pairs", corpus, "--index", idx)
    assert warned(r) == [] and "(1 file skipped)" in r.stderr
    (corpus / "blob.bin").write_bytes(b"\0\1\2 binary")
    assert warned(invoke("pairs", corpus, "--index", idx)) == [BINARY]


def test_a_missing_listed_file_is_warned_about_once(tmp_path):
    corpus, idx = _corpus(tmp_path), tmp_path / "idx"
    listing = f"{corpus / 'a.txt'}\n{corpus / 'b.txt'}\n{corpus / 'gone.txt'}\n"
    runner = CliRunner()
    first = runner.invoke(cli, ["pairs", "--files-from", "-", "--index", str(idx)], listing)
    assert warned(first) == ["warning: gone.txt: no such file, skipped"]
    second = runner.invoke(cli, ["pairs", "--files-from", "-", "--index", str(idx)], listing)
    assert warned(second) == [] and "(1 file skipped)" in second.stderr
