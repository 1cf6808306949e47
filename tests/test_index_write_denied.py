"""An index directory that refuses new files (mode 555 for its owner, an immutable directory:
EACCES, EPERM) ends the run with exit 6, as a read-only file system does (README "Exit status"),
not with a traceback (QA pass of 2026-11-27: `chattr +i IDX; simdoc pairs --index IDX -t 0.7`
ended in PermissionError, exit 1). The index stays as it was.
"""

from __future__ import annotations

import errno
import os

import pytest
from conftest import TEXT_A, TEXT_C, write


@pytest.mark.parametrize("code", [errno.EACCES, errno.EPERM])
def test_a_directory_that_takes_no_new_files_is_exit_6(run, tmp_path, monkeypatch, code):
    corpus = tmp_path / "c"
    write(corpus / "a.txt", TEXT_A)
    write(corpus / "b.txt", TEXT_A)
    write(corpus / "c.txt", TEXT_C)
    idx = tmp_path / "idx"
    first = run("pairs", corpus, "--index", idx, "-f", "tsv")
    assert first.exit_code == 0, first.stderr
    real = os.open

    def refused(path, flags, *args, **kw):  # what the kernel answers as the directory takes no new entry
        made = flags & os.O_CREAT and flags & os.O_EXCL
        if made and os.path.realpath(os.path.dirname(path)) == os.path.realpath(idx):
            raise PermissionError(code, os.strerror(code), path)
        return real(path, flags, *args, **kw)

    monkeypatch.setattr(os, "open", refused)
    r = run("pairs", "--index", idx, "-t", "0.7")  # a new threshold: the index is banded again
    assert r.exit_code == 6, r.stderr
    assert "cannot write the index at" in r.stderr and "Traceback" not in r.stderr
    monkeypatch.undo()
    again = run("pairs", "--index", idx, "-f", "tsv")
    assert again.exit_code == 0 and again.stdout == first.stdout


def test_a_permission_error_elsewhere_is_not_taken_for_the_index(tmp_path):
    from simdoc.store import directory

    store = directory.IndexStore(tmp_path / "idx")
    with pytest.raises(PermissionError):
        with store.writing():
            raise PermissionError(errno.EACCES, "denied", str(tmp_path / "elsewhere" / "f"))
