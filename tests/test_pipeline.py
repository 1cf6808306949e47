"""The pipeline from Python: exact answers, determinism, and independence of order, jobs and batches."""

import itertools
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import simdoc
import simdoc.similarity
import simdoc.stages.results
import simdoc.stages.scan
import simdoc.stages.verify
import simdoc.store.loaded
from simdoc.engines.local import LocalEngine
from simdoc.errors import ParameterMismatch
from simdoc.params import BandingParams
from simdoc.shingling import ShingleSpec, shingle_texts
from simdoc.similarity import jaccard
from simdoc.stages.index import build_index
from simdoc.stages.pairs import find_pairs
from simdoc.stages.shingle import build_shingles
from simdoc.stages.signature import build_signatures
from simdoc.store.verified import VerifiedPairs

WORDS = (
    "river stone lantern orchard copper meadow signal harbor velvet thunder cobalt willow "
    "ember quarry falcon garnet ledger mosaic nectar oyster pepper quiver saffron tundra "
    "umber violet walnut yonder zephyr anchor bramble cinder dapple fennel glimmer hollow"
).split()


def make_corpus(root: Path, seed: int = 0, n_base: int = 12, order=None) -> dict[str, str]:
    """Random texts plus edited copies at several similarities; returns id -> text."""
    rng = np.random.default_rng(seed)
    docs = {}
    for i in range(n_base):
        words = rng.choice(WORDS, size=120).tolist()
        docs[f"base/doc{i:02d}.txt"] = " ".join(words)
        for edits in (2, 10, 30):
            if rng.random() < 0.5:
                w = list(words)
                for pos in rng.choice(len(w), size=edits, replace=False):
                    w[pos] = rng.choice(WORDS)
                docs[f"edit{edits}/doc{i:02d}.txt"] = " ".join(w)
    docs["copies/exact.txt"] = docs["base/doc00.txt"]
    docs["empty.txt"] = ""
    names = list(docs) if order is None else [list(docs)[i] for i in order]
    for name in names:
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(docs[name], encoding="utf-8")
    return docs


def exact_pairs(docs: dict[str, str], threshold: float, spec=ShingleSpec()) -> dict[tuple[str, str], float]:
    ids = sorted(docs)
    sets = shingle_texts([docs[i] for i in ids], spec)
    out = {}
    for a, b in itertools.combinations(range(len(ids)), 2):
        if len(sets.row(a)) == 0 or len(sets.row(b)) == 0:
            continue
        j = jaccard(sets.row(a), sets.row(b))
        if j >= threshold:
            out[(ids[a], ids[b])] = j
    return out


def as_dict(result) -> dict[tuple[str, str], float]:
    return {(p.doc_a, p.doc_b): p.jaccard for p in result}


def test_pairs_are_exact_and_complete(tmp_path):
    docs = make_corpus(tmp_path / "c")
    truth = exact_pairs(docs, 0.6)
    res = simdoc.find_pairs(tmp_path / "c", tmp_path / "idx", threshold=0.6, jobs=1)
    got = as_dict(res)
    # Precision is 1 by construction (verified), and the numbers are the exact ones.
    for pair, j in got.items():
        assert j == pytest.approx(truth[pair])
    # Recall: every pair clearly above the threshold is found (P(miss) at J >= 0.75 is < 1e-6).
    assert {p for p, j in truth.items() if j >= 0.75} <= set(got)
    assert ("base/doc00.txt", "copies/exact.txt") in got
    # Records are sorted by jaccard descending, then names, and doc_a < doc_b.
    rows = [(-round(p.jaccard, 4), p.doc_a, p.doc_b) for p in res]
    assert rows == sorted(rows)
    assert all(p.doc_a < p.doc_b for p in res)
    assert all(not ("empty.txt" in (p.doc_a, p.doc_b)) for p in res)


def test_all_candidates_and_no_verify(tmp_path):
    make_corpus(tmp_path / "c")
    all_c = simdoc.find_pairs(tmp_path / "c", tmp_path / "idx", threshold=0.6, all_candidates=True, jobs=1)
    assert len(all_c) == all_c.n_candidates
    assert all(p.jaccard is not None for p in all_c)
    est = simdoc.find_pairs(None, tmp_path / "idx", threshold=0.6, verify=False)
    assert all(p.jaccard is None and p.estimated >= 0.6 for p in est)


