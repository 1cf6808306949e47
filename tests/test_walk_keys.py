"""The key a walk sorts a folder's names by, found for all of them at once (simdoc.corpus.names.walk_keys)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from simdoc.corpus.names import walk_key, walk_keys

# Pieces of names, so that the suffixes of files of many documents (any case, compressed) come up often.
PIECE = st.sampled_from(["a", "b", ".", ".jsonl", ".JSONL", ".ndjson", ".warc", ".wet", ".gz", ".zst", ".parquet", ".Parquet", ".txt", "İ", "\u212a"])
NAME = st.lists(PIECE, min_size=1, max_size=4).map("".join)


@settings(max_examples=400, deadline=None)
@given(st.lists(NAME, max_size=6))
def test_the_keys_of_a_folders_names_are_the_key_of_each(names):
    keys = walk_keys(names)
    assert keys == [walk_key(n) for n in names]
    if not any(n.lower().endswith(s) for n in names for s in (".jsonl", ".ndjson", ".warc", ".wet", ".gz", ".zst", ".parquet")):
        assert keys is names  # the list itself: the walk tells a folder already in order by it
