"""Exact copies are folded onto one representative: no n^2 buckets, every pair still printed."""


import numpy as np
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import simdoc
from simdoc.cli import cli
from simdoc.exact import groups_of, representatives
from simdoc.store.loaded import open_index


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.booleans()), min_size=1, max_size=14))
def test_representatives_group_equal_identities(docs):
    """rep[i] is the first non-empty document with i's identity; empty documents stand alone."""
    ident = np.zeros((len(docs), 16), np.uint8)
    for i, (key, _) in enumerate(docs):
        ident[i, 5] = key  # equal keys, equal identities
    nonempty = np.array([ne for _, ne in docs], dtype=bool)
    rep = representatives(ident, nonempty)
    for i, (key, ne) in enumerate(docs):
        want = min((j for j, (k, n) in enumerate(docs) if n and k == key), default=i) if ne else i
        assert rep[i] == want


def _rep_reference(identities, nonempty):
    """representatives as a plain 3-key lexsort: the definition the quicker code must match."""
    rep = np.arange(len(identities), dtype=np.int64)
    docs = np.flatnonzero(nonempty)
    if len(docs) < 2:
        return rep
    keys = [bytes(identities[d]) for d in docs]
    first: dict[bytes, int] = {}
    for d, k in zip(docs.tolist(), keys):
        rep[d] = first.setdefault(k, d)
    return rep


@settings(max_examples=120, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.booleans()), min_size=1, max_size=40),
    st.randoms(use_true_random=False),
)
def test_representatives_and_groups_match_their_definition(docs, rnd):
    """Identities that share their first 8 bytes and differ in the last 8 (the quick sort's ties),
    or the reverse, fold exactly as the definition says; groups_of lists each group once, sorted,
    in the order of their first members, and nothing else."""
    ident = np.zeros((len(docs), 16), np.uint8)
    at_high, at_low = rnd.randrange(8), 8 + rnd.randrange(8)  # where in each half the values differ
    for i, (high, low, _) in enumerate(docs):
        ident[i, at_high], ident[i, at_low] = high, low
    ident[:, 0] |= np.uint8(0x80) if rnd.random() < 0.5 else np.uint8(0)  # high halves past 2^63 too
    nonempty = np.array([ne for _, _, ne in docs], dtype=bool)
    rep = representatives(ident, nonempty)
    assert rep.tolist() == _rep_reference(ident, nonempty).tolist()
    want: dict[int, list[int]] = {}
    for i, r in enumerate(rep.tolist()):
        want.setdefault(r, []).append(i)
    groups = [g.tolist() for g in groups_of(rep)]
    assert groups == [members for head, members in sorted(want.items()) if len(members) > 1]


def test_many_identical_files_fold_into_one_bucket_entry(tmp_path):
    corpus = tmp_path / "c"
    corpus.mkdir()
    n = 300
    for i in range(n):
        (corpus / f"copy{i:03d}.txt").write_text("the very same tiny page", encoding="utf-8")
    (corpus / "other.txt").write_text("something else entirely, about boats", encoding="utf-8")
    (corpus / "near.txt").write_text("the very same tiny page!", encoding="utf-8")
    idx = tmp_path / "idx"
    res = simdoc.find_pairs(corpus, idx, threshold=0.6, jobs=1)
    # The buckets hold one representative for the 300 copies, not 300 documents.
    keys, buckets = open_index(idx).bands()
    assert buckets.shape[1] == 3
    # Pairs inside the group are not materialised, but all are printed, in order.
    assert len(res.left) == n  # each copy with near.txt
    expected_pairs = n * (n - 1) // 2 + n
    assert len(res) == expected_pairs
    out = list(res)
    assert len(out) == expected_pairs
    keys_printed = [(-round(p.jaccard, 4), p.doc_a, p.doc_b) for p in out]
    assert keys_printed == sorted(keys_printed)
    assert out[0].doc_a == "copy000.txt" and out[0].doc_b == "copy001.txt" and out[0].jaccard == 1.0
    r = CliRunner().invoke(cli, ["pairs", "--index", str(idx), "--threshold", "0.6"])
    assert r.exit_code == 0
    assert len(r.stdout.splitlines()) == expected_pairs
    assert f"{expected_pairs} candidates" in r.stderr


