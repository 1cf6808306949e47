"""Verification has a progress bar on stderr, as the other stages do (issue 27, item 11)."""

from __future__ import annotations

import random

import numpy as np
import pytest

import simdoc
import simdoc.stages.verify
import simdoc.stages.verify_units
from simdoc.stages.reread import reader_of
from simdoc.store.loaded import open_index


def _templated(folder, n: int, seed: int = 3) -> None:
    """n versions of one text, a few words changed in each: one component of near-duplicates."""
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(500)]
    base = [rng.choice(words) for _ in range(300)]
    folder.mkdir()
    for i in range(n):
        text = list(base)
        for _ in range(15):
            text[rng.randrange(len(text))] = rng.choice(words)
        (folder / f"d{i:03}.txt").write_text(" ".join(text), encoding="utf-8")


@pytest.mark.parametrize("jobs", [1, 2])
def test_verify_pairs_reports_every_pair_once(tmp_path, monkeypatch, jobs):
    _templated(tmp_path / "c", 30)
    simdoc.find_pairs(tmp_path / "c", tmp_path / "idx", jobs=1, verify=False)
    loaded = open_index(tmp_path / "idx")
    left, right = np.triu_indices(len(loaded.docs()), 1)
    # Three components (each third with itself), so that jobs=2 verifies units on two processes
    # (a unit is reported when it is done).
    keep = (left // 10) == (right // 10)
    left, right = left[keep], right[keep]
    monkeypatch.setattr(simdoc.stages.verify, "PROGRESS_PAIRS", 7)
    monkeypatch.setattr(simdoc.stages.verify_units, "UNIT_PAIRS", 64)
    steps: list[int] = []
    got = simdoc.stages.verify.verify_pairs(reader_of(loaded), left, right, jobs=jobs, progress=steps.append)
    assert got.ok.all()
    assert sum(steps) == len(left)
    assert len(steps) > 2  # it moves while verifying, not only at the end


def test_pairs_show_a_verify_bar_on_stderr(tmp_path, capsys):
    _templated(tmp_path / "c", 40)
    res = simdoc.find_pairs(tmp_path / "c", tmp_path / "idx", jobs=1, threshold=0.5, progress=True)
    err = capsys.readouterr().err
    assert len(res) == 40 * 39 // 2
    assert "verify" in err and f"/{len(res)} " in err  # its total: every pair (tqdm may skip the later updates)
    # Pairs taken from the verified-pairs table are not verified again: no bar.
    simdoc.find_pairs(tmp_path / "c", tmp_path / "idx", jobs=1, threshold=0.5, progress=True)
    assert "verify" not in capsys.readouterr().err
    # Without progress, nothing.
    simdoc.find_pairs(tmp_path / "c", tmp_path / "idx2", jobs=1, threshold=0.5)
    assert capsys.readouterr().err == ""
