"""`simdoc dedup` without -0: a name with a line break is left out of the list, never silently.

One path a line cannot carry a name with a line break (`xargs` would split
it into two names). Such a document is left out; the summary counts only
what was listed, and one line on stderr says how many were left out and
that -0 lists them, even with -q.
"""

from __future__ import annotations

from conftest import write

TEXT = "The harbour lantern festival returns to Port Ellery on the first Saturday of August, at nine."


def _corpus(tmp_path):
    corpus = tmp_path / "c"
    write(corpus / "a.txt", TEXT)
    write(corpus / "b\nc.txt", TEXT)
    write(corpus / "b.txt", TEXT)
    return corpus


def test_the_summary_counts_only_what_was_listed(run, tmp_path):
    corpus = _corpus(tmp_path)
    r = run("dedup", corpus, "--index", tmp_path / "idx")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "b.txt\n"
    assert f"keep 1, drop 1 document ({len(TEXT)} bytes)" in r.stderr
    assert "simdoc: 1 document that can go is not listed, as its name has a line break: -0 lists it" in r.stderr


def test_with_quiet_the_left_out_are_still_said(run, tmp_path):
    corpus = _corpus(tmp_path)
    r = run("dedup", corpus, "--index", tmp_path / "idx", "-q")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "b.txt\n"
    assert r.stderr == "simdoc: 1 document that can go is not listed, as its name has a line break: -0 lists it\n"


def test_a_cluster_whose_drops_are_all_left_out_is_not_counted(run, tmp_path):
    corpus = tmp_path / "c"
    write(corpus / "a.txt", TEXT)
    write(corpus / "b\nc.txt", TEXT)
    r = run("dedup", corpus, "--index", tmp_path / "idx")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""
    assert "0 clusters: keep 0, drop 0 documents (0 bytes)" in r.stderr
    assert "1 document that can go is not listed" in r.stderr


def test_null_and_tsv_list_every_name_and_say_nothing_more(run, tmp_path):
    corpus = _corpus(tmp_path)
    r = run("dedup", corpus, "--index", tmp_path / "idx", "-0", "-q")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "b\nc.txt\0b.txt\0"
    assert r.stderr == ""
    r = run("dedup", "--index", tmp_path / "idx", "-f", "tsv")
    assert r.stdout == "b\\nc.txt\ta.txt\nb.txt\ta.txt\n"
    assert f"drop 2 documents ({2 * len(TEXT)} bytes)" in r.stderr
