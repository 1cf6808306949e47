"""The shingle stage's way for the many small plain files of a corpus (issue 32): each file read in the
fewest steps (corpus.files.read_plain, the same result as read_document), the files of a batch and
their signature rows handed to the index a block at a time, not a file at a time."""

from __future__ import annotations

import hashlib
import os
import random

import numpy as np
import pytest
from conftest import write
from hypothesis import given, settings
from hypothesis import strategies as st

import simdoc.corpus.files
import simdoc.stages.collector
from simdoc.corpus.files import read_document, read_plain
from simdoc.engines.local import LocalEngine
from simdoc.params import ShingleParams, SignatureParams
from simdoc.stages.pairs import refresh_signatures
from simdoc.store.npyfiles import NpyWriter


def _reference(path: str, max_bytes=None, follow=False):
    res = read_document(path, max_bytes, follow, keep_ascii=True)
    return res.text, bytes.fromhex(res.digest), res.warning, res.status


_BYTES = st.one_of(
    st.binary(max_size=300),
    st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.text(alphabet=st.characters(max_codepoint=127), max_size=200).map(str.encode),
    st.tuples(st.sampled_from([b"", b"\xef\xbb\xbf", b"\x00", b"\xff\xfe", b"caf\xc3"]), st.text(max_size=50)).map(
        lambda p: p[0] + p[1].encode("utf-8", "surrogatepass")
    ),
)


@given(_BYTES)
@settings(max_examples=300, deadline=None)
def test_read_plain_gives_what_read_document_gives(tmp_path_factory, content):
    path = str(write(tmp_path_factory.mktemp("f") / "doc.txt", content))
    assert read_plain(path) == _reference(path)


def test_read_plain_out_of_the_way_files_as_read_document(tmp_path):
    big = write(tmp_path / "big.txt", b"word " * (4 << 20))  # 20 MiB: more than one read
    text = write(tmp_path / "a.txt", "some text, then more text\n")
    os.symlink(text, tmp_path / "link.txt")
    os.mkfifo(tmp_path / "fifo.txt")
    for path, max_bytes, follow in [
        (big, None, False), (text, 5, False), (text, 100, False), (tmp_path / "gone.txt", None, False),
        (tmp_path / "link.txt", None, False), (tmp_path / "link.txt", None, True), (tmp_path / "fifo.txt", None, False),
        (tmp_path, None, False),
    ]:
        assert read_plain(str(path), max_bytes, follow) == _reference(str(path), max_bytes, follow), path
    assert read_plain(str(tmp_path / "gone.txt"))[2] == "vanished before it could be read, skipped"


def test_read_plain_file_changing_while_read_is_indexed_as_read_with_a_warning(tmp_path, monkeypatch):
    path = write(tmp_path / "growing.txt", "the text as it was\n")
    real_fstat = os.fstat
    calls = []

    def fstat(fd):
        calls.append(fd)
        if len(calls) == 2:  # the check after reading sees a newer file
            with open(path, "a", encoding="utf-8") as fh:
                fh.write("more text")
        return real_fstat(fd)

    monkeypatch.setattr(simdoc.corpus.files.os, "fstat", fstat)
    text, digest, warning, status = read_plain(str(path))
    assert text == b"the text as it was\n" and status == "ok"
    assert digest == hashlib.blake2b(b"the text as it was\n", digest_size=16).digest()
    assert warning == "changed while being read; indexed as read (run again to pick up the final version)"


def test_read_plain_short_reads_and_a_file_that_grows_are_read_as_read_document_reads_them(tmp_path, monkeypatch):
    path = str(write(tmp_path / "a.txt", "0123456789" * 10))
    real_read = os.read

    def short(fd, n):  # at most 7 bytes a call
        return real_read(fd, min(n, 7))

    monkeypatch.setattr(simdoc.corpus.files.os, "read", short)
    assert read_plain(path) == _reference(path)
    assert read_plain(path)[0] == b"0123456789" * 10
    grown = []

    def growing(fd, n):  # the file grows after the first read
        got = real_read(fd, n)
        if not grown:
            grown.append(1)
            with open(path, "ab") as fh:
                fh.write(b"tail")
        return got

    monkeypatch.setattr(simdoc.corpus.files.os, "read", growing)
    text, _, warning, _ = read_plain(path)
    assert text == b"0123456789" * 10  # all it said it had: the growth is caught by the fstat after
    assert "changed while being read" in warning


