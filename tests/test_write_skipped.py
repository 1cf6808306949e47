"""``dedup --write DIR`` and the files the index skipped.

A mail archive holds images and PDFs beside its text: the index skips them
(binary), and a user who replaces the corpus with DIR must not lose them.
Such a file is copied byte for byte, a symbolic link not followed is made
again (as `cp -a` makes it); one that cannot be written (a FIFO) is named on
stderr, even with -q; one changed since it was indexed stops the writing, as
a changed document does.
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
    assert out == {name: data for name, data in files_under(c).items() if name != "b.txt"}
    assert set(out) == {"a.txt", "u.txt", "img.png", "deep/scan.pdf", "empty.jsonl", "link.txt"}
    assert os.readlink(tmp_path / "out" / "link.txt") == "u.txt"  # the link itself, made again
    assert "4 files the index skipped copied as they are" in r.stderr
    assert "pipe: not written to" in r.stderr and "not a regular file" in r.stderr
    assert "link.txt" not in r.stderr.replace("warning: link.txt: symbolic link, not followed", "")
    assert "1 path of the corpus is not in" in r.stderr
    # -q hides the warnings, never the count of files not written.
    r = run("dedup", c, "--index", tmp_path / "i", "--write", tmp_path / "out2", "--threshold", "0.5", "-j", "1", "-q")
    assert r.exit_code == 0 and files_under(tmp_path / "out2") == out, r.stderr
    assert "not written to" not in r.stderr and "1 path of the corpus is not in" in r.stderr


def test_a_link_to_a_document_left_out_is_made_again_and_said_to_lead_nowhere(run, tmp_path):
    c = tmp_path / "c"
    write(c / "a.txt", numbered_page(0))
    write(c / "sub" / "b.txt", numbered_page(0, change=1))  # a near copy of a.txt: dropped
    write(c / "u.txt", numbered_page(3))
    os.symlink("sub/b.txt", c / "to-b")  # relative, to the copy dropped
    os.symlink(str(c / "u.txt"), c / "sub" / "to-u")  # absolute, to a file kept
    os.symlink("../nowhere", c / "sub" / "broken")  # leads nowhere in the corpus either
    os.mkfifo(c / "pipe")
    os.symlink("pipe", c / "to-pipe")  # to a FIFO, which is not written
    write(c / "..u.txt", numbered_page(5))  # hidden (no part of the corpus), though its name starts with ".."
    os.symlink("..u.txt", c / "to-dots")
    os.symlink(c, tmp_path / "alias")
    os.symlink(str(tmp_path / "alias" / "sub" / "b.txt"), c / "to-b-by-alias")  # absolute, through another path to the corpus
    r = run("dedup", c, "--index", tmp_path / "i", "--write", tmp_path / "out", "--threshold", "0.5", "-j", "1")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "sub/b.txt\n"
    out = tmp_path / "out"
    assert [os.readlink(out / x) for x in ("to-b", "sub/to-u", "sub/broken")] == ["sub/b.txt", str(c / "u.txt"), "../nowhere"]
    assert not (out / "sub" / "b.txt").exists()
    assert f"to-b: a symbolic link to sub/b.txt, which is left out: it leads nowhere in {out}" in r.stderr
    assert f"to-pipe: a symbolic link to pipe, which is left out: it leads nowhere in {out}" in r.stderr
    assert f"to-b-by-alias: a symbolic link to {tmp_path / 'alias' / 'sub' / 'b.txt'}, which is left out" in r.stderr
    for kept in ("sub/to-u", "sub/broken", "to-dots"):
        assert f"{kept}: a symbolic link" not in r.stderr
    assert os.readlink(out / "to-dots") == "..u.txt" and not (out / "..u.txt").exists()
    assert "1 path of the corpus is not in" in r.stderr  # the FIFO


def test_a_link_replaced_by_a_file_since_it_was_indexed_stops_the_writing(tmp_path):
    import simdoc
    from simdoc.reports import write as write_module

    c = corpus_with_others(tmp_path)
    plan = simdoc.dedup(c, index=tmp_path / "i", threshold=0.5, jobs=1)
    real = write_module._copy_link

    def replaced(src, name, where, links):
        os.unlink(src)
        write(c / name, numbered_page(3))  # a text now, where the link was
        return real(src, name, where, links)

    write_module._copy_link = replaced
    try:
        with pytest.raises(CorpusError, match="link.txt: changed or gone since it was indexed"):
            plan.write(tmp_path / "out")
    finally:
        write_module._copy_link = real
    assert not (tmp_path / "out").exists()


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
    assert (written.files, written.documents, written.dropped, written.copied) == (2, 2, 1, 4)
    assert [name for name, _ in written.not_written] == ["pipe"] and written.dangling == []
