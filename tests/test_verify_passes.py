"""A large pair is verified in passes, one range of 64-bit hashes each (issue 28 item 7).

The ranges cut every sorted set into consecutive runs, so the passes' counts
sum to those of the whole sets and the Jaccards printed are the same floats;
only one range of each document's set is held at a time.
"""

from __future__ import annotations

import json
import random
from unittest import mock

import numpy as np
import pytest
from conftest import write
from hypothesis import given, settings
from hypothesis import strategies as st

import simdoc
import simdoc.similarity as similarity
import simdoc.stages.verify as verify
from simdoc.corpus import streaming
from simdoc.shingling import ShingleSpec
from simdoc.stages.reread import reader_of
from simdoc.store.loaded import open_index

_PARTS = ["a", "b", "The", "of", "AND", "x", " ", "\n", "\u00a0", "e\u0301", "Σ", "z."]


@settings(max_examples=80, deadline=None)
@given(
    texts=st.lists(st.lists(st.sampled_from(_PARTS), max_size=150).map("".join), min_size=1, max_size=4),
    unit=st.sampled_from(["char", "word", "stopword"]),
    k=st.integers(1, 4),
    n_parts=st.integers(1, 7),
    cut_at=st.lists(st.integers(1, 6)),
    piece=st.sampled_from([5, 23, 1 << 18]),
)
def test_the_ranges_of_a_set_make_the_whole_set(texts, unit, k, n_parts, cut_at, piece):
    spec = ShingleSpec(unit, k)
    with mock.patch.object(streaming, "PIECE_CHARS", piece):
        whole = streaming.sets64_of_texts(texts, spec)
        cuts = [0, *sorted(set(cut_at) & set(range(1, n_parts))), n_parts]  # ranges of several parts too
        parts = [streaming.sets64_of_texts(texts, spec, (lo, hi, n_parts)) for lo, hi in zip(cuts, cuts[1:])]
    for row in range(len(texts)):
        data = np.concatenate([s.data[s.indptr[row] : s.indptr[row + 1]] for s in parts])
        counts = np.concatenate([s.counts[s.indptr[row] : s.indptr[row + 1]] for s in parts])
        assert data.tobytes() == whole.data[whole.indptr[row] : whole.indptr[row + 1]].tobytes()
        assert counts.tobytes() == whole.counts[whole.indptr[row] : whole.indptr[row + 1]].tobytes()


def _corpus(root, rng: random.Random) -> None:
    words = "the of and amber basil cedar Delta ember fjord grove heron é".split()
    for i in range(6):
        body = " ".join(rng.choice(words) for _ in range(rng.randrange(1, 400)))
        write(root / f"doc{i}.txt", body)
        write(root / f"copy{i}.txt", body + " tail " + rng.choice(words))
    lines = [json.dumps({"text": " ".join(rng.choice(words) for _ in range(200))}) for _ in range(3)]
    write(root / "m.jsonl", "\n".join(lines) + "\n")
    write(root / "big.txt", " ".join(rng.choice(words) for _ in range(3000)))  # streamed (STREAM_BYTES lowered)


