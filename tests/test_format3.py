"""Index format 3: no shingles in the index; candidates verified against the documents themselves."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import warc_record
from hypothesis import given, settings
from hypothesis import strategies as st

import simdoc
import simdoc.corpus.formats
import simdoc.corpus.read
import simdoc.corpus.warc
import simdoc.stages.pairs
import simdoc.stages.results
import simdoc.stages.shingle
import simdoc.stages.verify
import simdoc.store.loaded
import simdoc.store.verified
from simdoc.cli import cli
from simdoc.shingling import ShingleSpec, normalise, shingle_texts
from simdoc.stages.reread import reader_of
from simdoc.store.directory import IndexStore
from simdoc.store.loaded import open_index

BASE = (
    "the harbour festival opened on a grey morning with drums and a long parade of boats "
    "decked in flags while the mayor spoke about the tides and the fishing season ahead"
)


def char_shingles(text: str, k: int = 5) -> set[str]:
    t = normalise(text)
    return {t[i : i + k] for i in range(len(t) - k + 1)} if len(t) >= k else ({t} if t else set())


def exact(a: str, b: str) -> float:
    sa, sb = char_shingles(a), char_shingles(b)
    return len(sa & sb) / len(sa | sb)


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def age(root: Path, seconds: int = 3600) -> None:
    """Backdate every file, so that a scan trusts size and time (nothing is racily clean)."""
    for p in root.rglob("*"):
        if p.is_file():
            st_ = p.stat()
            os.utime(p, ns=(st_.st_atime_ns, st_.st_mtime_ns - seconds * 10**9))


def test_the_index_keeps_no_shingles(tmp_path):
    write(tmp_path / "c" / "a.txt", BASE)
    write(tmp_path / "c" / "b.txt", BASE + " and more")
    simdoc.find_pairs(tmp_path / "c", tmp_path / "idx", jobs=1)
    names = [p.name for p in (tmp_path / "idx").iterdir()]
    assert not any(n.startswith("shingles.") for n in names)
    assert any(n.startswith("docs.digest.") for n in names) and any(n.startswith("verified.keys.") for n in names)
    # `simdoc shingle` on its own still keeps the textbook's intermediate.
    simdoc.stages.shingle.build_shingles(tmp_path / "c", tmp_path / "staged")
    assert open_index(tmp_path / "staged").has_shingle_sets()


def test_a_32_bit_collision_prints_the_exact_jaccard(tmp_path):
    # "inegl" and "gfhgn" share a 32-bit MurmurHash3 (pinned below); the 64-bit
    # verification hashes tell them apart.
    spec = ShingleSpec("char", 5)
    assert np.array_equal(shingle_texts(["inegl"], spec).data, shingle_texts(["gfhgn"], spec).data)
    a, b = BASE + " inegl", BASE + " gfhgn"
    write(tmp_path / "c" / "a.txt", a)
    write(tmp_path / "c" / "b.txt", b)
    res = simdoc.find_pairs(tmp_path / "c", tmp_path / "idx", threshold=0.5, all_candidates=True, jobs=1)
    got = {(p.doc_a, p.doc_b): p.jaccard for p in res}
    want = exact(a, b)
    sets32 = shingle_texts([a, b], spec)
    with32 = simdoc.jaccard(sets32.row(0), sets32.row(1))
    assert round(with32, 4) != round(want, 4)  # the 32-bit sets would print another value
    assert round(got[("a.txt", "b.txt")], 4) == round(want, 4)


def test_a_document_edited_between_indexing_and_verification_is_indexed_again(tmp_path, monkeypatch):
    corpus = tmp_path / "c"
    write(corpus / "a.txt", BASE)
    write(corpus / "b.txt", BASE.replace("grey", "gray"))
    write(corpus / "c.txt", "a wholly unrelated note about the price of bread in winter")
    age(corpus)
    real = simdoc.stages.pairs._refresh_for_pairs
    edits = []

    def refresh_then_edit(*args, **kwargs):
        out = real(*args, **kwargs)
        if not edits:
            # Same size, same time: nothing a scan could see. Only the digest tells.
            target = corpus / "b.txt"
            st_ = target.stat()
            target.write_text(BASE.replace("grey", "GREY").replace("drums", "DRUMS"), encoding="utf-8")
            os.utime(target, ns=(st_.st_atime_ns, st_.st_mtime_ns))
            edits.append(target)
        return out

    monkeypatch.setattr(simdoc.stages.pairs, "_refresh_for_pairs", refresh_then_edit)
    res = simdoc.find_pairs(corpus, tmp_path / "idx", threshold=0.5, jobs=1)
    monkeypatch.setattr(simdoc.stages.pairs, "_refresh_for_pairs", real)
    assert edits
    fresh = simdoc.find_pairs(corpus, tmp_path / "fresh", threshold=0.5, jobs=1)
    assert list(res) == list(fresh)
    # Lowercased, the edit changes nothing: the pair is exact copies' text, verified to 1.
    assert [(p.doc_a, p.doc_b, p.jaccard) for p in res] == [("a.txt", "b.txt", 1.0)]
    assert not any("changed since it was indexed" in w for s in res.stages for w in s.warnings)


def test_a_changed_document_is_left_out_by_a_reader_with_a_warning(tmp_path, monkeypatch):
    corpus = tmp_path / "c"
    write(corpus / "a.txt", BASE)
    write(corpus / "b.txt", BASE.replace("grey", "gray"))
    write(corpus / "c.txt", BASE.replace("boats", "ships"))
    simdoc.find_pairs(corpus, tmp_path / "idx", threshold=0.5, jobs=1)
    write(corpus / "b.txt", "now something else entirely, nothing like the festival at all")
    (corpus / "c.txt").unlink()
    # Pairs in the verified-pairs table describe the texts indexed; the others are read again.
    monkeypatch.setattr(simdoc.store.loaded.LoadedIndex, "verified_pairs", lambda self: simdoc.store.verified.VerifiedPairs())
    r = CliRunner().invoke(cli, ["pairs", "--index", str(tmp_path / "idx"), "-t", "0.5", "--all-candidates"])
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""  # every pair has b.txt or c.txt in it: none is verified against stale text
    assert "b.txt: changed since it was indexed" in r.stderr
    assert "c.txt: could not be read again" in r.stderr


def _jsonl_corpus(root: Path, n: int = 12) -> None:
    rows = [{"id": f"r{i}", "text": BASE + f" and note number {i}"} for i in range(n)]
    rows.append({"id": "other", "text": "a wholly unrelated note about the price of bread in winter"})
    write(root / "data.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n")


def test_a_jsonl_file_with_many_candidates_is_not_parsed_again(tmp_path, monkeypatch):
    _jsonl_corpus(tmp_path / "c")
    simdoc.find_pairs(tmp_path / "c", tmp_path / "idx", threshold=0.7, jobs=1, id_field="id")
    reads: list[str] = []
    real = simdoc.corpus.read.read_jsonl

    def counting(path, *a, **kw):
        reads.append(Path(path).name)
        return real(path, *a, **kw)

    monkeypatch.setattr(simdoc.corpus.read, "read_jsonl", counting)
    monkeypatch.setattr(simdoc.store.loaded.LoadedIndex, "verified_pairs", lambda self: simdoc.store.verified.VerifiedPairs())
    res = simdoc.find_pairs(None, tmp_path / "idx", threshold=0.7)
    assert len(res) == 12 * 11 // 2
    assert reads == []  # not parsed at all: each member is read at its offset (issue 29)


def test_a_warc_record_is_read_at_its_offset(tmp_path, monkeypatch):
    records = [warc_record(f"http://example.org/{i}", BASE + f" page {i}", i + 1) for i in range(6)]
    records.append(warc_record("http://example.org/x", "a wholly unrelated note about bread", 99))
    write(tmp_path / "c" / "keep.txt", "not part of the crawl at all, just a note")
    (tmp_path / "c" / "crawl.warc.gz").write_bytes(b"".join(gzip.compress(r) for r in records))
    first = simdoc.find_pairs(tmp_path / "c", tmp_path / "idx", threshold=0.7, jobs=1)
    assert len(first) == 15
    whole, at = [], []
    real_split, real_at = simdoc.corpus.read.read_warc, simdoc.corpus.warc.warcio.open_at
    monkeypatch.setattr(simdoc.corpus.read, "read_warc", lambda *a: whole.append(a) or real_split(*a))
    monkeypatch.setattr(simdoc.corpus.warc.warcio, "open_at", lambda p, o: at.append(o) or real_at(p, o))
    monkeypatch.setattr(simdoc.store.loaded.LoadedIndex, "verified_pairs", lambda self: simdoc.store.verified.VerifiedPairs())
    again = simdoc.find_pairs(None, tmp_path / "idx", threshold=0.7)
    assert list(again) == list(first)
    assert whole == [] and len(at) == len(set(at)) == 6  # each candidate record once, by its offset
    table = open_index(tmp_path / "idx").docs()
    assert sorted(at) == sorted(int(o) for o, s in zip(table.offset, table.sources) if s)[:6]


def test_each_candidate_document_is_read_once_and_memory_budget_changes_nothing(tmp_path, monkeypatch):
    corpus = tmp_path / "c"
    for g in range(4):
        for i in range(5):
            write(corpus / f"g{g}" / f"d{i}.txt", BASE.replace("festival", f"festival {g}") + f" copy {i}")
    simdoc.find_pairs(corpus, tmp_path / "idx", threshold=0.6, jobs=1)
    readers = []
    real_reader = simdoc.stages.results.reader_of

    def keep(loaded):
        r = real_reader(loaded)
        readers.append(r)
        return r

    monkeypatch.setattr(simdoc.stages.results, "reader_of", keep)
    monkeypatch.setattr(simdoc.store.loaded.LoadedIndex, "verified_pairs", lambda self: simdoc.store.verified.VerifiedPairs())
    ample = simdoc.find_pairs(None, tmp_path / "idx", threshold=0.6)
    assert readers[-1].reads and set(readers[-1].reads.values()) == {1}
    monkeypatch.setattr(simdoc.stages.verify, "CACHE_BYTES", 1)  # hold one set at a time: documents are read again
    monkeypatch.setattr(simdoc.stages.verify, "CHUNK_PAIRS", 1)
    tight = simdoc.find_pairs(None, tmp_path / "idx", threshold=0.6)
    assert list(tight) == list(ample) and len(ample) > 0
    assert max(readers[-1].reads.values()) > 1


def test_verified_pairs_are_not_verified_again_until_a_document_changes(tmp_path):
    corpus = tmp_path / "c"
    for i in range(4):
        write(corpus / f"d{i}.txt", BASE + f" copy {i}")
    age(corpus)
    first = simdoc.find_pairs(corpus, tmp_path / "idx", threshold=0.6, jobs=1)
    assert "6 pairs verified from the documents" in first.stages[-1].detail
    again = simdoc.find_pairs(corpus, tmp_path / "idx", threshold=0.6, jobs=1)
    assert "0 pairs verified from the documents, 6 from the verified-pairs table" in again.stages[-1].detail
    assert list(again) == list(first)
    write(corpus / "d0.txt", BASE + " copy zero, edited")
    edited = simdoc.find_pairs(corpus, tmp_path / "idx", threshold=0.6, jobs=1)
    assert "3 pairs verified from the documents, 3 from the verified-pairs table" in edited.stages[-1].detail
    assert list(edited) == list(simdoc.find_pairs(corpus, tmp_path / "fresh", threshold=0.6, jobs=1))


def test_a_format_2_index_asks_for_a_rebuild(tmp_path):
    write(tmp_path / "c" / "a.txt", BASE)
    idx = tmp_path / "idx"
    simdoc.find_pairs(tmp_path / "c", idx, jobs=1)
    store = IndexStore(idx)
    manifest = store.read_manifest()
    manifest["format_version"] = 2
    from simdoc.store.manifest import dump

    (idx / "manifest.json").write_bytes(dump(manifest))
    r = CliRunner().invoke(cli, ["pairs", str(tmp_path / "c"), "--index", str(idx)])
    assert r.exit_code == 4 and "format version 2" in r.stderr and "--rebuild" in r.stderr


def test_ids_that_leave_the_corpus_are_never_opened(tmp_path):
    from simdoc.errors import CorruptIndex
    from simdoc.stages.reread import safe_relative

    for bad in ("../secret.txt", "/etc/passwd", "a/../../b", "a//b", "", "x\0y", "./a"):
        with pytest.raises(CorruptIndex):
            safe_relative(bad, "idx")
    assert safe_relative("a/b.txt", "idx") == "a/b.txt"


@settings(max_examples=25, deadline=None)
@given(st.lists(st.text(alphabet="abcde ", min_size=0, max_size=40), min_size=1, max_size=6), st.sampled_from(["char", "word"]))
def test_64_bit_sets_count_what_the_32_bit_sets_count(texts, unit):
    spec = ShingleSpec(unit, 2)
    narrow = shingle_texts(texts, spec)
    wide = shingle_texts(texts, spec, form="sets64")
    stream = shingle_texts(texts, spec, form="stream")
    for i in range(len(texts)):
        # Without a 32-bit collision (none among so few shingles) both have the same sizes and bags.
        assert len(wide.row(i)) == len(narrow.row(i))
        assert sorted(wide.row_counts(i).tolist()) == sorted(narrow.row_counts(i).tolist())
        assert len(stream.row(i)) == int(narrow.row_counts(i).sum())


def _random_word_corpus(corpus: Path, n: int, words_per_doc: int) -> None:
    import random

    rng = random.Random(3)
    words = "amber basil cedar delta ember fjord grove heron iris jade kelp lotus".split()
    for i in range(n):
        body = " ".join(rng.choice(words) for _ in range(words_per_doc))
        write(corpus / f"doc{i:03d}.txt", body)
        write(corpus / f"copy{i:03d}.txt", body + " tail")


def test_threads_shingling_at_once_do_not_share_scratch_space(tmp_path):
    """Documents shingled on several threads at once (a Dask worker's threads) give the same sets.

    (Each thread has its own scratch buffers: a shared one let one thread's tokens
    overwrite another's, and a pair was silently lost.)"""
    from concurrent.futures import ThreadPoolExecutor

    _random_word_corpus(tmp_path / "c", 100, 3000)
    simdoc.find_pairs(tmp_path / "c", tmp_path / "idx", jobs=1, verify=False)
    reader = reader_of(open_index(tmp_path / "idx"))
    groups = [list(range(i, i + 20)) for i in range(0, 200, 20)]
    one = [reader.read_sets(g) for g in groups]
    for _ in range(3):
        with ThreadPoolExecutor(4) as pool:
            many = list(pool.map(reader.read_sets, groups))
        for a, b in zip(one, many):
            assert all(np.array_equal(a[d].data, b[d].data) and np.array_equal(a[d].counts, b[d].counts) for d in a)


def test_verification_does_not_depend_on_jobs_or_memory_budget(tmp_path):
    _random_word_corpus(tmp_path / "c", 40, 300)
    simdoc.find_pairs(tmp_path / "c", tmp_path / "idx", jobs=1, verify=False)
    loaded = open_index(tmp_path / "idx")
    left, right = np.triu_indices(len(loaded.docs()), 1)
    one = simdoc.stages.verify.verify_pairs(reader_of(loaded), left, right, jobs=1)
    for jobs, budget in ((2, None), (3, 5000), (1, 1)):
        other = simdoc.stages.verify.verify_pairs(reader_of(loaded), left, right, jobs=jobs, budget=budget)
        assert np.array_equal(other.set_jaccard, one.set_jaccard)
        assert np.array_equal(other.bag_jaccard, one.bag_jaccard)
        assert other.ok.all()
