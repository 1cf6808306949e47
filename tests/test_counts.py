"""Shingles repeated far past 255 times count in full: bag Jaccard end to end, and reading ranges of arrays.

Index format 3 keeps no shingle counts (verification re-reads the documents,
see simdoc.verify), so the uint8 counts and their overflow table are gone;
what must still hold is that the printed bag Jaccard is exact however often
a shingle repeats.
"""

from collections import Counter

import numpy as np
from click.testing import CliRunner
from hypothesis import example, given, settings
from hypothesis import strategies as st

import simdoc
from simdoc.cli import cli
from simdoc.shingling import normalise
from simdoc.similarity import bag_jaccard


def _docs(tmp_path):
    corpus = tmp_path / "c"
    corpus.mkdir()
    # "ab" repeated: the shingles "ababa" and "babab" occur ~500 times each, past uint8.
    (corpus / "rep1.txt").write_text("ab" * 1000 + " tail one", encoding="utf-8")
    (corpus / "rep2.txt").write_text("ab" * 700 + " tail two", encoding="utf-8")
    (corpus / "other.txt").write_text("a different document about harbours and lanterns", encoding="utf-8")
    return corpus


def _grams(text: str, k: int = 5) -> list[str]:
    t = normalise(text)
    return [t[i : i + k] for i in range(len(t) - k + 1)]


def test_bag_jaccard_with_counts_past_255_is_exact(tmp_path):
    corpus = _docs(tmp_path)
    g1 = _grams((corpus / "rep1.txt").read_text(encoding="utf-8"))
    g2 = _grams((corpus / "rep2.txt").read_text(encoding="utf-8"))
    assert max(Counter(g1).values()) == 998  # "ababa" at every even offset of 2000 characters
    want = bag_jaccard(g1, g2)  # on the k-grams themselves, no hashing
    assert 0.3 < want < 0.5
    res = simdoc.find_pairs(corpus, tmp_path / "idx", threshold=0.1, measure="bag", jobs=1)
    (pair,) = [p for p in res if {p.doc_a, p.doc_b} == {"rep1.txt", "rep2.txt"}]
    assert abs(pair.jaccard - want) < 1e-12
    # The command prints it, exact to its four decimals, on a fresh index and on the one just built.
    for idx in (tmp_path / "cli", tmp_path / "idx"):
        r = CliRunner().invoke(cli, ["pairs", str(corpus), "--index", str(idx), "--measure", "bag", "--threshold", "0.1"])
        assert r.exit_code == 0, r.stderr
        lines = [line.split("\t") for line in r.stdout.splitlines()]
        (row,) = [line for line in lines if {line[0], line[1]} == {"rep1.txt", "rep2.txt"}]
        assert row[3] == f"{want:.4f}"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 600), st.sampled_from([0, 1, 2, 5, 8, 70, 300])), max_size=12))
@example([(0, 5), (5, 3), (8, 0), (8, 2), (3, 4)])  # ranges that continue one another are read at once
@example([(10, 300)])  # one long range of an array in memory is sliced, short ones gathered
def test_read_ranges_from_a_file_equals_slicing(tmp_path_factory, spans):
    from simdoc.memory import read_ranges

    path = tmp_path_factory.mktemp("rr") / "a.npy"
    np.save(path, np.arange(640, dtype=np.uint32) * 7)
    mapped = np.load(path, mmap_mode="r")
    starts = np.array([a for a, _ in spans], dtype=np.int64)
    stops = np.minimum(starts + np.array([n for _, n in spans], dtype=np.int64), 640)
    want = np.concatenate([np.asarray(mapped[a:b]) for a, b in zip(starts, stops)] + [np.zeros(0, np.uint32)])
    assert np.array_equal(read_ranges(mapped, starts, stops), want)
    assert np.array_equal(read_ranges(np.array(mapped), starts, stops), want)


def test_read_ranges_on_reader_threads_equals_slicing(tmp_path, monkeypatch):
    import simdoc.memory as memory

    path = tmp_path / "big.npy"
    np.save(path, np.arange(200_000, dtype=np.uint32) * 3)
    mapped = np.load(path, mmap_mode="r")
    rng = np.random.default_rng(7)
    starts = np.sort(rng.integers(0, 199_000, 900))
    stops = starts + rng.integers(0, 900, 900)
    starts[5], stops[5] = stops[4], stops[4] + 3  # one range continuing the one before
    want = np.concatenate([np.asarray(mapped[a:b]) for a, b in zip(starts, stops)])
    for per_thread in (1, 16, 10_000):  # 8 groups of reads, fewer, one
        monkeypatch.setattr(memory, "_READS_PER_THREAD", per_thread)
        assert np.array_equal(memory.read_ranges(mapped, starts, stops), want)
