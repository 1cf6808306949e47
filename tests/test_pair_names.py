"""Pairs name their documents from the stored docs table a chunk of pairs at a time (issue 29):
a memory-mapped lookup per name was most of printing 10^5 pairs of records."""

from __future__ import annotations

import json
from unittest import mock

import simdoc
from simdoc.stages import results
from simdoc.store import docnames, doctable


def test_pairs_are_named_a_chunk_at_a_time_in_print_order(tmp_path):
    (tmp_path / "c").mkdir()
    base = "harbour tide table mountain goats climb steep paths at dawn"
    rows = [json.dumps({"text": f"{base} {i % 4}"}) for i in range(40)]
    (tmp_path / "c" / "a.jsonl").write_text("\n".join(rows) + "\n")
    for i in range(3):
        (tmp_path / "c" / f"f{i}.txt").write_text(f"{base} {i % 2}")
    simdoc.find_pairs(tmp_path / "c", tmp_path / "i", threshold=0.5, jobs=1)
    want = [(p.doc_a, p.doc_b, p.estimated, p.jaccard) for p in simdoc.find_pairs(tmp_path / "c", tmp_path / "i", threshold=0.5, jobs=1)]
    assert len(want) > 100
    with mock.patch.object(results, "_NAMES_AT_ONCE", 7), mock.patch.object(
        doctable.Strings, "__getitem__", side_effect=AssertionError("a name looked up alone")
    ), mock.patch.object(docnames.Column, "__getitem__", side_effect=AssertionError("a name (format 5) looked up alone")):
        got = [(p.doc_a, p.doc_b, p.estimated, p.jaccard) for p in simdoc.find_pairs(tmp_path / "c", tmp_path / "i", threshold=0.5, jobs=1)]
    assert got == want
