"""Hostile and odd inputs: FIFOs, sockets, links, loops, vanishing and growing files, odd names."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import simdoc.corpus.files
import simdoc.corpus.walk
import simdoc.stages.scan
import simdoc.stages.plan
from simdoc.cli import cli
from simdoc.corpus.files import read_document
from simdoc.corpus.walk import discover

TEXT = "The same text about gardens and bees and honey in the long summer evenings. "


def write(path: Path, text: str = TEXT) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def run(*args, **kw):
    return CliRunner().invoke(cli, [str(a) for a in args], **kw)


def test_fifo_socket_are_skipped_and_never_block(tmp_path):
    corpus = tmp_path / "c"
    write(corpus / "a.txt")
    write(corpus / "b.txt")
    os.mkfifo(corpus / "pipe")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(corpus / "sock"))
    try:
        # In a subprocess with a timeout: a blocking open of the FIFO would hang here.
        r = subprocess.run(
            [sys.executable, "-m", "simdoc", "pairs", str(corpus), "--index", str(tmp_path / "idx")],
            capture_output=True, text=True, timeout=60,
        )
    finally:
        sock.close()
    assert r.returncode == 0, r.stderr
    assert r.stdout == "a.txt\tb.txt\t1.0000\t1.0000\n"
    assert "pipe: not a regular file" in r.stderr and "sock: not a regular file" in r.stderr
    assert "(2 files skipped)" in r.stderr


def test_file_replaced_by_a_fifo_after_the_scan_is_not_opened_blocking(tmp_path):
    os.mkfifo(tmp_path / "late-fifo")
    res = read_document(str(tmp_path / "late-fifo"))
    assert res.text is None and "not a regular file" in res.warning


def test_symlinks_are_reported_or_followed_and_loops_cut(tmp_path):
    corpus = tmp_path / "c"
    write(corpus / "a.txt")
    outside = write(tmp_path / "outside" / "far.txt")
    (corpus / "link-to-far.txt").symlink_to(outside)
    (corpus / "sub").mkdir()
    write(corpus / "sub" / "b.txt")
    (corpus / "sub" / "loop").symlink_to(corpus)  # a loop back to the root
    (corpus / "broken").symlink_to(tmp_path / "nowhere")
    entries, skipped = discover(corpus)
    assert [e.id for e in entries] == ["a.txt", "sub/b.txt"]
    assert {s.id for s in skipped} == {"broken", "link-to-far.txt", "sub/loop"}
    entries, skipped = discover(corpus, follow_symlinks=True)
    assert [e.id for e in entries] == ["a.txt", "link-to-far.txt", "sub/b.txt"]
    reasons = {s.id: s.reason for s in skipped}
    assert "loop" in reasons["sub/loop"] and "broken" in reasons["broken"]
    r = run("pairs", corpus, "--index", tmp_path / "idx", "--follow-symlinks")
    assert r.exit_code == 0, r.stderr
    assert "a.txt\tlink-to-far.txt\t1.0000\t1.0000" in r.stdout
    # The choice is a parameter of the index.
    again = run("pairs", corpus, "--index", tmp_path / "idx", "--no-follow-symlinks")
    assert again.exit_code == 4 and "built with --follow-symlinks (shingle stage), but --no-follow-symlinks was asked" in again.stderr


def test_vanished_file_is_skipped_with_a_warning(tmp_path, monkeypatch):
    corpus = tmp_path / "c"
    write(corpus / "a.txt")
    write(corpus / "b.txt")
    gone = write(corpus / "gone.txt")
    real = simdoc.corpus.walk.discover_sources

    def discover_then_delete(*args, **kw):
        base, found, skipped = real(*args, **kw)

        def then_delete():
            yield from found  # a new build reads files while the walk goes on
            gone.unlink()  # vanishes between the scan and the read

        return base, then_delete(), skipped

    monkeypatch.setattr(simdoc.stages.plan, "discover_sources", discover_then_delete)
    r = run("pairs", corpus, "--index", tmp_path / "idx", "-j", "1")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "a.txt\tb.txt\t1.0000\t1.0000\n"
    assert "gone.txt: vanished before it could be read" in r.stderr


def test_file_changing_while_read_is_indexed_as_read_with_a_warning(tmp_path, monkeypatch):
    path = write(tmp_path / "growing.txt")
    real_fstat = os.fstat
    calls = []

    def fstat(fd):
        st = real_fstat(fd)
        calls.append(st)
        if len(calls) == 2:  # the check after reading sees a newer file
            with open(path, "a", encoding="utf-8") as fh:
                fh.write("more text")
            return real_fstat(fd)
        return st

    monkeypatch.setattr(simdoc.corpus.files.os, "fstat", fstat)
    res = read_document(str(path))
    assert res.text == TEXT
    assert "changed while being read" in res.warning


def test_max_bytes_caps_a_huge_file_with_a_warning(tmp_path):
    corpus = tmp_path / "c"
    body = "".join(f"line {i} of a very long log that nobody reads twice\n" for i in range(200_000))
    write(corpus / "huge.log", body)
    write(corpus / "head.log", body[:4096])
    r = run("pairs", corpus, "--index", tmp_path / "idx", "--max-bytes", "4096", "--threshold", "0.9")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "head.log\thuge.log\t1.0000\t1.0000\n"
    assert "huge.log: longer than --max-bytes 4096" in r.stderr
    res = read_document(str(corpus / "huge.log"), max_bytes=10)
    assert res.text == body[:10] and res.status == "partial"


def test_odd_file_names_stay_one_record_per_line(tmp_path):
    corpus = tmp_path / "c"
    names = ["with space.txt", "-leading-dash.txt", "tab\tname.txt", "new\nline.txt"]
    for n in names:
        write(corpus / n)
    raw = os.fsencode(str(corpus)) + b"/bad\xffname.txt"
    with open(raw, "w", encoding="utf-8") as fh:
        fh.write(TEXT)
    idx = tmp_path / "idx"
    tsv = run("pairs", corpus, "--index", idx)
    assert tsv.exit_code == 0, tsv.stderr
    lines = tsv.stdout.splitlines()
    assert len(lines) == 10  # 5 identical documents: 10 pairs, one line each
    assert all(len(line.split("\t")) == 4 for line in lines)
    assert "tab\\tname.txt" in tsv.stdout and "new\\nline.txt" in tsv.stdout and "bad\\xffname.txt" in tsv.stdout
    js = run("pairs", "--index", idx, "--format", "jsonl")
    recs = [json.loads(line) for line in js.stdout.splitlines()]
    got = {os.fsencode(r["doc_a"]) for r in recs} | {os.fsencode(r["doc_b"]) for r in recs}
    assert got == {n.encode() for n in names} | {b"bad\xffname.txt"}
    null = subprocess.run(
        [sys.executable, "-m", "simdoc", "pairs", "--index", str(idx), "-0"], capture_output=True, timeout=60
    )
    fields = null.stdout.split(b"\0")
    assert fields[-1] == b"" and (len(fields) - 1) == 40
    assert b"bad\xffname.txt" in fields and b"new\nline.txt" in fields


@pytest.mark.parametrize("fmt", ["csv", "table"])
def test_undecodable_names_in_other_formats(tmp_path, fmt):
    corpus = tmp_path / "c"
    write(corpus / "a.txt")
    with open(os.fsencode(str(corpus)) + b"/\xfe.txt", "w", encoding="utf-8") as fh:
        fh.write(TEXT)
    r = run("pairs", corpus, "--index", tmp_path / "idx", "--format", fmt)
    assert r.exit_code == 0, r.stderr
    assert "\\xfe.txt" in r.stdout


# Names whose order is easy to get wrong: "a-b" sorts before "a/…", "a0" after it, "é" last.
_NAMES = ["a", "a-b", "a.txt", "a0", "ab", "b", "é", "Z"]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.sampled_from(_NAMES), min_size=1, max_size=4), min_size=1, max_size=12))
def test_walk_yields_ids_in_sorted_order(tmp_path_factory, paths):
    # Each drawn path is a file; its leading parts are directories. A path that would need
    # a file where a directory already is (or the reverse) is left out.
    root = tmp_path_factory.mktemp("walk")
    made = set()
    for parts in paths:
        target = root.joinpath(*parts)
        try:
            write(target)
            made.add("/".join(parts))
        except (FileExistsError, NotADirectoryError, IsADirectoryError):
            pass
    files = {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}
    assert files == made
    ids = [e.id for e in simdoc.corpus.walk.walk(root)]
    assert ids == sorted(files)
    assert [e.id for e in discover(root)[0]] == ids


def test_paths_passed_over_after_the_last_document_are_reported(tmp_path, monkeypatch):
    # A new build reads files while the walk goes on; what the walk passes over after the
    # last document still reaches the warnings and the index's list of skipped paths.
    monkeypatch.setattr(simdoc.stages.scan, "BATCH_DOCS", 1)
    corpus = tmp_path / "c"
    for name in ("a.txt", "b.txt", "c.txt"):
        write(corpus / name)
    (corpus / "zz").mkdir()
    (corpus / "zz" / "last-link").symlink_to(corpus / "a.txt")
    for jobs in ("1", "2"):
        idx = tmp_path / f"idx{jobs}"
        r = run("shingle", corpus, "--index", idx, "-j", jobs)
        assert r.exit_code == 0, r.stderr
        assert "zz/last-link: symbolic link, not followed" in r.stderr
        skipped = json.loads((idx / "manifest.json").read_text())["stages"]["shingle"]["skipped"]
        assert [s["id"] for s in skipped] == ["zz/last-link"]
        again = run("shingle", corpus, "--index", idx, "-j", jobs)
        assert again.exit_code == 0 and "up to date" in again.stderr, again.stderr
