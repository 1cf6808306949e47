"""A file's name in a warning or an error on stderr is escaped as printed names are: an ESC or a
U+202E in a name cannot drive the terminal, and an error's warnings past 20 are counted."""

from __future__ import annotations

import os
import subprocess
import sys

TEXT = "the quick brown fox jumps over the lazy dog and runs far away into the woods\n"


def _simdoc(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "simdoc", *args], capture_output=True, text=True, errors="surrogateescape")


def test_a_warning_names_a_file_with_its_controls_escaped(tmp_path):
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "a.txt").write_text(TEXT * 3)
    (corpus / "b.txt").write_text(TEXT * 3)
    (corpus / "clear\x1b[2Jscreen.dat").write_bytes(b"binary\x00data")
    (corpus / "evil\u202etxt.exe").write_bytes(b"more\x00binary")
    done = _simdoc("pairs", str(corpus), "--index", str(tmp_path / "idx"))
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stderr and "\u202e" not in done.stderr
    assert "clear\\x1b[2Jscreen.dat" in done.stderr and "evil\\u202etxt.exe" in done.stderr


def test_an_error_shows_20_of_its_warnings_escaped_and_counts_the_rest(tmp_path):
    corpus = tmp_path / "c"
    corpus.mkdir()
    for i in range(25):  # links not followed: each is passed over, and the corpus has no documents
        os.symlink(tmp_path / "nowhere", corpus / f"link\x1b]0;{i:02}")
    done = _simdoc("pairs", str(corpus), "--index", str(tmp_path / "idx"))
    assert done.returncode == 3
    assert "\x1b" not in done.stderr
    lines = done.stderr.splitlines()
    assert sum(line.startswith("warning: link\\x1b]0;") for line in lines) == 20
    assert "warning: ... and 5 more warnings" in lines
    assert any(line.startswith("Error: corpus") and "has no documents" in line for line in lines)
