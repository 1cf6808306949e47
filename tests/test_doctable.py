"""store.doctable: the docs table's columns, and its ids read lazily (as a scoring worker does)."""

from __future__ import annotations

import json

import pytest
from test_pipeline import make_corpus

from simdoc.stages.pairs import find_pairs
from simdoc.store.docnames import Column
from simdoc.store.doctable import Strings, _blob
from simdoc.store.loaded import open_index


def test_strings_are_the_list_they_encode():
    words = ["a", "", "doc\udcff.txt", "dir/ünï.txt", "x" * 300]
    blob, offsets = _blob(words)
    lazy = Strings(blob, offsets)
    assert len(lazy) == len(words) and list(lazy) == words
    assert [lazy[i] for i in range(-len(words), len(words))] == words + words
    assert lazy[1:4] == words[1:4] and lazy[::-2] == words[::-2]
    assert lazy.index("dir/ünï.txt") == 3 and "a" in lazy
    for bad in (len(words), -len(words) - 1):
        with pytest.raises(IndexError):
            lazy[bad]


def test_a_lazy_table_has_the_rows_of_the_loaded_one(tmp_path):
    make_corpus(tmp_path / "c", seed=91, n_base=6)
    lines = [json.dumps({"id": f"k{i}", "text": f"member {i} of a json lines file " * 5}) for i in range(4)]
    (tmp_path / "c" / "m.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    find_pairs(tmp_path / "c", tmp_path / "idx", jobs=1)
    eager, lazy = open_index(tmp_path / "idx").docs(), open_index(tmp_path / "idx", lazy_ids=True).docs()
    # Both decode a row when it is asked for (10^7 ids as a list of strings were ~1.4 GB); the eager
    # table's rows were checked as paths when it was opened.
    assert isinstance(lazy.ids, Column) and isinstance(eager.ids, Column)
    assert list(lazy.ids) == list(eager.ids) and list(lazy.sources) == list(eager.sources)
    assert any(eager.sources)  # members of the JSON Lines file have a source
    assert all(lazy.row(i) == eager.row(i) for i in range(len(eager)))
