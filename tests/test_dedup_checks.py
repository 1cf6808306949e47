"""dedup's checks made in one pass give what the per-document checks give: the files it may name
(DocumentReader.same_bytes_docs) and the records of its clusters' documents (doc_records(rows))."""

from __future__ import annotations

import os

import numpy as np

import simdoc
from simdoc.stages.reread import reader_of
from simdoc.store.loaded import open_index

TEXT = "the quick brown fox jumps over the lazy dog while the cat sleeps on the warm mat {}\n"


def _corpus(tmp_path):
    corpus = tmp_path / "c"
    (corpus / "sub").mkdir(parents=True)
    for i in range(8):
        (corpus / ("sub" if i % 2 else ".") / f"d{i}.txt").write_text(TEXT.format(i % 3) * 4)
    (corpus / "m.jsonl").write_text("".join('{"text": "%s"}\n' % TEXT.format(i).strip() for i in range(3)))
    return corpus


def test_same_bytes_in_one_pass_equals_the_check_of_each_document(tmp_path):
    corpus = _corpus(tmp_path)
    index = tmp_path / "idx"
    simdoc.find_pairs(str(corpus), index=str(index), threshold=0.5)
    st = os.stat(corpus / "d0.txt")
    (corpus / "d0.txt").write_text(TEXT.format(9) * 4)  # same size, other bytes, times put back
    os.utime(corpus / "d0.txt", ns=(st.st_atime_ns, st.st_mtime_ns))
    (corpus / "d2.txt").unlink()
    os.utime(corpus / "sub" / "d1.txt")  # touched: its stat moved, its bytes did not
    loaded = open_index(str(index))
    docs = np.arange(len(loaded.doc_ids()), dtype=np.int64)
    together = reader_of(loaded).same_bytes_docs(docs).tolist()
    one_by_one = [reader_of(loaded).same_bytes(int(d)) for d in docs]
    assert together == one_by_one
    named = dict(zip(loaded.doc_ids(), together))
    assert not named["d0.txt"] and not named["d2.txt"] and not named["sub/d1.txt"]
    assert named["d4.txt"] and named["sub/d3.txt"] and sum(together) == len(docs) - 3


def test_records_of_some_documents_are_those_of_all_in_their_order(tmp_path):
    corpus = _corpus(tmp_path)
    index = tmp_path / "idx"
    simdoc.find_pairs(str(corpus), index=str(index), threshold=0.5)
    loaded = open_index(str(index))
    every = loaded.doc_records()
    assert len(every) == len(loaded.doc_ids()) and any("source" in r for r in every)
    rows = np.array([len(every) - 1, 0, 3], dtype=np.int64)
    assert loaded.doc_records(rows) == [every[r] for r in rows.tolist()]
    assert [r["id"] for r in every] == loaded.doc_ids()


def test_a_member_left_out_for_its_file_is_said_to_be_left_out_for_its_file(run, tmp_path):
    # A member is checked by its file's bytes: one unchanged line of a file edited elsewhere was
    # "changed or gone since it was indexed", which sent the reader looking at the wrong text.
    corpus, idx = tmp_path / "c", tmp_path / "idx"
    corpus.mkdir()
    lines = ['{"text": "%s"}' % TEXT.format(0).strip(), '{"text": "%s"}' % TEXT.format(0).strip(), '{"text": "another text"}']
    (corpus / "m.jsonl").write_text("\n".join(lines) + "\n")
    assert run("pairs", corpus, "--index", idx, "-t", "0.5").exit_code == 0
    lines[2] = '{"text": "another tekst"}'  # a line of no cluster edited
    (corpus / "m.jsonl").write_text("\n".join(lines) + "\n")
    r = run("dedup", "--index", idx, "-t", "0.5")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""
    assert ("m.jsonl/#1: its file m.jsonl changed or is gone since it was indexed, and it is the one to keep: "
            "its cluster is left out") in r.stderr
