"""Pairs sort by the value printed (README "Output": jaccard descending, the printed 4-decimal
value, then doc_a, then doc_b), not by np.round's, which differs just below a half (QA 2026-11-27).

83/800 = 0.10375 is 0.103749999... as a float: printed 0.1037, but np.round(x, 4) scales by
10^4 inexactly and gives 0.1038, which sorted such a pair before every other 0.1037 pair.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from simdoc.stages.results import as_printed, in_print_order


def test_a_value_just_below_a_half_sorts_with_the_value_it_prints():
    left, right = np.array([5, 1]), np.array([6, 2])
    jac = np.array([83 / 800, 280 / 2700])  # both print 0.1037
    out = in_print_order([(left, right, np.zeros(2), jac)], verify=True)
    assert out[0].tolist() == [1, 5] and out[1].tolist() == [2, 6]


@given(st.floats(0.0, 1.0) | st.integers(0, 10**6).map(lambda m: m / 10**6) | st.integers(0, 800).map(lambda m: m / 800))
def test_as_printed_is_the_printed_value(x):
    assert as_printed(np.array([x]))[0] == float(f"{x:.4f}")


def test_cli_orders_pairs_of_one_printed_jaccard_by_names(run, tmp_path):
    corpus = tmp_path / "c"
    corpus.mkdir()
    b = [f"b{i}" for i in range(800)]  # b1, b2: 83 shared words of 800: 0.10375, printed 0.1037
    (corpus / "b1.txt").write_text(" ".join(b[:442]))
    (corpus / "b2.txt").write_text(" ".join(b[359:]))
    a = [f"a{i}" for i in range(2700)]  # a1, a2: 280 of 2700: 0.103703..., printed 0.1037
    (corpus / "a1.txt").write_text(" ".join(a[:1490]))
    (corpus / "a2.txt").write_text(" ".join(a[1210:]))
    r = run("pairs", corpus, "--index", tmp_path / "idx", "--unit", "word", "--k", "1", "-t", "0.05", "-f", "tsv", "-j", "1")
    assert r.exit_code == 0, r.stderr
    rows = [line.split("\t") for line in r.stdout.splitlines()]
    assert [(x[0], x[1], x[3]) for x in rows] == [("a1.txt", "a2.txt", "0.1037"), ("b1.txt", "b2.txt", "0.1037")]
