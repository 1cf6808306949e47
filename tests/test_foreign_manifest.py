"""--index naming another tool's folder (its own manifest.json and lock file) is refused untouched
(QA pass of 2026-11-27): the writer opened, truncated and wrote its pid into the folder's `lock`
before reading the manifest that made it refuse, and a reader left a `readers` file there.
"""

from __future__ import annotations

import pytest
from conftest import TEXT_A, write

from simdoc.indexmarks import foreign_manifest


@pytest.mark.parametrize(
    "command",
    [["pairs", "CORPUS"], ["pairs"], ["clusters"], ["stats"], ["check"], ["shingle", "CORPUS"], ["index", "-t", "0.5"]],
)
def test_another_tools_folder_is_refused_and_left_as_it_was(run, tmp_path, command):
    corpus = tmp_path / "c"
    write(corpus / "a.txt", TEXT_A)
    write(corpus / "b.txt", TEXT_A)
    other = tmp_path / "other"
    files = {"manifest.json": b'{"format": "other-tool", "files": []}', "lock": b"the other tool's lock\n", "data.csv": b"1,2\n"}
    for name, data in files.items():
        write(other / name, data.decode())
    args = [corpus if a == "CORPUS" else a for a in command]
    r = run(*args, "--index", other)
    assert r.exit_code == 4, r.stderr
    assert "is not a simdoc index (its manifest.json is not simdoc's)" in r.stderr
    assert "Traceback" not in r.stderr
    assert {p.name: p.read_bytes() for p in other.iterdir()} == files


@pytest.mark.parametrize(
    "raw, foreign",
    [(b'{"format": "x"}', True), (b"[1, 2]", True), (b'{"format": "simdoc-index"}', False), (b'{"format": "simdoc-in', False), (b"", False)],
)
def test_only_valid_json_that_is_not_simdocs_is_foreign(raw, foreign):
    assert foreign_manifest(raw) is foreign  # a damaged manifest of simdoc's stays the store's to refuse or --rebuild
