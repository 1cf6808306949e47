"""One-permutation hashing with optimal densification: exact reference, unbiased, a full pipeline scheme."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_kernels import both

import simdoc
from simdoc.errors import ParameterMismatch
from simdoc.minhash import MinHasher, oph_probe
from simdoc.shinglesets import ShingleSets
from simdoc.similarity import estimate_jaccard


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.integers(0, 2**32 - 1), max_size=300), min_size=1, max_size=6), st.integers(0, 2**63))
def test_kernel_equals_reference(rows, seed):
    sets = ShingleSets.from_sets(rows)
    h = MinHasher(64, seed, scheme="oph")
    compiled, reference = both(lambda: h.signatures(sets))
    assert np.array_equal(compiled, reference)


def test_identical_sets_identical_signatures_and_empty_set():
    sets = ShingleSets.from_sets([{1, 2, 3}, {3, 2, 1}, set()])
    sig = MinHasher(128, 4, scheme="oph").signatures(sets)
    assert np.array_equal(sig[0], sig[1])
    assert np.all(sig[2] == 0xFFFFFFFF)
    # A one-element set fills every bin by densification with its single value.
    one = MinHasher(128, 4, scheme="oph").signatures(ShingleSets.from_sets([{42}]))
    assert len(set(one[0].tolist())) == 1


def test_probe_sequence_is_deterministic_and_in_range():
    seen = [oph_probe(5, t, 1234, 128) for t in range(50)]
    assert seen == [oph_probe(5, t, 1234, 128) for t in range(50)]
    assert all(0 <= b < 128 for b in seen) and len(set(seen)) > 20


@pytest.mark.parametrize("inter,union", [(3, 6), (10, 80), (50, 100), (80, 100), (400, 1000)])
def test_estimates_unbiased(inter, union):
    rng = np.random.default_rng(inter * 7 + union)
    j = inter / union
    est = []
    trials = 150
    for t in range(trials):
        u = rng.choice(2**32, size=union, replace=False)
        only = union - inter
        a = set(u[: inter + only // 2].tolist())
        b = set(u[:inter].tolist()) | set(u[inter + only // 2 :].tolist())
        sig = MinHasher(128, t + 1, scheme="oph").signatures(ShingleSets.from_sets([a, b]))
        est.append(estimate_jaccard(sig[0], sig[1]))
    est = np.array(est)
    # Densification copies values, so small sets spread wider than binomial: allow twice its spread.
    sd = 2 * np.sqrt(j * (1 - j) / 128)
    assert abs(est.mean() - j) < 4 * sd / np.sqrt(trials)


def test_oph_pipeline_finds_the_same_verified_pairs(tmp_path):
    from test_pipeline import exact_pairs, make_corpus

    docs = make_corpus(tmp_path / "c")
    classic = simdoc.find_pairs(tmp_path / "c", tmp_path / "i1", threshold=0.6, jobs=1)
    oph = simdoc.find_pairs(tmp_path / "c", tmp_path / "i2", threshold=0.6, scheme="oph", jobs=1)
    truth = exact_pairs(docs, 0.75)
    got = {(p.doc_a, p.doc_b): p.jaccard for p in oph}
    assert set(truth) <= set(got)
    assert all(got[k] == pytest.approx(v) for k, v in {(p.doc_a, p.doc_b): p.jaccard for p in classic}.items() if k in got)
    with pytest.raises(ParameterMismatch, match="scheme"):
        simdoc.find_pairs(tmp_path / "c", tmp_path / "i2", scheme="classic")
