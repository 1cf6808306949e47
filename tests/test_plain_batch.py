"""A task's small files read together in the compiled loop give exactly what read_plain gives one by one."""

from __future__ import annotations

import dataclasses
import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simdoc import kernels_read
from simdoc.bytesign import sign_texts
from simdoc.corpus.files import BINARY_SNIFF, read_plain
from simdoc.corpus.plain_batch import PlainBatch, Span, sign_spans
from simdoc.minhash import MinHasher
from simdoc.params import ShingleParams, SignatureParams
from simdoc.shingling import ShingleSpec
from simdoc.stages import scan

pytestmark = pytest.mark.skipif(not kernels_read.AVAILABLE, reason="the compiled loop needs numba on Linux (the files are then read one by one)")

PIECES = [b"plain words ", b"\t\n ", "caf\u00e9 ".encode(), "\u0130stanbul \u03a3".encode(), b"\xff\xfe bad ", b"\xef\xbb\xbf", b"\x00", b"x" * 300]


def _outcome(got):
    text, digest, warning, status = got
    if isinstance(text, Span):  # as read_plain gives it: ASCII bytes as they are, any other decoded
        text = text.bytes() if text.ascii else text.bytes().decode("utf-8")
    return text, digest, warning, status


def _text(data: bytes) -> bool:
    """Whether a file's bytes are kept as a Span: ASCII, or strict UTF-8 not starting with a
    byte-order mark; no NUL among the sniffed bytes."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return b"\x00" not in data[:BINARY_SNIFF] and not data.startswith(b"\xef\xbb\xbf")


contents = st.lists(st.sampled_from(PIECES), max_size=12).map(b"".join) | st.binary(max_size=600)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=st.lists(contents, min_size=1, max_size=8), nul_far=st.booleans())
def test_each_file_is_what_read_plain_gives(files, nul_far):
    if nul_far:  # a NUL past the sniffed bytes does not make a file binary
        files = [*files, b"a" * BINARY_SNIFF + b"\x00 tail"]
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i, data in enumerate(files):
            p = os.path.join(tmp, f"f{i}.txt")
            Path(p).write_bytes(data)
            paths.append(p)
        batch = PlainBatch(paths, [len(d) for d in files], False)
        for k, p in enumerate(paths):
            got = _outcome(batch.take(k))
            assert got == read_plain(p)
            assert isinstance(batch.take(k)[0], Span) == _text(files[k])  # a text stays in the buffer


def test_files_that_are_not_what_the_walk_saw_are_read_again_and_told_as_read_plain_tells(tmp_path):
    ok = tmp_path / "ok.txt"
    ok.write_bytes(b"stays the same")
    grown = tmp_path / "grown.txt"
    grown.write_bytes(b"longer than it was listed")
    gone = tmp_path / "gone.txt"
    link = tmp_path / "link.txt"
    link.symlink_to(ok)
    fifo = tmp_path / "fifo.txt"
    os.mkfifo(fifo)
    folder = tmp_path / "folder.txt"
    folder.mkdir()
    paths = [str(p) for p in (ok, grown, gone, link, fifo, folder)]
    sizes = [14, 5, 3, 14, 0, 4096]
    for follow in (False, True):
        batch = PlainBatch(paths, sizes, follow)
        for k, p in enumerate(paths):
            assert _outcome(batch.take(k)) == read_plain(p, None, follow), p
    state = kernels_read.read_files(paths, np.array(sizes), os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW, BINARY_SNIFF)[2]
    assert state.tolist()[0] & kernels_read.READ and not any(s & kernels_read.READ for s in state.tolist()[1:])
    # Without the statx after the read (verification: the digest decides), files that stay as
    # they are come out the same: the same bytes, the same states.
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW
    checked = kernels_read.read_files(paths, np.array(sizes), flags, BINARY_SNIFF)
    unchecked = kernels_read.read_files(paths, np.array(sizes), flags, BINARY_SNIFF, recheck=False)
    assert unchecked[2].tolist() == checked[2].tolist() and unchecked[1].tolist() == checked[1].tolist()
    assert bytes(unchecked[0][: unchecked[1][-1]]) == bytes(checked[0][: checked[1][-1]])


@settings(max_examples=30, deadline=None)
@given(texts=st.lists(st.sampled_from(["ascii words here", "caf\u00e9 au lait", "", "a", "x y z " * 40]), min_size=1, max_size=8))
def test_spans_sign_as_their_bytes_do(texts):
    spec, hasher = ShingleSpec(), MinHasher(32)
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i, t in enumerate(texts):
            p = os.path.join(tmp, f"f{i}.txt")
            Path(p).write_text(t, encoding="utf-8")
            paths.append(p)
        batch = PlainBatch(paths, [os.path.getsize(p) for p in paths], False)
        got = [batch.take(k)[0] for k in range(len(paths))]
        for mixed in (got, got[::-1], got[1::2] + got[::2]):  # one run of the buffer, and not
            want = np.empty((len(mixed), 32), np.uint32)
            plain = [_outcome((t, b"", None, "ok"))[0] for t in mixed]
            want_windows = sign_texts(plain, spec, hasher, want)
            out = np.empty((len(mixed), 32), np.uint32)
            assert sign_spans(mixed, spec, hasher, out).tolist() == want_windows.tolist()
            assert out.tolist() == want.tolist()


def _same_results(a, b):
    assert a.signatures.tolist() == b.signatures.tolist()
    assert [dataclasses.astuple(f) for f in a.files] == [dataclasses.astuple(f) for f in b.files]
    for column in ("offset", "length", "size", "n_shingles", "how", "status", "digest", "identity"):
        assert getattr(a.docs, column).tolist() == getattr(b.docs, column).tolist(), column
    assert list(a.docs.ids()) == list(b.docs.ids()) and list(a.docs.sources()) == list(b.docs.sources())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=st.lists(contents, min_size=1, max_size=6), ascii_only=st.booleans())
def test_a_task_gives_the_same_result_read_together_or_one_by_one(files, ascii_only, monkeypatch):
    if ascii_only:  # the task made at once (stages/scan_plain.py)
        files = [bytes(b if 0 < b < 0x80 else 0x20 for b in data) for data in files]
    with tempfile.TemporaryDirectory() as tmp:
        entries = []
        for i, data in enumerate(files):
            p = Path(tmp) / f"f{i}.txt"
            p.write_bytes(data)
            entries.append((f"f{i}.txt", str(p), len(data), None))
        task = scan.ScanTask(files=entries, shingle=ShingleParams().resolved(), signature=SignatureParams(64).resolved())
        made_at_once = []
        real = scan.plain_result
        monkeypatch.setattr(scan, "plain_result", lambda *a: made_at_once.append(1) or real(*a))
        together = scan._scan(task)
        assert bool(made_at_once) == (all(map(_text, files)) and len(files) > 1)
        with monkeypatch.context() as m:
            m.setattr(scan.plain_batch, "available", lambda: False)  # each file by read_plain
            alone = scan._scan(task)
        _same_results(together, alone)


TRICKY = [b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80", b"\xe0\x9f\xbf", b"\xed\xa0\x80", b"\xed\x9f\xbf", b"\xf0\x8f\xbf\xbf",
          b"\xf4\x90\x80\x80", b"\xf4\x8f\xbf\xbf", b"\xf5\x80\x80\x80", b"\xe2\x82", b"\xe2\x82\xac", b"\x80", b"\xef\xbb\xbf"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(TRICKY) | st.binary(max_size=6) | st.text(max_size=4).map(lambda t: t.encode("utf-8", "surrogatepass")), max_size=8).map(b"".join))
def test_the_kernel_tells_strict_utf8_as_python_decodes_it(data):
    with tempfile.TemporaryDirectory() as tmp:
        paths = [os.path.join(tmp, "a.txt"), os.path.join(tmp, "b.txt")]
        for p in paths:
            Path(p).write_bytes(data)
        state = int(kernels_read.read_files(paths, np.array([len(data)] * 2), os.O_RDONLY, BINARY_SNIFF)[2][0])
    try:
        data.decode("utf-8")
        strict = not data.isascii() and not data.startswith(b"\xef\xbb\xbf")
    except UnicodeDecodeError:
        strict = False
    assert bool(state & kernels_read.UTF8) == strict and bool(state & kernels_read.ASCII) == data.isascii()


def test_without_a_working_compiled_loop_files_are_read_one_by_one(tmp_path, monkeypatch):
    from simdoc.corpus import plain_batch

    def broken(*args):
        raise OSError("no statx in this C library")

    monkeypatch.setattr(plain_batch, "_USABLE", [])
    monkeypatch.setattr(kernels_read, "read_files", broken)
    assert plain_batch.available() is False and plain_batch.available() is False  # found out once
    monkeypatch.setattr(plain_batch, "_USABLE", [])
    monkeypatch.undo()
    assert plain_batch.available() is True
    for i in range(3):
        (tmp_path / f"f{i}.txt").write_text("some words")
    files = [(f"f{i}.txt", str(tmp_path / f"f{i}.txt"), 10, None) for i in range(3)]
    monkeypatch.setattr(plain_batch, "_USABLE", [False])
    assert plain_batch.read_together(files, ["whole"] * 3, 10**6, False) == (None, [-1, -1, -1])


def test_a_path_holding_a_nul_is_refused_not_read_as_another(tmp_path):
    """The paths reach the kernel as one NUL-separated buffer: a NUL inside one would end it
    early (another file) and shift every path after it."""
    (tmp_path / "a").write_bytes(b"x")
    with pytest.raises(ValueError, match="NUL"):
        kernels_read.read_files([str(tmp_path / "a") + "\0b", str(tmp_path / "a")], np.array([1, 1]), os.O_RDONLY, BINARY_SNIFF)
