"""`simdoc pairs sample_corpus` finds exactly the planted pairs listed in sample_corpus.md (beside the corpus)."""

from __future__ import annotations

import re

import pytest
from conftest import SAMPLE_CORPUS, records, summary

from simdoc.params import DEFAULT_THRESHOLD

NOTES = SAMPLE_CORPUS.parent / "sample_corpus.md"  # outside the corpus: not a document of it
ROW = re.compile(r"^\|\s*(?P<a>[^|]+?)\s*\|\s*(?P<b>[^|]+?)\s*\|\s*(?P<kind>[^|]+?)\s*\|\s*(?P<j>\d\.\d{4})\s*\|")


def planted() -> dict[tuple[str, str], str]:
    """(doc_a, doc_b) -> jaccard with 4 decimals, from the table of sample_corpus.md."""
    out = {}
    for line in NOTES.read_text(encoding="utf-8").splitlines():
        m = ROW.match(line)
        if m:
            a, b = sorted((m["a"], m["b"]))
            out[(a, b)] = m["j"]
    return out


def test_planted_table_parses():
    table = planted()
    assert len(table) >= 5
    for a, b in table:
        assert (SAMPLE_CORPUS / a).is_file(), a
        assert (SAMPLE_CORPUS / b).is_file(), b


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    from click.testing import CliRunner

    from simdoc.cli import cli

    idx = tmp_path_factory.mktemp("sample") / "idx"
    res = CliRunner().invoke(cli, ["pairs", str(SAMPLE_CORPUS), "--index", str(idx)])
    assert res.exit_code == 0, res.stderr
    return res


def test_default_run_prints_exactly_the_planted_pairs(default_run):
    expected = {pair: j for pair, j in planted().items() if float(j) >= DEFAULT_THRESHOLD}
    assert expected
    got = {(a, b): jac for a, b, est, jac in records(default_run)}
    assert len(got) == len(records(default_run)), "a pair is printed twice"
    missing = set(expected) - set(got)
    extra = set(got) - set(expected)
    assert not missing, f"planted pairs not printed: {sorted(missing)}"
    assert not extra, f"pairs printed that are not planted: {sorted(extra)}"
    for pair, j in expected.items():
        assert got[pair] == j, (pair, got[pair], j)


def test_default_run_summary(default_run):
    m = summary(default_run)
    n_files = sum(1 for p in SAMPLE_CORPUS.rglob("*") if p.is_file() and not p.name.startswith("."))
    assert int(m["docs"]) == n_files == 37
    # The notes say how many documents there are, and are not one of them.
    assert "It has 37 plain-text documents" in " ".join(NOTES.read_text(encoding="utf-8").split())
    assert not any(p.suffix == ".md" for p in SAMPLE_CORPUS.rglob("*"))
    assert m["skipped"] is None
    assert int(m["pairs"]) == len(records(default_run))
    assert f"(set jaccard >= {DEFAULT_THRESHOLD:g}, the default)" in default_run.stderr  # a new index holds none


def test_boilerplate_and_unrelated_pairs_stay_low(run, tmp_path):
    """sample_corpus.md: press releases share boilerplate (0.2339 to 0.2502); nothing else reaches 0.09."""
    # One row per band makes practically every pair with J >= 0.09 a candidate.
    r = run("pairs", SAMPLE_CORPUS, "--index", tmp_path / "idx", "--bands", "128", "--rows", "1", "--all-candidates")
    assert r.exit_code == 0
    table = planted()
    press = {}
    for a, b, est, jac in records(r):
        if (a, b) in table:
            assert jac == table[(a, b)]
        elif a.startswith("press/") and b.startswith("press/"):
            press[(a, b)] = jac
        else:
            assert float(jac) < 0.09, (a, b, jac)
    assert len(press) == 6
    assert max(press.values()) == "0.2502"
    assert press[("press/hosepipe-ban-lifted.txt", "press/schools-programme-award.txt")] == "0.2502"
    assert min(press.values()) == "0.2339"
