"""The pipeline from Python: exact answers, determinism, and independence of order, jobs and batches."""

import itertools
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import simdoc
import simdoc.pipeline as pipeline
import simdoc.results
import simdoc.similarity
from simdoc.errors import ParameterMismatch
from simdoc.shingling import ShingleSpec, shingle_texts
from simdoc.similarity import jaccard

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
    real = simdoc.results.pair_jaccard

    def counting(sets, left, right, *args, **kwargs):
        counts.append(len(left))
        return real(sets, left, right, *args, **kwargs)

    monkeypatch.setattr(simdoc.results, "pair_jaccard", counting)
    return counts


def pairs_and_verified(index: Path, threshold: float, counts: list[int]) -> tuple[list[tuple], int]:
    """The pairs found at ``threshold``, and how many candidates were verified to find them."""
    counts.clear()
    res = simdoc.find_pairs(None, index, threshold=threshold)
    return [(p.doc_a, p.doc_b, p.estimated, p.jaccard) for p in res], sum(counts)


def test_pairs_ruled_out_by_size_are_not_read_and_change_nothing(tmp_path, monkeypatch):
    docs = make_corpus(tmp_path / "c")
    # Prefixes of one text: sizes alone rule out the threshold for the shorter ones.
    words = docs["base/doc01.txt"].split()
    for n in (60, 80, 100, 110):
        (tmp_path / "c" / f"prefix{n}.txt").write_text(" ".join(words[:n]), encoding="utf-8")
    simdoc.find_pairs(tmp_path / "c", tmp_path / "idx", threshold=0.3, jobs=1)
    counts = counting_verifications(monkeypatch)
    for t in (0.05, 0.5, 0.6, 0.8, 0.9, 1.0):
        with_filter, n_verified = pairs_and_verified(tmp_path / "idx", t, counts)
        with monkeypatch.context() as m:
            m.setattr(simdoc.results, "set_jaccard_bound", lambda a, b: np.ones(len(a)))
            m.setattr(simdoc.results, "estimate_rules_out", lambda est, *a: np.zeros(len(est), bool))
            without, n_all = pairs_and_verified(tmp_path / "idx", t, counts)
            assert without == with_filter
            if t in (0.8, 0.9):
                assert n_verified < n_all, t  # some candidates were ruled out unread
        everything = simdoc.find_pairs(None, tmp_path / "idx", threshold=t, all_candidates=True)
        assert len(everything) == everything.n_candidates and all(p.jaccard is not None for p in everything)


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
    assert a == b and len(a) == 10


def test_jobs_and_batch_sizes_do_not_change_anything(tmp_path, monkeypatch):
    make_corpus(tmp_path / "c", n_base=20)
    ref = simdoc.find_pairs(tmp_path / "c", tmp_path / "i1", jobs=1)
    monkeypatch.setattr(pipeline, "BATCH_DOCS", 3)
    monkeypatch.setattr(pipeline, "SIGNATURE_TASK_SHINGLES", 97)
    monkeypatch.setattr(simdoc.results, "SCORE_PAIRS", 5)
    monkeypatch.setattr(simdoc.similarity, "PAIR_BATCH_ITEMS", 40)  # many batches for the verifying threads
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
    pipeline.build_shingles(tmp_path / "c", tmp_path / "i2")
    pipeline.build_signatures(tmp_path / "i2")
    pipeline.build_index(tmp_path / "i2", threshold=0.7)
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
    assert [s.built for s in r2.stages] == [False, False, True]
    assert (r1.banding.bands, r1.banding.rows) != (r2.banding.bands, r2.banding.rows)
    assert all(p.jaccard >= 0.9 for p in r2)


