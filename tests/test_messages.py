"""Help texts and messages that must say what the commands do (issue 27, item 11)."""

from __future__ import annotations

import pytest


def test_query_help_names_members_as_ids_are_written(run):
    out = run("query", "--help").output
    assert "FILE/#LINE" in out and "FILE/#ID" in out and "FILE/#URI" in out
    assert "FILE#" not in out


@pytest.mark.parametrize("command", [["tune"], ["check"], ["cache", "list"], ["cache", "clean"], ["query"], ["stats"]])
def test_quiet_and_verbose_help_fit_commands_without_stages(run, command):
    """These commands read no corpus and build no stage: no skipped files, no stage timings."""
    out = run(*command, "--help").output
    flags = out[out.index("-q, --quiet") : out.index("-h, --help")]
    assert "skipped" not in flags
    assert "timing" not in flags


def test_stage_commands_keep_their_quiet_and_verbose_help(run):
    out = run("pairs", "--help").output
    flags = out[out.index("-q, --quiet") : out.index("-h, --help")]
    assert "skipped" in flags and "timings" in flags


def test_help_and_dir_of_the_package_list_the_whole_public_api():
    """help(simdoc) and dir(simdoc) name every public function, the lazily loaded ones too."""
    import pydoc

    import simdoc

    text = pydoc.render_doc(simdoc, renderer=pydoc.plaintext)
    for name in simdoc.__all__:
        assert name in dir(simdoc), name
        assert name.startswith("__") or name in text, name  # __version__ is shown as VERSION
    assert "find_pairs(corpus" in text  # documented with its signature, not only named
    with pytest.raises(AttributeError):
        simdoc.no_such_name
