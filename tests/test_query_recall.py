"""`simdoc query -t T` on an index banded for a higher threshold says what its banding misses
(QA pass of 2026-11-27). A query changes nothing, so it cannot band the index again as `pairs -t`
does: at T = 0.3 on an index banded for 0.9 (10 bands of 12 rows) a match at J = 0.3 is a
candidate with probability ~0, and the run printed "(set jaccard >= 0.3)" with no word of it.
"""

from __future__ import annotations

from conftest import TEXT_A, write


def _index(run, tmp_path, threshold):
    corpus = tmp_path / "c"
    write(corpus / "a.txt", TEXT_A)
    write(corpus / "b.txt", TEXT_A.replace("e", "o"))
    idx = tmp_path / "idx"
    r = run("pairs", corpus, "--index", idx, "-t", threshold)
    assert r.exit_code == 0, r.stderr
    return corpus, idx


def test_a_threshold_below_the_indexs_banding_is_warned_about(run, tmp_path):
    corpus, idx = _index(run, tmp_path, "0.9")
    r = run("query", corpus / "a.txt", "--index", idx, "-t", "0.3")
    assert r.exit_code == 0, r.stderr
    assert "is banded for J=0.9 (bands=10 rows=12): a match at J=0.3 is found with probability 0.000" in r.stderr
    assert "--threshold 0.3` bands it for that threshold" in r.stderr
    assert "a.txt" in r.stdout  # the records are unchanged: only stderr says it


def test_no_warning_at_or_above_the_indexs_threshold(run, tmp_path):
    corpus, idx = _index(run, tmp_path, "0.6")
    for args in ([], ["-t", "0.6"], ["-t", "0.9"]):
        r = run("query", corpus / "a.txt", "--index", idx, *args)
        assert r.exit_code == 0 and "is banded for" not in r.stderr, r.stderr