def counting_verifications(monkeypatch) -> list[int]:
    """Patch verification to record how many pairs each call verifies (the list returned)."""
    counts: list[int] = []
    real = simdoc.stages.results.verify_pairs

    def counting(reader, left, right, *args, **kwargs):
        counts.append(len(left))
        return real(reader, left, right, *args, **kwargs)

    monkeypatch.setattr(simdoc.stages.results, "verify_pairs", counting)
    # Every pair is verified from the documents, not looked up in the verified-pairs table.
    monkeypatch.setattr(simdoc.store.loaded.LoadedIndex, "verified_pairs", lambda self: VerifiedPairs())
    return counts


def pairs_and_verified(index: Path, threshold: float, counts: list[int]) -> tuple[list[tuple], int]:
    """The pairs found at ``threshold``, and how many candidates were verified to find them."""
    counts.clear()
    res = simdoc.find_pairs(None, index, threshold=threshold)
    return [(p.doc_a, p.doc_b, p.estimated, p.jaccard) for p in res], sum(counts)


def test_pairs_ruled_out_by_estimate_are_not_read_and_change_nothing(tmp_path, monkeypatch):
    make_corpus(tmp_path / "c")
    # Classic MinHash: the binomial bound holds whatever the set sizes (OPH needs large sets).
    simdoc.find_pairs(tmp_path / "c", tmp_path / "idx", threshold=0.3, scheme="classic", jobs=1)
    counts = counting_verifications(monkeypatch)
    fewer = 0
    for t in (0.3, 0.5, 0.7, 0.9, 1.0):
        with_filter, n_verified = pairs_and_verified(tmp_path / "idx", t, counts)
        with monkeypatch.context() as m:
            m.setattr(simdoc.similarity, "RULE_OUT_PROBABILITY", 0.0)  # min_matches is 0: nothing ruled out
            without, n_all = pairs_and_verified(tmp_path / "idx", t, counts)
            assert without == with_filter
            fewer += n_verified < n_all
    assert fewer  # the estimate alone (the size bound is on in both runs) ruled some out


def index_bytes(index: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(index.glob("*.npy"))}


def test_same_seed_gives_byte_identical_arrays(tmp_path):
    make_corpus(tmp_path / "c")
    simdoc.find_pairs(tmp_path / "c", tmp_path / "i1", jobs=1)
    simdoc.find_pairs(tmp_path / "c", tmp_path / "i2", jobs=1)
    a, b = index_bytes(tmp_path / "i1"), index_bytes(tmp_path / "i2")
    assert a == b and len(a) == 27  # 20 docs arrays (format 5: keys, and file names once a run), family, signatures, bands, buckets, groups, verified pairs


def test_jobs_and_batch_sizes_do_not_change_anything(tmp_path, monkeypatch):
    make_corpus(tmp_path / "c", n_base=20)
    ref = simdoc.find_pairs(tmp_path / "c", tmp_path / "i1", jobs=1)
    monkeypatch.setattr(simdoc.stages.scan, "BATCH_DOCS", 3)
    monkeypatch.setattr(simdoc.stages.results, "SCORE_PAIRS", 5)
    monkeypatch.setattr(simdoc.stages.verify, "CHUNK_PAIRS", 2)  # many chunks, and a cache that holds few sets
    monkeypatch.setattr(simdoc.stages.verify, "CACHE_BYTES", 4000)
    other = simdoc.find_pairs(tmp_path / "c", tmp_path / "i2", jobs=2)
    assert index_bytes(tmp_path / "i1") == index_bytes(tmp_path / "i2")
    assert list(ref) == list(other)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.randoms(use_true_random=False))
def test_file_creation_order_does_not_matter(tmp_path_factory, rnd):
    base = tmp_path_factory.mktemp("order")
    docs = make_corpus(base / "a", seed=3)
    order = list(range(len(docs)))
    rnd.shuffle(order)
    make_corpus(base / "b", seed=3, order=order)
    ra = simdoc.find_pairs(base / "a", base / "ia", jobs=1)
    rb = simdoc.find_pairs(base / "b", base / "ib", jobs=1)
    assert list(ra) == list(rb)


def test_one_command_equals_stage_by_stage(tmp_path):
    make_corpus(tmp_path / "c")
    one = simdoc.find_pairs(tmp_path / "c", tmp_path / "i1", threshold=0.7)
    build_shingles(tmp_path / "c", tmp_path / "i2")
    build_signatures(tmp_path / "i2")
    build_index(tmp_path / "i2", BandingParams(threshold=0.7))
    staged = simdoc.find_pairs(None, tmp_path / "i2", threshold=0.7)
    assert list(one) == list(staged)