def test_take_reads_rows_of_a_mapped_index_like_slicing(tmp_path):
    make_corpus(tmp_path / "c")
    simdoc.find_pairs(tmp_path / "c", tmp_path / "i", jobs=1)
    sets = pipeline.open_index(tmp_path / "i").shingle_sets()
    assert isinstance(sets.data.base, np.memmap) or isinstance(sets.data, np.memmap)
    rows = np.array([3, 0, 3, len(sets) - 1])
    got = sets.take(rows)
    for k, r in enumerate(rows):
        assert np.array_equal(got.row(k), sets.row(r))
        assert np.array_equal(got.row_counts(k), sets.row_counts(r))
    in_memory = type(sets)(np.asarray(sets.indptr), np.array(sets.data), np.array(sets.counts)).take(rows)
    assert np.array_equal(in_memory.data, got.data) and np.array_equal(in_memory.indptr, got.indptr)


def test_prefetch_is_only_a_hint(tmp_path, monkeypatch):
    from simdoc.memory import prefetch

    make_corpus(tmp_path / "c")
    simdoc.find_pairs(tmp_path / "c", tmp_path / "i", jobs=1)
    sets = pipeline.open_index(tmp_path / "i").shingle_sets()
    asked = []
    real = os.posix_fadvise
    monkeypatch.setattr(os, "posix_fadvise", lambda fd, off, n, advice: (asked.append((off, n)), real(fd, off, n, advice)))
    ip = np.asarray(sets.indptr)
    rows = np.array([5, 0, 5, len(sets) - 1, 2])  # unsorted, repeated, the last row
    before = sets.take(rows)
    prefetch(sets.data, ip[rows], ip[rows + 1])
    # Whole rows are asked for, rows within a page of each other together, never past the file.
    size = os.path.getsize(sets.data.filename if isinstance(sets.data, np.memmap) else sets.data.base.filename)
    assert asked and all(0 < off and off + n <= size for off, n in asked)
    assert sum(n for _, n in asked) >= 4 * int(sum(ip[r + 1] - ip[r] for r in {0, 2, 5, len(sets) - 1}))
    after = sets.take(rows)
    assert np.array_equal(before.data, after.data) and np.array_equal(before.counts, after.counts)
    asked.clear()
    prefetch(np.array(sets.data), ip[rows], ip[rows + 1])  # in memory: nothing to ask
    prefetch(sets.data, ip[rows][:0], ip[rows][:0])
    assert asked == []


@settings(max_examples=30, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["id", "size", "note"]), st.one_of(st.text(), st.integers())), max_size=12), st.integers(1, 64))
def test_jsonl_reading_in_chunks_gives_every_record(tmp_path_factory, records, chunk):
    import simdoc.store as store

    d = tmp_path_factory.mktemp("jsonl")
    s = store.IndexStore(d)
    info = s.write_jsonl("docs.0123456789abcdef.jsonl", records)
    saved = store._JSONL_CHUNK
    store._JSONL_CHUNK = chunk  # records parsed in many small arrays
    try:
        assert list(s.iter_jsonl("docs.0123456789abcdef.jsonl", info)) == records
    finally:
        store._JSONL_CHUNK = saved


def test_sequencer_hands_out_places_in_turn_and_gives_up_without_its_parent():
    import multiprocessing

    from simdoc.batches import Sequencer

    seq = Sequencer(multiprocessing.get_context())
    assert seq.reserve(0, 10) == 0 and seq.reserve(1, 0) == 10 and seq.reserve(2, 5) == 10
    assert seq.reserve(3, 1) == 15
    seq.parent = -1  # as seen from a worker whose parent is gone
    with pytest.raises(RuntimeError, match="gone"):
        seq.reserve(7, 1)  # turn 4 never comes


def test_an_abandoned_in_process_run_does_not_uninstall_another_runs_sequencer():
    import gc

    import simdoc.batches as batches

    seen = []

    def task(x):
        gc.collect()  # collect the abandoned run's generator now, mid-call
        seen.append(batches._SEQUENCER)
        return x

    abandoned = pipeline._pool_map(task, [1, 2], 1, "first run")
    assert next(abandoned) == 1
    holder = [abandoned]
    holder.append(holder)  # a reference cycle: only the garbage collector frees it
    del abandoned, holder
    assert list(pipeline._pool_map(task, [3], 1, "second run")) == [3]
    assert seen == ["first run", "second run"]
    assert batches._SEQUENCER is None


