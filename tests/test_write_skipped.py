"""``dedup --write DIR`` and the files the index skipped.

A mail archive holds images and PDFs beside its text: the index skips them
(binary), and a user who replaces the corpus with DIR must not lose them.
Such a file is copied byte for byte; one that cannot be (a symbolic link not
followed, a FIFO) is named on stderr, even with -q; one changed since it was
indexed stops the writing, as a changed document does.
"""

from __future__ import annotations

import os

import pytest

from conftest import numbered_page, write
from simdoc.errors import CorpusError

PNG = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + bytes(range(256))


def corpus_with_others(tmp_path):
    c = tmp_path / "c"
    write(c / "a.txt", numbered_page(0))
    write(c / "b.txt", numbered_page(0, change=1))  # a near copy of a.txt: dropped
    write(c / "u.txt", numbered_page(3))
    write(c / "img.png", PNG)
    write(c / "deep" / "scan.pdf", b"%PDF-1.4\n\0binary")
    write(c / "empty.jsonl", b"")  # a JSON Lines file of no documents
    os.symlink("u.txt", c / "link.txt")
    os.mkfifo(c / "pipe")
    return c


def files_under(folder) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_files_the_index_skipped_are_copied_byte_for_byte_and_the_rest_are_named(run, tmp_path):
    c = corpus_with_others(tmp_path)
    r = run("dedup", c, "--index", tmp_path / "i", "--write", tmp_path / "out", "--threshold", "0.5", "-j", "1")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "b.txt\n"
    out = files_under(tmp_path / "out")
    assert out == {name: data for name, data in files_under(c).items() if name not in ("b.txt", "link.txt")}
    assert set(out) == {"a.txt", "u.txt", "img.png", "deep/scan.pdf", "empty.jsonl"}
    assert "3 files the index skipped copied as they are" in r.stderr
    assert "pipe: not written to" in r.stderr and "not a regular file" in r.stderr
    assert "link.txt: not written to" in r.stderr and "symbolic link, not followed" in r.stderr
    assert "2 paths of the corpus are not in" in r.stderr
    # -q hides the warnings, never the count of files not written.
    r = run("dedup", c, "--index", tmp_path / "i", "--write", tmp_path / "out2", "--threshold", "0.5", "-j", "1", "-q")
    assert r.exit_code == 0 and files_under(tmp_path / "out2") == out, r.stderr
    assert "not written to" not in r.stderr and "2 paths of the corpus are not in" in r.stderr


def test_with_link_a_skipped_file_is_hard_linked(run, tmp_path):
    c = corpus_with_others(tmp_path)
    r = run("dedup", c, "--index", tmp_path / "i", "--write", tmp_path / "out", "--threshold", "0.5", "-j", "1", "--link")
    assert r.exit_code == 0, r.stderr
    assert os.path.samefile(tmp_path / "out" / "img.png", c / "img.png")


@pytest.mark.parametrize("how", ["rewritten", "gone"])
def test_a_skipped_file_changed_since_it_was_indexed_stops_the_writing(run, tmp_path, how):
    c = corpus_with_others(tmp_path)
    r = run("pairs", c, "--index", tmp_path / "i", "--threshold", "0.5", "-j", "1")
    assert r.exit_code == 0, r.stderr
    from simdoc.reports.write import write_corpus
    from simdoc.stages.reread import reader_of
    from simdoc.store.loaded import open_index

    loaded = open_index(tmp_path / "i")
    skipped = [s for s in loaded.manifest["stages"]["shingle"]["skipped"] if "source" not in s]
    assert "deep/scan.pdf" in {s["id"] for s in skipped}
    if how == "rewritten":  # now a text file, which may be a near copy of one kept
        st = os.stat(c / "deep" / "scan.pdf")
        write(c / "deep" / "scan.pdf", numbered_page(3))
        os.utime(c / "deep" / "scan.pdf", ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    else:
        os.unlink(c / "deep" / "scan.pdf")
    with pytest.raises(CorpusError, match="deep/scan.pdf: changed or gone since it was indexed"):
        write_corpus(reader_of(loaded), {"b.txt"}, tmp_path / "out", skipped=skipped)
    assert not (tmp_path / "out").exists() and [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_the_library_says_what_it_copied_and_what_it_could_not(tmp_path):
    import simdoc

    c = corpus_with_others(tmp_path)
    plan = simdoc.dedup(c, index=tmp_path / "i", threshold=0.5, jobs=1)
    written = plan.write(tmp_path / "out")
    assert (written.files, written.documents, written.dropped, written.copied) == (2, 2, 1, 3)
    assert sorted(name for name, _ in written.not_written) == ["link.txt", "pipe"]