@pytest.mark.parametrize("unit", ["char", "word", "stopword"])
def test_pairs_verified_in_passes_have_the_whole_sets_jaccards(tmp_path, unit):
    with mock.patch.object(streaming, "STREAM_BYTES", 10_000):
        _corpus(tmp_path / "c", random.Random(unit))
        simdoc.find_pairs(tmp_path / "c", tmp_path / "idx", jobs=1, verify=False, unit=unit)
        loaded = open_index(tmp_path / "idx")
        left, right = np.triu_indices(len(loaded.docs()), 1)
        whole = verify.verify_pairs(reader_of(loaded), left, right, jobs=1)
        reader = reader_of(loaded)
        # The largest pairs in about four passes, the smallest in one.
        most = int(np.max(loaded.docs().columns["n_shingles"])) * 12
        with mock.patch.object(similarity, "PAIR_BYTES", most // 2), mock.patch.object(streaming, "PIECE_CHARS", 97):
            steps: list[int] = []
            passes = verify.verify_pairs(reader, left, right, jobs=1, progress=steps.append)
    assert sum(steps) == len(left)  # each pair reported once, those verified in passes too
    assert whole.ok.all() and passes.ok.all()
    assert passes.set_jaccard.tobytes() == whole.set_jaccard.tobytes()
    assert passes.bag_jaccard.tobytes() == whole.bag_jaccard.tobytes()
    assert max(reader.reads.values()) > 2  # some pairs were compared in several passes


def test_a_pair_with_many_repeats_takes_few_passes(tmp_path):
    """Window counts overstate a repetitive document's set: after one pass the rest is read in
    as few passes as the distinct shingles seen allow (not one per planned range)."""
    write(tmp_path / "c" / "a.txt", "the same line again\n" * 3000)
    write(tmp_path / "c" / "b.txt", "the same line again\n" * 2999 + "and an end")
    simdoc.find_pairs(tmp_path / "c", tmp_path / "idx", jobs=1, verify=False)
    loaded = open_index(tmp_path / "idx")
    whole = verify.verify_pairs(reader_of(loaded), [0], [1], jobs=1)
    reader = reader_of(loaded)
    with mock.patch.object(similarity, "PAIR_BYTES", 60 * 60_000 // 20):  # planned: ~20 passes
        passes = verify.verify_pairs(reader, [0], [1], jobs=1)
    assert passes.set_jaccard.tobytes() == whole.set_jaccard.tobytes()
    assert passes.bag_jaccard.tobytes() == whole.bag_jaccard.tobytes()
    assert max(reader.reads.values()) == 2


def _exact_jaccard(a: str, b: str, spec: ShingleSpec) -> float:
    """Set Jaccard of two texts' 64-bit shingle sets, computed here."""
    from simdoc.shingling import shingle_texts

    s = shingle_texts([a, b], spec, form="sets64")
    ra, rb = s.data[s.indptr[0] : s.indptr[1]], s.data[s.indptr[1] : s.indptr[2]]
    common = len(np.intersect1d(ra, rb))
    return common / (len(ra) + len(rb) - common)


@pytest.mark.parametrize("unit", ["char", "word"])
def test_query_compares_long_queries_and_large_candidates_in_passes(tmp_path, unit):
    """`simdoc query` held a candidate's whole set, and shingled a long query whole (issue 28 item 7):
    now both are compared in passes as `pairs` verifies, with the same Jaccards."""
    from simdoc.reports import query as query_mod

    rng = random.Random(unit)
    with mock.patch.object(streaming, "STREAM_BYTES", 10_000):
        _corpus(tmp_path / "c", rng)
        simdoc.find_pairs(tmp_path / "c", tmp_path / "idx", jobs=1, verify=False, unit=unit)
    texts = {p.name: p.read_text() for p in sorted((tmp_path / "c").glob("*.txt"))}
    lines = (tmp_path / "c" / "m.jsonl").read_text().splitlines()
    members = {f"m.jsonl/#{i}": json.loads(line)["text"] for i, line in enumerate(lines, 1)}
    queries = [(f"q{i}", t + " added " + rng.choice(list(texts.values()))[:50]) for i, t in enumerate(texts.values())]
    queries.append(("short", "amber basil"))
    whole, warned, _ = query_mod.query_documents(tmp_path / "idx", queries, all_candidates=True)
    assert not warned and len(whole) >= len(queries) - 1
    spec = reader_of(open_index(tmp_path / "idx")).spec
    for m in whole:  # the Jaccards are those of the texts, computed here
        assert m.jaccard == _exact_jaccard(dict(queries)[m.query], {**texts, **members}[m.doc], spec)
    calls: list[int] = []
    counted = similarity.jaccard_in_passes

    def passes(read, n_a, n_b):
        calls.append(similarity.pair_passes(n_a, n_b))
        return counted(read, n_a, n_b)

    most = int(np.max(open_index(tmp_path / "idx").docs().columns["n_shingles"])) * 12
    with (
        mock.patch.object(similarity, "PAIR_BYTES", most // 2), mock.patch.object(streaming, "PIECE_CHARS", 97),
        mock.patch.object(streaming, "LARGE_CHARS", 1000), mock.patch.object(query_mod, "jaccard_in_passes", passes),
    ):
        small, warned, _ = query_mod.query_documents(tmp_path / "idx", queries, all_candidates=True)
        unverified, _, _ = query_mod.query_documents(tmp_path / "idx", queries, verify=False, all_candidates=True)
    assert not warned
    assert max(calls) > 2 and len(calls) > len(queries)  # long queries, and large pairs in several passes
    # Long queries signed a piece at a time have the signatures of the whole: the same estimates.
    assert {(m.query, m.doc): m.estimated for m in unverified} == {(m.query, m.doc): m.estimated for m in whole}
    assert all(m.jaccard is None for m in unverified)
    assert [(m.query, m.doc, m.estimated, m.jaccard) for m in small] == [(m.query, m.doc, m.estimated, m.jaccard) for m in whole]
    # A candidate changed since it was indexed is named and left out, in passes as whole.
    big = max(texts, key=len)
    (tmp_path / "c" / big).write_text(texts[big].replace("a", "b"))
    with mock.patch.object(similarity, "PAIR_BYTES", 1000), mock.patch.object(streaming, "LARGE_CHARS", 1000):
        changed, warned, _ = query_mod.query_documents(tmp_path / "idx", queries, all_candidates=True)
    assert warned == [f"{big}: changed or gone since it was indexed; not compared (run `simdoc pairs CORPUS` to update the index)"]
    assert {m.doc for m in changed} == {m.doc for m in whole} - {big}


def test_show_compares_long_documents_in_passes_with_the_same_numbers(tmp_path):
    """`simdoc show` compared two whole 64-bit sets (12 bytes a distinct shingle each, and their sort):
    now texts too long to compare whole are compared in passes, with the same numbers."""
    from click.testing import CliRunner

    from simdoc.cli import cli

    rng = random.Random(3)
    words = "the of and amber basil cedar Delta ember fjord grove heron é".split()
    text = " ".join(rng.choice(words) for _ in range(3000))
    corpus = tmp_path / "c"
    write(corpus / "a.txt", text)
    write(corpus / "b.txt", text[:5000] + " an edit " + text[5000:])
    assert CliRunner().invoke(cli, ["pairs", str(corpus), "--index", str(tmp_path / "idx"), "-q"]).exit_code == 0
    runs = [
        ["show", str(corpus), "--index", str(tmp_path / "idx"), "a.txt", "b.txt", "--format", "json"],
        ["show", str(corpus / "a.txt"), str(corpus / "b.txt"), "--format", "json"],  # two files, no index
    ]
    for args in runs:
        whole = CliRunner().invoke(cli, args)
        calls: list[int] = []
        counted = similarity.sums_in_passes

        def passes(read, n_a, n_b):
            calls.append(similarity.pair_passes(n_a, n_b))
            return counted(read, n_a, n_b)

        with (
            mock.patch.object(similarity, "PAIR_BYTES", 40_000), mock.patch.object(streaming, "LARGE_CHARS", 1000),
            mock.patch.object(similarity, "sums_in_passes", passes),
        ):
            split = CliRunner().invoke(cli, args)
        assert whole.exit_code == split.exit_code == 0, (whole.stderr, split.stderr)
        assert calls and calls[0] > 3, calls
        assert json.loads(split.stdout) == json.loads(whole.stdout)
        assert 0.9 < json.loads(whole.stdout)["set_jaccard"] < 1