def _corpus(root, rng: random.Random) -> None:
    words = ["alpha", "beta", "gamma", "delta", "épée", "naïve", "kappa", "lambda", "μέλι", "omega"]
    for i in range(120):
        write(root / f"d{i % 3}" / f"doc{i:03d}.txt", " ".join(rng.choice(words) for _ in range(rng.randint(0, 60))))
    write(root / "d0" / "binary.txt", b"ab\x00cd")
    write(root / "d1" / "bad.txt", b"caf\xe9 au lait, with more words")
    write(root / "d1" / "bom.txt", b"\xef\xbb\xbfwith a byte order mark")
    write(root / "d2" / "many.jsonl", '{"text": "one line"}\n{"text": "another line"}\nnot json\n')
    write(root / "d2" / "page.md", "")


def _build(corpus, index) -> dict[str, np.ndarray]:
    """Build (or update) ``index``; its arrays by role (the name without the build id)."""
    refresh_signatures(str(corpus), str(index), ShingleParams(), SignatureParams(), engine=LocalEngine(1))
    names = [n for n in os.listdir(index) if n.endswith(".npy") and n.startswith(("docs.", "signatures."))]
    return {n.rsplit(".", 2)[0]: np.load(os.path.join(index, n)) for n in names}


def test_files_taken_a_block_at_a_time_give_the_index_they_give_one_at_a_time(tmp_path, monkeypatch):
    corpus = tmp_path / "c"
    _corpus(corpus, random.Random(7))
    blocks = _build(corpus, tmp_path / "blocks")
    monkeypatch.setattr(simdoc.stages.collector, "plain_files", lambda files, start, stop: 0)
    one_by_one = _build(corpus, tmp_path / "one")
    assert blocks.keys() == one_by_one.keys()
    for name in blocks:
        assert np.array_equal(blocks[name], one_by_one[name]), name


def test_the_fused_stage_writes_a_batchs_signature_rows_at_once_not_a_file_at_a_time(tmp_path, monkeypatch):
    corpus = tmp_path / "c"
    _corpus(corpus, random.Random(3))
    appended: list[int] = []
    real = NpyWriter.append

    def append(self, arr):
        if self.name.startswith("signatures"):
            appended.append(len(arr))
        real(self, arr)

    monkeypatch.setattr(NpyWriter, "append", append)
    _build(corpus, tmp_path / "idx")
    assert sum(appended) == 125  # 120 files, bad, bom, the empty page, 2 lines of the JSON Lines file (not binary.txt)
    assert len(appended) <= 2  # one batch, one run (before: a row at a time, 125)


@pytest.mark.parametrize("changed", [False, True])
def test_an_update_after_block_reading_keeps_and_reads_what_it_did(tmp_path, changed, settled):
    corpus = tmp_path / "c"
    _corpus(corpus, random.Random(11))
    first = _build(corpus, tmp_path / "idx")
    if changed:
        write(corpus / "d1" / "doc004.txt", "a new text altogether")
    again = _build(corpus, tmp_path / "idx")
    rebuilt = _build(corpus, tmp_path / "fresh")
    for name in again:
        if name != "docs.added":  # the update that added a document is not a rebuild's
            assert np.array_equal(again[name], rebuilt[name]), name
    if not changed:
        assert all(np.array_equal(first[n], again[n]) for n in first)


def test_a_file_outcome_comes_back_from_a_worker_as_it_was():
    import pickle

    from simdoc.stages.scan_results import FileOutcome

    outcomes = [
        FileOutcome(b"\x01" * 16, "ok", None, False, "whole", 1),
        FileOutcome(b"", "unreadable", "vanished before it could be read, skipped", False, "whole"),
        FileOutcome(b"\x02" * 16, "ok", "2 lines: not valid JSON", True, "jsonl", 3, [("a.jsonl/#k", "too long")]),
    ]
    back = pickle.loads(pickle.dumps(outcomes))
    assert back == outcomes
    back[1].left_out.append(("x", "y"))  # each its own list, as the dataclass's default gives
    assert outcomes[1].left_out == [] and back[0].left_out == []


@given(st.lists(st.sampled_from(["/", ".", "a", "gz", "GZ", "bz2", "xz", "zst", "tar", "..", "x.gz/"]), max_size=8).map("".join))
@settings(max_examples=300, deadline=None)
def test_compression_of_a_name_is_its_last_suffix_among_the_known_ones(path):
    from simdoc.corpus.files import COMPRESSED, compression_of

    assert compression_of(path) == next((kind for suffix, kind in COMPRESSED.items() if path.lower().endswith(suffix)), None)  # in any case


