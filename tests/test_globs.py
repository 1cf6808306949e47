"""--include/--exclude: the glob rules, and which skipped directories they may hold (issue 27, item 5)."""

from __future__ import annotations

import fnmatch

from hypothesis import given, settings
from hypothesis import strategies as st

from simdoc.corpus.globs import _after, _tokens, may_hold, selected, selected_all

# Small alphabets, so that globs and paths meet often; brackets and "/" included.
GLOB = st.text(alphabet="ab/*?[]!-", max_size=8)
PATH = st.text(alphabet="ab/", max_size=8)


@settings(max_examples=400, deadline=None)
@given(GLOB, PATH)
def test_the_glob_reader_matches_as_fnmatch_does(glob, path):
    assert (len(_tokens(glob)) in _after(glob, path)) == fnmatch.fnmatchcase(path, glob)


@settings(max_examples=400, deadline=None)
@given(st.lists(GLOB, max_size=3), st.lists(GLOB, max_size=3), st.lists(st.text(alphabet="ab/.\n", max_size=8), max_size=6))
def test_the_ids_of_a_run_are_selected_as_one_at_a_time(include, exclude, ids):
    """The walk selects a run's ids at once (selected_all): as selected says of each."""
    include, exclude = tuple(include), tuple(exclude)
    assert selected_all(ids, include, exclude) == [selected(i, include, exclude) for i in ids]


@settings(max_examples=400, deadline=None)
@given(st.lists(GLOB, max_size=2), st.lists(GLOB, max_size=2), st.text(alphabet="ab", min_size=1, max_size=3), PATH)
def test_a_directory_with_a_selected_path_under_it_may_hold_one(include, exclude, folder, rest):
    """may_hold is never wrong when it says no: that would hide a skipped folder of included files."""
    include, exclude = tuple(include), tuple(exclude)
    if selected(f"{folder}/{rest}", include, exclude):
        assert may_hold(folder, include, exclude)


def test_may_hold_examples():
    assert may_hold("src", ("*.txt",)) and may_hold("docs", ("docs/*",))
    assert not may_hold("src", ("docs/*",)) and not may_hold("src", (), ("src/*",))
    assert may_hold("src", (), ("src/*.o",)) and may_hold(".", ("docs/*",))
    assert not may_hold("src/deep", ("docs/*", "[!s]*"))
