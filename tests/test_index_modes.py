"""An index's files have the mode any file its user makes has (0666 less the umask), so that an
index on a shared machine can be read by those who may read its folder. Its arrays and
manifest were written by ``tempfile.mkstemp`` and renamed: 0600 whatever the umask, so a
colleague's `simdoc pairs --index` on it failed with "Permission denied" (QA 2026-11-27)."""

from __future__ import annotations

import os
import stat

import pytest
from click.testing import CliRunner
from conftest import TEXT_A, write

from simdoc.cli import cli
from simdoc.store.npyfiles import new_temporary


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_every_file_of_an_index_has_the_umasks_mode(tmp_path, umask):
    write(tmp_path / "c" / "a.txt", TEXT_A)
    write(tmp_path / "c" / "b.txt", TEXT_A + " and one more line")
    old = os.umask(umask)
    try:
        for args in (["pairs", "c"], ["shingle", "c"], ["pairs"]):  # a build, a stage of its own, an update
            r = CliRunner().invoke(cli, [*(str(tmp_path / a) if a == "c" else a for a in args), "--index", str(tmp_path / "i"), "-q", "-j", "1"])
            assert r.exit_code == 0, r.stderr
    finally:
        os.umask(old)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "i").iterdir() if p.is_file()}
    assert any(n.endswith(".npy") for n in modes) and "manifest.json" in modes
    assert "lock" in modes and "readers" in modes
    assert {n: m for n, m in modes.items() if m != 0o666 & ~umask} == {}


def test_new_temporary_makes_a_new_file_each_time(tmp_path):
    made = set()
    for _ in range(50):
        fd, path = new_temporary(tmp_path, ".x.", ".tmp")
        os.close(fd)
        made.add(path)
    assert len(made) == 50 and all(os.path.basename(p).startswith(".x.") and p.endswith(".tmp") for p in made)