def test_copies_with_other_counts_are_not_folded_and_bag_values_are_right(tmp_path):
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "a.txt").write_text("abcdef abcdef", encoding="utf-8")
    (corpus / "b.txt").write_text("abcdef abcdef", encoding="utf-8")
    (corpus / "c.txt").write_text("abcdef abcdef abcdef", encoding="utf-8")
    res = simdoc.find_pairs(corpus, tmp_path / "idx", measure="bag", threshold=0.3, jobs=1)
    got = {(p.doc_a, p.doc_b): round(p.jaccard, 4) for p in res}
    assert got[("a.txt", "b.txt")] == 0.5  # identical bags
    sets = simdoc.shingle_texts(["abcdef abcdef", "abcdef abcdef abcdef"])
    from simdoc.similarity import pair_jaccard

    want = round(float(pair_jaccard(sets, np.array([0]), np.array([1]), "bag")[0]), 4)
    assert got[("a.txt", "c.txt")] == got[("b.txt", "c.txt")] == want < 0.5


def test_new_counts_group_pairs_with_a_changed_member(tmp_path):
    import os

    corpus = tmp_path / "c"
    corpus.mkdir()
    for i in range(5):
        (corpus / f"copy{i}.txt").write_text("the very same tiny page", encoding="utf-8")
        old = 10**9 + i  # long ago, so the next scan trusts size and mtime
        os.utime(corpus / f"copy{i}.txt", (old, old))
    idx = tmp_path / "idx"
    first = simdoc.find_pairs(corpus, idx, jobs=1, new_only=True)
    assert len(first) == 10  # the first report: every pair is new to it
    simdoc.stages.pairs.mark_reported(idx, first.generation)  # what the CLI does once it is printed
    (corpus / "copy5.txt").write_text("the very same tiny page", encoding="utf-8")
    res = simdoc.find_pairs(corpus, idx, jobs=1, new_only=True)
    # 6 copies, 1 new: the pairs with the new one, and none of the 10 old pairs.
    assert len(res) == res.n_group_pairs() == 5
    assert [(p.doc_a, p.doc_b, p.new) for p in res] == [(f"copy{i}.txt", "copy5.txt", "b") for i in range(5)]


def test_check_accepts_an_index_with_folded_copies(tmp_path):
    corpus = tmp_path / "c"
    corpus.mkdir()
    for i in range(4):
        (corpus / f"copy{i}.txt").write_text("the very same tiny page", encoding="utf-8")
    (corpus / "other.txt").write_text("a different page entirely", encoding="utf-8")
    idx = tmp_path / "idx"
    runner = CliRunner()
    assert runner.invoke(cli, ["pairs", str(corpus), "--index", str(idx)]).exit_code == 0
    chk = runner.invoke(cli, ["check", "--index", str(idx)])
    assert chk.exit_code == 0, chk.stdout


