"""Shingles repeated far past 255 times count in full: bag Jaccard end to end.

Index format 3 keeps no shingle counts (verification re-reads the documents,
see simdoc.stages.verify), so the uint8 counts and their overflow table are gone;
what must still hold is that the printed bag Jaccard is exact however often
a shingle repeats.
"""

from collections import Counter

from click.testing import CliRunner

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
