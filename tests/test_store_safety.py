"""The index directory trusts nothing it finds: lock files, the manifest, a failed write, a busy writer."""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path

import pytest
from conftest import assert_clean_error

from simdoc.store import LOCK, READERS


@pytest.fixture
def built(run, small_corpus, tmp_path) -> Path:
    idx = tmp_path / "idx"
    r = run("pairs", small_corpus, "--index", idx, "-q")
    assert r.exit_code == 0, r.stderr
    return idx


# ---------------------------------------------------------------- lock files (item 6)


@pytest.mark.parametrize("name", [LOCK, READERS])
def test_a_lock_file_replaced_by_a_symlink_is_refused_and_its_target_untouched(run, built, small_corpus, tmp_path, name):
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    (built / name).unlink(missing_ok=True)
    (built / name).symlink_to(target)
    for args in (("pairs", small_corpus, "--index", built), ("pairs", "--index", built), ("check", "--index", built)):
        r = run(*args)
        if name == LOCK and args[1] != small_corpus:
            continue  # readers never open the writer's lock
        assert_clean_error(r, 4, name, "symbolic link")
    assert target.read_text() == "keep me\n"


@pytest.mark.parametrize("name", [LOCK, READERS])
def test_a_dangling_lock_symlink_creates_nothing(run, built, small_corpus, tmp_path, name):
    target = tmp_path / "nowhere" / "created.txt"
    target.parent.mkdir()
    (built / name).unlink(missing_ok=True)
    (built / name).symlink_to(target)
    r = run("pairs", small_corpus, "--index", built, "--threshold", "0.9")
    assert_clean_error(r, 4, name)
    assert not target.exists()


@pytest.mark.parametrize("name", [LOCK, READERS])
def test_a_directory_in_place_of_a_lock_file_is_an_index_error(run, built, small_corpus, name):
    (built / name).unlink(missing_ok=True)
    (built / name).mkdir()
    r = run("pairs", small_corpus, "--index", built, "--threshold", "0.9")
    assert_clean_error(r, 4, name, "directory")
    assert "IsADirectoryError" not in r.stderr


def test_a_hard_linked_lock_file_is_not_truncated(run, built, small_corpus, tmp_path):
    other = tmp_path / "other.txt"
    other.write_text("another name of the same file\n")
    (built / LOCK).unlink(missing_ok=True)
    os.link(other, built / LOCK)
    r = run("pairs", small_corpus, "--index", built)
    assert_clean_error(r, 4, LOCK)
    assert other.read_text() == "another name of the same file\n"