def test_parameter_mismatch_and_rebuild(tmp_path):
    make_corpus(tmp_path / "c")
    simdoc.find_pairs(tmp_path / "c", tmp_path / "idx")
    with pytest.raises(ParameterMismatch, match="with --k 5"):
        simdoc.find_pairs(tmp_path / "c", tmp_path / "idx", k=4)
    with pytest.raises(ParameterMismatch, match="--num-perm 64"):
        simdoc.find_pairs(tmp_path / "c", tmp_path / "idx", num_perm=64)
    res = simdoc.find_pairs(tmp_path / "c", tmp_path / "idx", k=4, num_perm=64, rebuild=True)
    assert res.banding.bands * res.banding.rows <= 64
    # Unchanged parameters are reused without asking again.
    assert simdoc.find_pairs(tmp_path / "c", tmp_path / "idx").stages[0].built is False


def test_changed_corpus_is_reshingled(tmp_path):
    docs = make_corpus(tmp_path / "c")
    simdoc.find_pairs(tmp_path / "c", tmp_path / "idx")
    (tmp_path / "c" / "copies" / "exact2.txt").write_text(docs["base/doc01.txt"], encoding="utf-8")
    res = simdoc.find_pairs(tmp_path / "c", tmp_path / "idx")
    assert res.stages[0].built
    assert ("base/doc01.txt", "copies/exact2.txt") in as_dict(res)


def test_new_threshold_rebands_cheaply(tmp_path):
    make_corpus(tmp_path / "c")
    r1 = simdoc.find_pairs(tmp_path / "c", tmp_path / "idx", threshold=0.6)
    r2 = simdoc.find_pairs(tmp_path / "c", tmp_path / "idx", threshold=0.9)
    assert [s.built for s in r2.stages[:3]] == [False, False, True]
    assert (r1.banding.bands, r1.banding.rows) != (r2.banding.bands, r2.banding.rows)
    assert all(p.jaccard >= 0.9 for p in r2)


def test_the_shingle_stage_gives_the_cycle_collector_back(tmp_path):
    # The stage pauses Python's cycle collector; it must be running again afterwards,
    # after a failure too, and stay off if the caller had turned it off.
    import gc

    from simdoc.errors import CorpusError

    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "a.txt").write_text("a few words of text", encoding="utf-8")
    assert gc.isenabled()
    build_shingles(corpus, tmp_path / "idx", engine=LocalEngine(1))
    assert gc.isenabled()
    with pytest.raises(CorpusError):
        build_shingles(tmp_path / "missing", tmp_path / "idx2", engine=LocalEngine(1))
    assert gc.isenabled()
    gc.disable()
    try:
        build_shingles(corpus, tmp_path / "idx3", engine=LocalEngine(1))
        assert not gc.isenabled()
    finally:
        gc.enable()


# ---------------------------------------------------------------- progress bars (issue 17.15)

_BAR_WITH_TOTAL = r"shingle: +\d+%\|[^|]*\| \d+/{n} \[\d\d:\d\d<"  # share done, n of total, time left


def _bars(capsys) -> str:
    return capsys.readouterr().err.replace("\r", "\n")


def test_progress_bars_know_their_total(tmp_path, capsys):
    import re

    corpus = tmp_path / "c"
    make_corpus(corpus)
    n = sum(1 for p in corpus.rglob("*") if p.is_file())
    idx = tmp_path / "idx"
    capsys.readouterr()
    # A first build lists the corpus while it reads it: the bar learns the total when the listing ends.
    list(find_pairs(corpus, idx, progress=True, jobs=1))
    first = _bars(capsys)
    assert re.search(_BAR_WITH_TOTAL.format(n=n), first), first
    assert "signature:" not in first  # computed while shingling: nothing to show
    # An update knows the list first.
    (corpus / "new.txt").write_text("a new document about harbour cranes and tide tables", encoding="utf-8")
    list(find_pairs(corpus, idx, progress=True, jobs=1))
    update = _bars(capsys)
    assert re.search(_BAR_WITH_TOTAL.format(n=n + 1), update), update


def test_no_progress_bars_unless_asked(tmp_path, capsys):
    corpus = tmp_path / "c"
    make_corpus(corpus)
    capsys.readouterr()
    list(find_pairs(corpus, tmp_path / "idx", progress=False, jobs=1))
    assert capsys.readouterr().err == ""