def test_check_reports_groups_that_fold_different_texts(tmp_path):
    import json

    from simdoc.store.npyfiles import crc32_file, data_offset

    corpus = tmp_path / "c"
    corpus.mkdir()
    for i in range(3):
        (corpus / f"copy{i}.txt").write_text("the very same tiny page", encoding="utf-8")
    (corpus / "other.txt").write_text("a different page entirely", encoding="utf-8")
    idx = tmp_path / "idx"
    runner = CliRunner()
    assert runner.invoke(cli, ["pairs", str(corpus), "--index", str(idx)]).exit_code == 0
    # Fold other.txt (document 3) onto copy0.txt: a valid grouping in form, wrong in meaning.
    # The file's size and checksum are kept consistent, so only the meaning is wrong.
    manifest = json.loads((idx / "manifest.json").read_text())
    ix = manifest["stages"]["index"]
    name = ix["roles"]["groups"]
    rep = np.load(idx / name)
    assert rep.tolist() == [0, 0, 0, 3]
    rep[3] = 0
    np.save(idx / name, rep)
    path = idx / name
    ix["files"][name].update(bytes=path.stat().st_size, crc32=crc32_file(path, data_offset(path)))
    from simdoc.store.manifest import dump

    (idx / "manifest.json").write_bytes(dump(manifest))  # with its own checksum: only the meaning is wrong
    chk = runner.invoke(cli, ["check", "--index", str(idx)])
    assert chk.exit_code == 4
    assert "do not group the documents whose texts are identical" in chk.stdout


def test_text_identity_says_how_a_file_was_read(tmp_path):
    corpus = tmp_path / "c"
    corpus.mkdir()
    page = "<p>alpha beta gamma delta epsilon zeta eta theta</p>"
    for name in ("a.txt", "b.txt", "c.html"):
        (corpus / name).write_text(page, encoding="utf-8")
    (corpus / "d.jsonl").write_text('{"text": "%s"}\n' % page, encoding="utf-8")
    (corpus / "e.txt").write_text(page + " iota", encoding="utf-8")
    idx = tmp_path / "idx"
    simdoc.find_pairs(corpus, idx, threshold=0.5, jobs=1)
    loaded = open_index(idx)
    ids = loaded.doc_ids()
    who = {doc_id: bytes(k) for doc_id, k in zip(ids, loaded.docs().identities())}
    assert len(ids) == 5
    assert who["a.txt"] == who["b.txt"]
    member = next(i for i in ids if i.startswith("d.jsonl"))
    # The same bytes read as HTML, or as a JSON Lines member's text, are other texts.
    assert len({who["a.txt"], who["c.html"], who[member], who["e.txt"]}) == 4
    rep = loaded.representatives()
    # Only byte-identical files read the same way are folded; the member's text is the
    # files' text, so it is a candidate in every band and verifies to 1.
    assert [[ids[d] for d in g] for g in groups_of(rep)] == [["a.txt", "b.txt"]]
    pairs = {(p.doc_a, p.doc_b): p.jaccard for p in simdoc.find_pairs(None, idx, threshold=0.5)}
    assert pairs[("a.txt", member)] == pairs[("b.txt", member)] == 1.0


def test_text_identity_tells_a_streamed_file_from_one_read_whole(tmp_path, monkeypatch):
    from simdoc.corpus import streaming

    # The same first bytes (--max-bytes), one file streamed for its size and one read whole:
    # documented to agree except at chunk boundaries, so they are compared, not assumed equal.
    monkeypatch.setattr(streaming, "STREAM_BYTES", 100)
    corpus = tmp_path / "c"
    corpus.mkdir()
    page = "alpha beta gamma delta epsilon zeta eta theta " * 2
    (corpus / "big.txt").write_text(page + "iota kappa lambda " * 10, encoding="utf-8")
    (corpus / "small.txt").write_text(page, encoding="utf-8")
    (corpus / "small2.txt").write_text(page, encoding="utf-8")
    idx = tmp_path / "idx"
    simdoc.find_pairs(corpus, idx, threshold=0.5, jobs=1, max_bytes=len(page))
    loaded = open_index(idx)
    ids = loaded.doc_ids()
    records = {r["id"]: r for r in loaded.doc_records()}
    assert records["big.txt"]["digest"] == records["small.txt"]["digest"]  # the same bytes indexed
    who = {doc_id: bytes(k) for doc_id, k in zip(ids, loaded.docs().identities())}
    assert who["small.txt"] == who["small2.txt"] != who["big.txt"]
    assert [[ids[d] for d in g] for g in groups_of(loaded.representatives())] == [["small.txt", "small2.txt"]]