def test_files_to_read_from_the_walks_columns_are_what_the_plan_says():
    from types import SimpleNamespace

    from simdoc.corpus.walk import Entries, FileEntry
    from simdoc.stages.plan import Plan
    from simdoc.stages.scan import files_to_read

    rng = np.random.default_rng(5)
    n = 50
    stat = rng.integers(0, 10**6, size=(n, 5)).astype(np.int64)
    entries = Entries([f"d/{i:03d}.txt" for i in range(n)], [f"/c/d/{i:03d}.txt" for i in range(n)], stat)
    old = SimpleNamespace(file_digest=rng.integers(0, 256, size=(20, 16)).astype(np.uint8))
    plan = Plan(entries, rng.random(n) < 0.4, np.where(rng.random(n) < 0.5, rng.integers(0, 20, n), -1), None, old)
    want = plan.to_read()
    got = files_to_read(plan, placed=False)
    assert [(e.id, e.path, e.size, d, k) for e, d, k in got] == [(e.id, e.path, e.size, d, k) for e, d, k in want]
    assert got.lean  # FileToRead entries from the columns, as compared above
    assert list(files_to_read(plan, placed=True)) == list(want)  # tasks that write parts need each file's stat
    assert all(isinstance(e, FileEntry) for e, _, _ in files_to_read(plan, placed=True))
    assert got[3] == list(got)[3] and got[-1] == list(got)[-1]  # asked for one by one, as iterated
    with pytest.raises(IndexError):
        got[len(got)]  # past the end, as a list says (not a StopIteration)


def test_how_each_file_is_read_is_decided_once_when_its_task_is_made_and_the_worker_takes_it(tmp_path, monkeypatch):
    # Before, how_read ran three times a file: over every name for Parquet, for its spans, and in
    # the worker. Now the task carries it; the worker, and a Parquet test of a name not so named, need none.
    import simdoc.stages.scan as scan
    from simdoc.corpus.read import how_read

    corpus = tmp_path / "c"
    _corpus(corpus, random.Random(5))
    calls: list[str] = []

    def counted(path, size):
        calls.append(path)
        return how_read(path, size)

    monkeypatch.setattr(scan, "how_read", counted)
    want = _build(corpus, tmp_path / "counted")
    entries = [p for p in corpus.rglob("*") if p.is_file()]
    assert len(calls) == len(entries)  # once a file (the files' names hold no .parquet)
    tasks = list(scan.scan_tasks([(_Entry(p), None, False) for p in entries], ShingleParams().resolved(), SignatureParams().resolved()))
    assert [h for t in tasks for h in t.hows] == [how_read(str(p), p.stat().st_size) for p in entries]
    calls.clear()
    for t in tasks:
        scan.scan_batch(t)
    assert calls == []  # the worker took the tasks' ways
    monkeypatch.undo()
    plain = _build(corpus, tmp_path / "plain")  # the same index as when each was decided again
    assert plain.keys() == want.keys() and all(np.array_equal(want[n], plain[n]) for n in want)


class _Entry:
    def __init__(self, p) -> None:
        self.id, self.path, self.size = p.name, str(p), p.stat().st_size


def test_the_names_are_gone_over_for_parquet_files_only_when_pyarrow_is_not_installed(tmp_path, monkeypatch):
    # 10^5 names gone over before the first task could start, for an error that cannot arise
    # when pyarrow is there; without it, a Parquet file is still the one error before any reading.
    import sys

    import simdoc.stages.scan as scan
    from simdoc.corpus.parquet import pyarrow_findable
    from simdoc.errors import CorpusError

    class Plan(list):
        def names(self):
            raise AssertionError("the names were gone over")

    (tmp_path / "a.txt").write_text("some text here")
    plan = Plan([(_Entry(tmp_path / "a.txt"), None, False)])
    if pyarrow_findable():
        assert len(list(scan.scan_tasks(plan, ShingleParams().resolved(), SignatureParams().resolved()))) == 1
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    assert not pyarrow_findable()
    with pytest.raises(AssertionError, match="gone over"):
        list(scan.scan_tasks(plan, ShingleParams().resolved(), SignatureParams().resolved()))
    (tmp_path / "b.parquet").write_bytes(b"PAR1")
    named = [(_Entry(tmp_path / "a.txt"), None, False), (_Entry(tmp_path / "b.parquet"), None, False)]
    with pytest.raises(CorpusError, match="pyarrow"):
        next(scan.scan_tasks(named, ShingleParams().resolved(), SignatureParams().resolved()))
