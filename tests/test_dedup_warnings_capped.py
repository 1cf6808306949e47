"""`simdoc dedup` shows at most 20 warnings of documents left out, then one line counting the rest.

A JSON Lines or WARC corpus indexed with --max-bytes can leave thousands of
documents out of the list, each with a warning. They are capped as the
stages' warnings are (``MAX_WARNINGS``): the first 20, then one line that
says how many more there are and how many in all; --verbose shows every
one, and -q still says in one line how many it hid.
"""

from __future__ import annotations

import random

from conftest import write

from simdoc.cli.options import MAX_WARNINGS

N = 400
COPIES = 30  # one kept, 29 left out: 9 past the cap


def _words(seed: int, n: int) -> str:
    rng = random.Random(seed)
    return " ".join("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9))) for _ in range(n))


def _cut_corpus(run, tmp_path):
    """COPIES files alike in their first N bytes only, indexed with --max-bytes N (its own warnings: here)."""
    corpus, idx = tmp_path / "c", tmp_path / "idx"
    prefix = _words(1, 200)[:N]
    for i in range(COPIES):
        write(corpus / f"d{i:02d}.txt", prefix + _words(100 + i, 300))
    assert run("pairs", corpus, "--index", idx, "--max-bytes", N, "-q").exit_code == 0
    return corpus, idx


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("warning:")]


def test_dedup_shows_20_left_out_warnings_then_counts_the_rest(run, tmp_path):
    corpus, idx = _cut_corpus(run, tmp_path)
    r = run("dedup", "--index", idx)
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""
    warns = _warnings(r.stderr)
    left_out = COPIES - 1
    assert len(warns) == MAX_WARNINGS + 1
    assert all("only its first" in w for w in warns[:MAX_WARNINGS])
    assert warns[-1] == (
        f"warning: ... and {left_out - MAX_WARNINGS} more warnings of documents left out, {left_out} in all "
        "(--verbose shows all)"
    )


def test_dedup_verbose_shows_every_one(run, tmp_path):
    corpus, idx = _cut_corpus(run, tmp_path)
    r = run("dedup", "--index", idx, "--verbose")
    assert r.exit_code == 0, r.stderr
    assert sum("only its first" in w for w in _warnings(r.stderr)) == COPIES - 1
    assert "more warnings" not in r.stderr


def test_dedup_quiet_still_counts_them_all_in_one_line(run, tmp_path):
    corpus, idx = _cut_corpus(run, tmp_path)
    r = run("dedup", "--index", idx, "-q")
    assert r.exit_code == 0, r.stderr
    assert r.stderr == (
        f"simdoc: {COPIES - 1} warnings hidden by -q, of documents left out of the list (changed since indexed, "
        "outside the corpus, compared by their first --max-bytes only, or the kept one's own file): run without -q "
        "to read them\n"
    )


def test_names_with_a_line_break_share_the_cap_and_are_still_counted(run, tmp_path):
    corpus = tmp_path / "c"
    text = "The harbour lantern festival returns to Port Ellery on the first Saturday of August, at nine."
    write(corpus / "a.txt", text)
    for i in range(25):
        write(corpus / f"b{i:02d}\nx.txt", text)
    r = run("dedup", corpus, "--index", tmp_path / "idx")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""
    warns = _warnings(r.stderr)
    assert len(warns) == MAX_WARNINGS + 1
    assert all("has a line break in its name" in w for w in warns[:MAX_WARNINGS])
    assert warns[-1] == "warning: ... and 5 more warnings of documents left out, 25 in all (--verbose shows all)"
    assert "simdoc: 25 documents that can go are not listed, as their names have a line break: -0 lists them" in r.stderr
