"""The Python API past find_pairs: find_clusters, dedup and query return what the commands print
(issue 27, item 12), and the README's Python examples run as printed."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil

import pytest
from conftest import REPO, SAMPLE_CORPUS

import simdoc
from simdoc.errors import UsageError


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    """A copy of the sample corpus (dedup looks at files' times) and an index of it."""
    root = tmp_path_factory.mktemp("api")
    corpus = shutil.copytree(SAMPLE_CORPUS, root / "sample_corpus")
    simdoc.find_pairs(corpus, root / "idx", jobs=1)
    return corpus, root / "idx"


def test_public_names_are_listed():
    for name in ("find_clusters", "dedup", "query", "LSHIndex"):
        assert name in simdoc.__all__ and name in dir(simdoc) and callable(getattr(simdoc, name))


def test_find_clusters_is_what_simdoc_clusters_prints(run, sample):
    corpus, idx = sample
    found = simdoc.find_clusters(corpus, idx, jobs=1)
    printed = run("clusters", corpus, "--index", idx).stdout.splitlines()
    assert len(found) == 5 and len(found.pairs) == 5 and found.pairs.n_docs == 37
    assert printed == ["\t".join([str(c.cluster_id), str(c.size), *c.members]) for c in found]
    assert found[1].members == ("misc/backup/red-lentil-soup-copy.txt", "misc/red-lentil-soup.txt")
    # Without the corpus, the index as it is; a stricter threshold, fewer clusters.
    assert [c.members for c in simdoc.find_clusters(index=idx, threshold=0.85)] == [
        ("misc/backup/red-lentil-soup-copy.txt", "misc/red-lentil-soup.txt"),
        ("policies/remote-work-policy-2023.txt", "policies/remote-work-policy-2024.txt"),
    ]


def test_dedup_is_what_simdoc_dedup_prints(run, sample):
    corpus, idx = sample
    plan = simdoc.dedup(corpus, idx, keep="longest", threshold=0.6, jobs=1)
    printed = run("dedup", corpus, "--index", idx, "--keep", "longest", "--absolute").stdout.splitlines()
    assert plan.paths(absolute=True) == printed and len(printed) == 5
    assert plan.paths() == [os.path.relpath(p, corpus) for p in printed]
    assert plan.keep == "longest" and plan.warnings == [] and plan.n_drop == 5
    assert plan.drop_bytes == sum((corpus / p).stat().st_size for p in plan.paths())
    for d in plan:
        kept = (corpus / d.keep).stat().st_size
        assert all((corpus / x).stat().st_size <= kept for x in d.drop)


def test_dedup_names_files_changed_since_indexed_in_warnings(run, tmp_path):
    corpus = shutil.copytree(SAMPLE_CORPUS, tmp_path / "c")
    idx = tmp_path / "idx"
    first = simdoc.dedup(corpus, idx, jobs=1)
    dropped = first.paths()[0]
    os.utime(corpus / dropped, ns=(0, 0))  # another file than the one indexed, as far as a stat tells
    again = simdoc.dedup(index=idx)  # without the corpus: the index is not refreshed
    assert dropped not in again.paths() and len(again.paths()) == len(first.paths()) - 1
    assert [w for w in again.warnings if w.startswith(f"{dropped}: changed or gone")]
    r = run("dedup", "--index", idx)
    assert r.stdout.splitlines() == again.paths()
    assert f"warning: {again.warnings[0]}" in r.stderr


def test_dedup_checks_keep_before_any_work(tmp_path):
    with pytest.raises(UsageError, match="--keep must be one of"):
        simdoc.dedup(SAMPLE_CORPUS, tmp_path / "idx", keep="biggest")
    assert not (tmp_path / "idx").exists()


def test_query_is_what_simdoc_query_prints(run, sample):
    corpus, idx = sample
    soup = (corpus / "misc" / "red-lentil-soup.txt").read_text(encoding="utf-8")
    got = simdoc.query(idx, [("soup", soup), ("nothing", "zzzz qqqq xxxx")])
    assert [(m.query, m.doc, m.jaccard) for m in got] == [
        ("soup", "misc/backup/red-lentil-soup-copy.txt", 1.0),
        ("soup", "misc/red-lentil-soup.txt", 1.0),
    ]
    assert got.warnings == []
    printed = run("query", corpus / "misc" / "red-lentil-soup.txt", "--index", idx).stdout.splitlines()
    assert [line.split("\t")[1] for line in printed] == [m.doc for m in got]
    # Texts alone are named by their position.
    assert {m.query for m in simdoc.query(idx, ["", soup])} == {"1"}
    assert "0: no shingles" in simdoc.query(idx, ["", soup]).warnings[0]
    assert len(simdoc.query(idx, [soup], threshold=0.01, all_candidates=True)) >= 2
    with pytest.raises(TypeError):
        simdoc.query(idx, [("id", "text", "extra")])


def test_readme_python_examples_run_as_printed(tmp_path, monkeypatch):
    """Every ```python block of README.md, run in a folder holding sample_corpus, in order."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```\n", text, re.S | re.M)
    assert len(blocks) >= 3
    shutil.copytree(SAMPLE_CORPUS, tmp_path / "sample_corpus")
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for block in blocks:
            exec(compile(block, "README.md", "exec"), {})
    printed = out.getvalue()
    assert "misc/backup/red-lentil-soup-copy.txt misc/red-lentil-soup.txt 1.0 1.0" in printed
    assert "['fox', 'fox-2']" in printed  # what the README says the query prints
    assert "(13, 7)" in printed


def test_find_clusters_and_dedup_take_every_stage_keyword_of_find_pairs():
    """An option that exists works everywhere it is accepted: the library's clusters and dedup take
    every shingle, signature and banding keyword find_pairs takes (they always verify)."""
    import inspect

    wanted = set(inspect.signature(simdoc.find_pairs).parameters) - {"verify", "all_candidates", "new_only"}
    for func in (simdoc.find_clusters, simdoc.dedup):
        missing = wanted - set(inspect.signature(func).parameters)
        assert not missing, (func.__name__, sorted(missing))
