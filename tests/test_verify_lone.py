"""Pairs alone in their component, of two plain files, are compared by one kernel call that counts
both documents' windows in a table (no sorted set made): the same integers as the sorted rows'
merge, so the same Jaccards; what the kernel declines goes the sorted way; a file changed or gone
since it was indexed is stale or gone, as there."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import simdoc
import simdoc.stages.verify as verify
from simdoc import kernels
from simdoc.bytesign import pair_sums_spans, sets64_spans
from simdoc.shingling import ShingleSpec
from simdoc.similarity import span_sums
from simdoc.stages.reread import reader_of
from simdoc.store.loaded import open_index

from test_bytesign import documents

compiled = pytest.mark.skipif(not kernels.ENABLED, reason="numba disabled by SIMDOC_NO_NUMBA")
raw_texts = st.binary(max_size=60) | documents.map(lambda t: t.encode("utf-8", "surrogatepass"))
SPECS = [ShingleSpec("char", 1), ShingleSpec("char", 3), ShingleSpec("char", 5), ShingleSpec("char", 4, lowercase=False, unicode="NFKC")]


@compiled
@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(raw_texts, raw_texts), min_size=1, max_size=5), st.sampled_from(SPECS))
def test_pair_sums_of_spans_are_the_sorted_rows_sums(pairs, spec):
    raws = [r for pair in pairs for r in pair]
    starts = np.cumsum([0] + [len(r) + 1 for r in raws[:-1]]).astype(np.int64)
    ends = starts + np.array([len(r) for r in raws], np.int64)
    buf = bytearray(b"\xff".join(raws))  # texts a byte apart, one that is not UTF-8
    got, handled = pair_sums_spans(buf, starts, ends, spec)
    room = len(buf) + 1
    data, counts = np.zeros(room, np.uint64), np.zeros(room, np.uint32)
    rows = sets64_spans(buf, starts, ends, spec, data, counts)
    at = np.concatenate([[0], np.cumsum(np.maximum(rows, 0))])
    spans = np.stack([at[:-1], at[1:]], axis=1)
    want = span_sums(data, counts, spans[0::2], spans[1::2])
    assert handled.tolist() == ((rows[0::2] >= 0) & (rows[1::2] >= 0)).tolist()  # declined as the rows are
    assert np.array_equal(got[handled], want[handled]) and not got[~handled].any()


@compiled
def test_a_probe_past_the_limit_gives_the_pair_up():
    from simdoc.kernels_bytes import PROBE_LIMIT, _count_windows

    bits = 12
    keys, cnt, slots = np.zeros(1 << bits, np.uint64), np.zeros(1 << bits, np.uint64), np.zeros(1 << bits, np.int64)
    shift, mask = np.uint64(64 - bits), np.uint64((1 << bits) - 1)
    spread = (np.arange(1, 1001, dtype=np.uint64) << np.uint64(52)) | np.uint64(7)  # a slot each
    assert _count_windows(spread, 1000, np.uint64(1), keys, cnt, shift, mask, slots, 0) == 1000
    assert _count_windows(spread, 1000, np.uint64(1), keys, cnt, shift, mask, slots, 1000) == 1000  # counted again
    assert set(cnt[cnt > 0].tolist()) == {2}
    cnt[:] = 0
    crafted = np.arange(1, PROBE_LIMIT + 10, dtype=np.uint64)  # every value in slot 0: a run longer than the limit
    used = _count_windows(crafted, len(crafted), np.uint64(1), keys, cnt, shift, mask, slots, 0)
    assert used < 0 and -used - 1 == PROBE_LIMIT + 1  # the slots it used, for the caller to clear


def _lone_corpus(root) -> list[tuple[str, str]]:
    """Pairs of files near each other, each pair alone: ASCII, a BOM, past ASCII, text the kernel
    declines (İ, an astral character), bytes that are not UTF-8, an empty file."""
    root.mkdir()
    base = " ".join(f"word{i % 31} more{i % 11}" for i in range(200))
    kinds = {
        "ascii": base.encode(),
        "bom": ("\ufeff" + base).encode(),
        "accents": ("caf\u00e9 na\u00efve " + base).encode(),
        "declined": ("\u0130stanbul \U0001f600 " + base).encode(),
        "invalid": b"caf\xe9 \xff " + base.encode(),
        "empty": b"",
    }
    pairs = []
    for name, text in kinds.items():
        (root / f"{name}-a.txt").write_bytes(text)
        (root / f"{name}-b.txt").write_bytes(text.replace(b"word3 ", b"other ", 2) + b" tail")
        pairs.append((f"{name}-a.txt", f"{name}-b.txt"))
    return pairs


@pytest.fixture
def lone(tmp_path):
    pairs = _lone_corpus(tmp_path / "c")
    simdoc.find_pairs(tmp_path / "c", tmp_path / "idx", jobs=1, verify=False)
    loaded = open_index(tmp_path / "idx")
    ids = list(loaded.docs().ids)
    left = np.array([ids.index(a) for a, _ in pairs], np.int64)
    right = np.array([ids.index(b) for _, b in pairs], np.int64)
    return tmp_path, loaded, left, right


def sorted_way(monkeypatch, loaded, left, right):
    with monkeypatch.context() as mp:
        mp.setattr(verify, "lone_pairs", lambda ol, *args: np.zeros(len(ol), dtype=bool))
        return verify.verify_pairs(reader_of(loaded), left, right, jobs=1)


@compiled
@pytest.mark.parametrize("jobs", [1, 2])
def test_lone_pairs_give_the_sorted_ways_jaccards_with_no_set_made(lone, monkeypatch, jobs):
    tmp_path, loaded, left, right = lone
    want = sorted_way(monkeypatch, loaded, left, right)
    assert want.ok.all() and want.set_jaccard[:-1].min() > 0.5
    shingled: list[int] = []
    real = verify._Work._shingle
    monkeypatch.setattr(verify._Work, "_shingle", lambda self, buf, s, e, docs, *rest: shingled.extend(docs) or real(self, buf, s, e, docs, *rest))
    # Two units of three pairs with jobs=2 (the pool), each pair its own component.
    reader = reader_of(loaded)
    got = verify.verify_pairs(reader, left, right, jobs=jobs)
    assert got.set_jaccard.tolist() == want.set_jaccard.tolist()
    assert got.bag_jaccard.tolist() == want.bag_jaccard.tolist()
    assert got.ok.all() and not got.stale and not got.gone
    if jobs == 1:  # (the workers' calls are not seen here)
        ids = list(loaded.docs().ids)
        # Only the pairs the kernel declines (a character its table cannot map, bytes that are
        # not UTF-8) went the sorted way: their files read a second time.
        again = ["declined-a.txt", "declined-b.txt", "invalid-a.txt", "invalid-b.txt"]
        assert sorted(ids[d] for d in shingled) == again
        assert {ids[d]: n for d, n in reader.reads.items() if n != 1} == dict.fromkeys(again, 2)


def test_a_lone_pairs_file_edited_or_gone_is_stale_or_gone(lone, monkeypatch):
    tmp_path, loaded, left, right = lone
    want = sorted_way(monkeypatch, loaded, left, right)
    ids = list(loaded.docs().ids)
    edited = tmp_path / "c" / "ascii-b.txt"
    edited.write_bytes(edited.read_bytes().replace(b"word1 ", b"WORD1 ", 1))  # same size, not the same bytes
    (tmp_path / "c" / "accents-a.txt").unlink()
    got = verify.verify_pairs(reader_of(loaded), left, right, jobs=1)
    assert got.stale == {ids.index("ascii-b.txt")} and got.gone == {ids.index("accents-a.txt")}
    bad = np.isin(left, [ids.index("accents-a.txt")]) | np.isin(right, [ids.index("ascii-b.txt")])
    assert bad.sum() == 2 and not got.ok[bad].any() and got.ok[~bad].all()
    assert (got.set_jaccard[bad] == 0).all()
    assert got.set_jaccard[~bad].tolist() == want.set_jaccard[~bad].tolist()


def test_word_shingles_read_each_file_of_a_lone_pair_once(tmp_path, monkeypatch):
    # The kernel only makes character shingles: with words, lone pairs go the sorted way at once
    # (not read for the kernel, declined, then read again).
    pairs = _lone_corpus(tmp_path / "c")
    simdoc.find_pairs(tmp_path / "c", tmp_path / "idx", jobs=1, verify=False, unit="word", k=2)
    loaded = open_index(tmp_path / "idx")
    ids = list(loaded.docs().ids)
    left = np.array([ids.index(a) for a, _ in pairs], np.int64)
    right = np.array([ids.index(b) for _, b in pairs], np.int64)
    want = sorted_way(monkeypatch, loaded, left, right)
    reader = reader_of(loaded)
    got = verify.verify_pairs(reader, left, right, jobs=1)
    assert got.ok.all() and got.set_jaccard.tolist() == want.set_jaccard.tolist()
    assert set(reader.reads.values()) == {1}
