"""``--rebuild`` changes the parameters asked for and keeps the index's others (QA 2026-11-27).

README: "Options you do not give are taken from the index". A rebuild took the
defaults for every option not given instead: ``--k 3 --rebuild`` on an index of
word 2-shingles, 64 classic permutations made char 3-shingles and 128 one-permutation
signatures, and a plain ``--rebuild`` turned k 9 into 5, with nothing said.
"""

from __future__ import annotations

import json

import pytest
from conftest import SAMPLE_CORPUS


def _params(idx) -> tuple:
    stages = json.loads((idx / "manifest.json").read_text())["stages"]
    sh, sig = stages["shingle"]["params"], stages["signature"]["params"]
    return sh["unit"], sh["k"], sh["lowercase"], sig["num_perm"], sig["scheme"], stages["index"]["params"]["threshold"]


@pytest.mark.parametrize(
    "again, expected",
    [
        (["--k", "3"], ("word", 3, False, 64, "classic", 0.5)),
        ([], ("word", 2, False, 64, "classic", 0.5)),
        (["--num-perm", "32"], ("word", 2, False, 32, "classic", 0.5)),
        (["--unit", "char"], ("char", 5, False, 64, "classic", 0.5)),  # another unit: that unit's default k
    ],
)
def test_a_rebuild_keeps_the_options_not_given(run, tmp_path, again, expected):
    idx = tmp_path / "idx"
    first = ["--unit", "word", "--k", "2", "--no-lowercase", "--num-perm", "64", "--scheme", "classic", "-t", "0.5"]
    assert run("pairs", SAMPLE_CORPUS, "--index", idx, *first, "-q").exit_code == 0
    r = run("pairs", SAMPLE_CORPUS, "--index", idx, *again, "--rebuild", "-q")
    assert r.exit_code == 0, r.stderr
    assert _params(idx) == expected
    fresh = tmp_path / "fresh"
    unit, k, _, num_perm, scheme, t = expected
    asked = ["--unit", unit, "--k", str(k), "--no-lowercase", "--num-perm", str(num_perm), "--scheme", scheme, "-t", str(t)]
    assert run("pairs", SAMPLE_CORPUS, "--index", fresh, *asked, "-q").stdout == r.stdout  # as a fresh build of those