def test_the_shingle_stage_gives_the_cycle_collector_back(tmp_path):
    # The stage pauses Python's cycle collector; it must be running again afterwards,
    # after a failure too, and stay off if the caller had turned it off.
    import gc

    from simdoc.errors import CorpusError

    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "a.txt").write_text("a few words of text", encoding="utf-8")
    assert gc.isenabled()
    pipeline.build_shingles(corpus, tmp_path / "idx", jobs=1)
    assert gc.isenabled()
    with pytest.raises(CorpusError):
        pipeline.build_shingles(tmp_path / "missing", tmp_path / "idx2", jobs=1)
    assert gc.isenabled()
    gc.disable()
    try:
        pipeline.build_shingles(corpus, tmp_path / "idx3", jobs=1)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_docs_table_just_written_is_not_parsed_again_and_a_changed_one_is(tmp_path):
    make_corpus(tmp_path / "c")
    idx = tmp_path / "idx"
    pipeline.build_shingles(tmp_path / "c", idx)
    loaded = pipeline.open_index(idx)
    st = loaded.stage("shingle")
    name = st["roles"]["docs"]
    parsed = [[r["id"] for r in loaded.doc_records()], [r["changed"] for r in loaded.doc_records()]]
    kept = loaded.store.published_columns(name, st["files"][name], ["id", "changed"])
    assert kept == parsed and loaded.doc_columns(["id", "changed"]) == parsed
    assert loaded.store.published_columns(name, st["files"][name], ["id", "mtime_ns"]) is None  # not kept
    # The kept columns are the table's, an optional one None where a record lacks it.
    records = loaded.doc_records()
    for field in ("digest", "size", "source"):
        assert loaded.store.published_columns(name, st["files"][name], [field]) == [[r.get(field) for r in records]]
    # The same bytes in a new file (another process rewrote it): parsed again.
    path = idx / name
    raw = path.read_bytes()
    path.unlink()
    path.write_bytes(raw)
    assert loaded.store.published_columns(name, st["files"][name], ["id"]) is None
    assert loaded.doc_ids() == parsed[0]


def test_a_column_some_record_lacks_is_not_kept(tmp_path):
    import simdoc.store as store

    w = store.JsonlWriter(tmp_path, "t.jsonl", columns=("id", "note"))
    w.add({"id": "a", "note": 1})
    w.add({"id": "b"})
    w.add({"id": "c", "note": 3})
    info = w.finish()
    s = store.IndexStore(tmp_path)
    assert s.published_columns("t.jsonl", info, ["id"]) == [["a", "b", "c"]]
    assert s.published_columns("t.jsonl", info, ["note"]) is None


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
    list(pipeline.find_pairs(corpus, idx, progress=True, jobs=1))
    first = _bars(capsys)
    assert re.search(_BAR_WITH_TOTAL.format(n=n), first), first
    assert "signature:" not in first  # computed while shingling: nothing to show
    # An update knows the list first.
    (corpus / "new.txt").write_text("a new document about harbour cranes and tide tables", encoding="utf-8")
    list(pipeline.find_pairs(corpus, idx, progress=True, jobs=1))
    update = _bars(capsys)
    assert re.search(_BAR_WITH_TOTAL.format(n=n + 1), update), update


def test_no_progress_bars_unless_asked(tmp_path, capsys):
    corpus = tmp_path / "c"
    make_corpus(corpus)
    capsys.readouterr()
    list(pipeline.find_pairs(corpus, tmp_path / "idx", progress=False, jobs=1))
    assert capsys.readouterr().err == ""
