"""`simdoc dedup` never lists a file that is the very file kept (a link to it, or a hard link).

With --follow-symlinks, `link.txt -> plain.txt` is indexed twice, as two exact
copies. `--keep first` keeps `link.txt` (the smaller id): listing
`plain.txt` for `xargs rm` would delete the only copy and leave the kept
link dangling. A hard link listed would free nothing.
"""

from __future__ import annotations

import os

from conftest import write

TEXT = "The only copy of this precious text about the harbour lantern festival on the old quay."


def test_dedup_does_not_list_the_target_of_the_link_it_keeps(run, tmp_path):
    corpus = tmp_path / "c"
    write(corpus / "plain.txt", TEXT)
    os.symlink("plain.txt", corpus / "link.txt")
    write(corpus / "z-copy.txt", TEXT)  # a real copy: that one can go
    r = run("dedup", corpus, "--index", tmp_path / "idx", "--follow-symlinks", "--absolute", "-0")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == f"{corpus / 'z-copy.txt'}\0"
    assert "plain.txt: the same file as link.txt, the one kept" in r.stderr
    assert "drop 1 document (" in r.stderr


def test_dedup_does_not_list_a_hard_link_of_the_file_it_keeps(run, tmp_path):
    corpus = tmp_path / "c"
    write(corpus / "a.txt", TEXT)
    os.link(corpus / "a.txt", corpus / "b.txt")
    r = run("dedup", corpus, "--index", tmp_path / "idx")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""
    assert "b.txt: the same file as a.txt, the one kept" in r.stderr


# --write: the listing leaves the kept file's other name out for `rm`'s sake only; the corpus
# written holds the text once, under the name kept, as it holds every other cluster.

OTHER = "Unrelated words about ferries, tide tables and the cranes of the harbour at dawn."


def test_write_holds_a_link_and_its_target_once_under_the_name_kept(run, tmp_path):
    corpus, out = tmp_path / "c", tmp_path / "out"
    write(corpus / "plain.txt", TEXT)
    os.symlink("plain.txt", corpus / "link.txt")
    write(corpus / "other.txt", OTHER)
    r = run("dedup", corpus, "--index", tmp_path / "idx", "--follow-symlinks", "--write", out)
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""  # the listing: plain.txt is link.txt's own file
    assert sorted(p.name for p in out.iterdir()) == ["link.txt", "other.txt"]
    assert (out / "link.txt").read_text() == TEXT and not (out / "link.txt").is_symlink()
    assert "wrote 2 documents in 2 files" in r.stderr and "(1 document left out)" in r.stderr


def test_write_holds_a_hard_linked_file_once(run, tmp_path):
    corpus, out = tmp_path / "c", tmp_path / "out"
    write(corpus / "a.txt", TEXT)
    os.link(corpus / "a.txt", corpus / "b.txt")
    r = run("dedup", corpus, "--index", tmp_path / "idx", "--write", out)
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""
    assert sorted(p.name for p in out.iterdir()) == ["a.txt"]
