"""Rows written past the page cache (O_DIRECT) are the same bytes as rows written through it."""

import errno
import fcntl
import os

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_pipeline import make_corpus

import simdoc.direct as direct
import simdoc.pipeline as pipeline


@given(st.integers(0, 1 << 20), st.integers(0, 1 << 20), st.integers(0, 1 << 21))
def test_the_direct_part_is_whole_pages_inside_the_piece_and_past_the_threshold(start, length, first):
    stop = start + length
    a, b = direct.aligned_middle(start, stop, first)
    if a == b:
        assert a == stop
        return
    assert start <= a < b <= stop and a >= first
    assert a % direct.ALIGN == 0 and b % direct.ALIGN == 0 and b - a >= direct.MIN_DIRECT
    # Nothing a whole page longer was left out.
    assert a - max(start, first) < direct.ALIGN and stop - b < direct.ALIGN


def _arrays(idx) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(idx.iterdir()) if p.name.startswith("shingles.")}


@pytest.fixture
def small_direct(monkeypatch):
    """Direct writes for pieces of a test corpus's size; counts the pages written direct."""
    monkeypatch.setattr(direct, "MIN_DIRECT", direct.ALIGN)
    written = []
    real = direct.pwrite_direct

    def counting(fd, data, offset):
        ok = real(fd, data, offset)
        written.append(len(data) if ok else 0)
        return ok

    monkeypatch.setattr(direct, "pwrite_direct", counting)
    return written


def _build(corpus, idx, monkeypatch, direct_from: str, jobs: int = 1):
    monkeypatch.setenv("SIMDOC_DIRECT_FROM", direct_from)
    monkeypatch.setattr(pipeline, "BATCH_DOCS", 4)  # pieces from many batches, next to each other
    pipeline.build_shingles(corpus, idx, jobs=jobs)
    return _arrays(idx)


def _long_corpus(root):
    # Documents of ~30 KB, so that a batch's rows span whole pages.
    docs = make_corpus(root, seed=3)
    for i, text in enumerate(list(docs.values())[:6]):
        (root / f"long{i}.txt").write_text((text + " ") * 40, encoding="utf-8")


@pytest.mark.parametrize("jobs", [1, 2])
def test_rows_written_direct_equal_rows_written_buffered(tmp_path, monkeypatch, small_direct, jobs):
    _long_corpus(tmp_path / "c")
    buffered = _build(tmp_path / "c", tmp_path / "buffered", monkeypatch, "off", jobs)
    assert small_direct == []
    for first in ("0", "20000"):  # all rows direct; the rows past the 20,000th shingle
        got = _build(tmp_path / "c", tmp_path / f"direct{first}", monkeypatch, first, jobs)
        assert got == buffered
    if jobs == 1:  # the counter sees only this process's writes
        assert sum(small_direct) > 0
    pipeline.open_index(tmp_path / "direct0").shingle_sets()  # loads and checks


def test_a_file_system_without_o_direct_gets_buffered_writes(tmp_path, monkeypatch, small_direct):
    _long_corpus(tmp_path / "c")
    buffered = _build(tmp_path / "c", tmp_path / "buffered", monkeypatch, "off")
    real_open = os.open

    def refusing(path, flags, *args):
        if flags & os.O_DIRECT:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_open(path, flags, *args)

    monkeypatch.setattr(direct.os, "open", refusing)
    monkeypatch.setattr(direct, "_refused", set())
    assert _build(tmp_path / "c", tmp_path / "refused", monkeypatch, "0") == buffered
    assert small_direct == [] and len(direct._refused) == 1


def test_a_device_that_wants_another_alignment_gets_buffered_writes(tmp_path, monkeypatch, small_direct):
    _long_corpus(tmp_path / "c")
    buffered = _build(tmp_path / "c", tmp_path / "buffered", monkeypatch, "off")

    real_pwrite = os.pwrite

    def refusing(fd, data, offset):
        if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(direct.os, "pwrite", refusing)
    assert _build(tmp_path / "c", tmp_path / "einval", monkeypatch, "0") == buffered
    assert small_direct and not any(small_direct)  # every direct write was refused, then done buffered


