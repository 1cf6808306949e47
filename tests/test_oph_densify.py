"""Optimal densification in the numpy reference: every empty bin probed at once, not one scalar
probe per attempt (a short document under --num-perm 1024 took ~12 s, 2048 on 30 files 156 s)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simdoc import jit, kernels, minhash
from simdoc.minhash import MinHasher, SignatureFold, oph_densify, oph_probe
from simdoc.shinglesets import ShingleSets


def _scalar_densify(sig, filled, probe_key, num_perm):
    """The definition: each empty bin walks its own probe sequence to the first filled bin."""
    dense = sig.copy()
    for i in np.flatnonzero(~filled).tolist():
        attempt = 0
        while not filled[j := oph_probe(i, attempt, probe_key, num_perm)]:
            attempt += 1
        dense[i] = sig[j]
    return dense


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 300), st.data(), st.integers(0, 2**64 - 1))
def test_densify_equals_the_probe_sequence(num_perm, data, probe_key):
    filled = np.array(data.draw(st.lists(st.booleans(), min_size=num_perm, max_size=num_perm)), dtype=bool)
    if not filled.any():
        filled[data.draw(st.integers(0, num_perm - 1))] = True
    sig = np.array(data.draw(st.lists(st.integers(0, 2**32 - 2), min_size=num_perm, max_size=num_perm)), dtype=np.uint32)
    sig[~filled] = 0xFFFFFFFF
    assert oph_densify(sig, filled, probe_key, num_perm).tolist() == _scalar_densify(sig, filled, probe_key, num_perm).tolist()


def _count_mix(monkeypatch):
    calls = [0]
    real = minhash._mix64

    def counted(z):
        calls[0] += 1
        return real(z)

    monkeypatch.setattr(minhash, "_mix64", counted)
    return calls


def test_short_documents_under_a_long_signature_take_few_array_steps(monkeypatch):
    """1, 2 and 3 shingles under 1024 bins: ~1000 empty bins needing ~1024/f attempts each were
    ~10^6 scalar probes (each one call of _mix64); as arrays, a few thousand steps at most."""
    sets = ShingleSets.from_sets([{7}, {7, 99}, {1, 2, 3}])
    h = MinHasher(1024, 3, scheme="oph")
    compiled = h.signatures(sets) if jit.ENABLED else None
    calls = _count_mix(monkeypatch)
    enabled, jit.ENABLED = jit.ENABLED, False
    try:
        reference = h.signatures(sets)
    finally:
        jit.ENABLED = enabled
    assert calls[0] < 20_000
    assert len(set(reference[0].tolist())) == 1
    if compiled is not None:
        assert np.array_equal(reference, compiled)


def test_signature_fold_densifies_the_same(monkeypatch):
    h = MinHasher(1024, 5, scheme="oph")
    enabled, jit.ENABLED = jit.ENABLED, False
    try:
        whole = h.signatures(ShingleSets.from_sets([{11, 12}]))[0]
        calls = _count_mix(monkeypatch)
        fold = SignatureFold(h)
        fold.add(np.array([11], np.uint32))
        fold.add(np.array([12], np.uint32))
        assert np.array_equal(fold.result(), whole)
    finally:
        jit.ENABLED = enabled
    assert calls[0] < 20_000


def test_the_compiled_kernels_give_a_one_shingle_text_its_one_bin_at_once():
    """One shingle (a text of k characters or fewer) under --num-perm 65536: each of 65,535 empty
    bins walked its probe sequence to the only filled bin, ~65,536 attempts each (~12 s a
    document in both compiled kernels). Both now copy that bin, as the reference does; a text
    of two or three shingles still walks (checked at 1024 bins: the same signatures)."""
    if not jit.ENABLED:
        pytest.skip("numba disabled by SIMDOC_NO_NUMBA")
    from simdoc import bytesign
    from simdoc.shingling import ShingleSpec, shingle_texts

    spec = ShingleSpec("char", 5, True, "NFC")
    for num_perm, texts in ((65536, ["abcde", "ab", "  xyz  "]), (1024, ["abcde", "ab", "abcdef", "abcdefg"]), (1, ["abcdefg"])):
        h = MinHasher(num_perm, 5, scheme="oph")
        stream = shingle_texts(texts, spec, form="stream")
        by_bytes = np.zeros((len(texts), num_perm), np.uint32)
        bytesign.sign_texts(texts, spec, h, by_bytes)  # simdoc.kernels_bytes: the scan's kernel
        by_csr = h.signatures(stream)  # simdoc.kernels.oph_csr
        enabled, jit.ENABLED = jit.ENABLED, False
        try:
            reference = h.signatures(stream)
        finally:
            jit.ENABLED = enabled
        assert by_bytes.tobytes() == reference.tobytes() and by_csr.tobytes() == reference.tobytes(), num_perm
        if num_perm == 65536:
            assert all(len(set(row.tolist())) == 1 for row in reference)