def test_counts_go_direct_and_hashes_past_an_eighth_of_memory_unless_set(monkeypatch):
    monkeypatch.delenv("SIMDOC_DIRECT_FROM", raising=False)
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert direct.direct_from() == (memory // 8 // 4, 0)
    for value, want in (("off", None), ("0", 0), ("1234", 1234)):
        monkeypatch.setenv("SIMDOC_DIRECT_FROM", value)
        assert direct.direct_from() == (want, want)


def test_staging_buffer_is_page_aligned():
    buf = direct._buffer()
    assert buf.ctypes.data % direct.ALIGN == 0 and len(buf) == direct.STAGING_BYTES
    assert np.shares_memory(buf, direct._buffer())


@pytest.mark.parametrize("jobs", [1, 2])
def test_an_update_written_direct_equals_a_buffered_rebuild(tmp_path, monkeypatch, small_direct, jobs):
    # Rows the parent copies from the last build sit between pieces that workers write direct.
    from test_incremental import age, arrays_by_role, mutate

    corpus = tmp_path / "c"
    _long_corpus(corpus)
    age(corpus)
    for i in range(3):  # files the mutation below edits, renames or deletes
        (corpus / f"part{i}").mkdir(exist_ok=True)
        for j in range(6):
            (corpus / f"part{i}" / f"doc{j:03d}.txt").write_text(("amber basil cedar %d " % (i * 10 + j)) * 900)
    age(corpus)
    monkeypatch.setattr(pipeline, "BATCH_DOCS", 3)
    monkeypatch.setenv("SIMDOC_DIRECT_FROM", "0")
    pipeline.find_pairs(corpus, tmp_path / "idx", jobs=jobs)
    mutate(corpus, __import__("random").Random(1))
    pipeline.find_pairs(corpus, tmp_path / "idx", jobs=jobs)
    monkeypatch.setenv("SIMDOC_DIRECT_FROM", "off")
    pipeline.find_pairs(corpus, tmp_path / "full", jobs=jobs)
    assert arrays_by_role(tmp_path / "idx") == arrays_by_role(tmp_path / "full")
    if jobs == 1:
        assert sum(small_direct) > 0


def test_a_bad_override_is_a_usage_error_that_names_it(monkeypatch, tmp_path):
    from click.testing import CliRunner

    from simdoc.cli import cli

    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "a.txt").write_text("some text to shingle here")
    monkeypatch.setenv("SIMDOC_DIRECT_FROM", "lots")
    res = CliRunner().invoke(cli, ["pairs", str(tmp_path / "c"), "--index", str(tmp_path / "idx")])
    assert res.exit_code == 2 and "SIMDOC_DIRECT_FROM" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.parametrize("measure", ["set", "bag"])
def test_rows_asked_for_ahead_of_verification_change_nothing(tmp_path, monkeypatch, small_direct, measure):
    import simdoc.memory as memory
    import simdoc.similarity as similarity

    _long_corpus(tmp_path / "c")
    _build(tmp_path / "c", tmp_path / "idx", monkeypatch, "0")  # every row past the page cache
    sets = pipeline.open_index(tmp_path / "idx").shingle_sets()
    n = len(sets)
    rng = np.random.default_rng(5)
    left, right = rng.integers(0, n, 300), rng.integers(0, n, 300)
    monkeypatch.setattr(similarity, "PAIR_BATCH_ITEMS", 20_000)  # many batches
    # The thread skips the batches verification has begun: how many it asks for depends on
    # timing. Here it skips none and is waited for, so that what it asks for is certain.
    monkeypatch.setattr(similarity._RowsAhead, "started", lambda self: self._tokens.release())
    monkeypatch.setattr(similarity._RowsAhead, "close", lambda self: self._thread.join())
    asked = []
    real = memory.prefetch
    monkeypatch.setattr(memory, "prefetch", lambda arr, a, b: (asked.append(arr is sets.counts), real(arr, a, b)))
    for threads in (1, 2):
        monkeypatch.setenv("SIMDOC_PREFETCH", "off")
        plain = similarity.pair_jaccard(sets, left, right, measure, threads)
        assert asked == []
        monkeypatch.delenv("SIMDOC_PREFETCH")
        ahead = similarity.pair_jaccard(sets, left, right, measure, threads)
        assert np.array_equal(plain, ahead)
        assert len(asked) > 2 and any(asked) == (measure == "bag")  # counts asked for only for bags
        asked.clear()
    in_memory = sets.take(np.arange(n))  # counts past 255 patched from the overflow table
    assert np.array_equal(similarity.pair_jaccard(in_memory, left, right, measure), plain)
    assert asked == []  # nothing to ask the kernel for


def test_prefetch_setting_is_checked_for_every_command(monkeypatch, tmp_path):
    import simdoc.memory as memory
    from click.testing import CliRunner

    from simdoc.cli import cli

    for value, want in (("", True), ("on", True), ("1", True), ("off", False), ("0", False), ("No", False)):
        monkeypatch.setenv("SIMDOC_PREFETCH", value)
        assert memory.prefetch_enabled() is want
    monkeypatch.setenv("SIMDOC_PREFETCH", "sometimes")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "a.txt").write_text("some words here")
    for args in (["pairs", str(tmp_path / "c"), "--index", str(tmp_path / "idx")], ["check", "--index", str(tmp_path / "idx")]):
        res = CliRunner().invoke(cli, args)
        assert res.exit_code == 2 and "SIMDOC_PREFETCH" in res.stderr and "Traceback" not in res.stderr, res.stderr
    assert not (tmp_path / "idx").exists()  # nothing was done


def test_prefetch_off_asks_the_kernel_for_nothing(tmp_path, monkeypatch):
    _long_corpus(tmp_path / "c")
    _build(tmp_path / "c", tmp_path / "idx", monkeypatch, "off")
    sets = pipeline.open_index(tmp_path / "idx").shingle_sets()
    asked = []
    monkeypatch.setattr(os, "posix_fadvise", lambda *a: asked.append(a))
    ip = np.asarray(sets.indptr)
    from simdoc.memory import prefetch

    monkeypatch.setenv("SIMDOC_PREFETCH", "off")
    prefetch(sets.data, ip[:-1], ip[1:])
    assert asked == []
    monkeypatch.setenv("SIMDOC_PREFETCH", "on")
    prefetch(sets.data, ip[:-1], ip[1:])
    assert asked
