"""`simdoc dedup --follow-symlinks` never lists a file whose real place is outside the corpus.

A link to a folder outside the corpus is followed for indexing (README), so
`corpus/link/x.txt` is a document; but `rm corpus/link/x.txt`, as the
README's `xargs -0 -r rm --` recipe runs it, deletes the file outside.
Such a document is never listed, nor kept for the documents inside (the
copy kept is inside the corpus, so deleting the list never leaves a text
only outside it), and a warning names it.
"""

from __future__ import annotations

import os

from conftest import write

TEXT = "The only copy of this precious text about the harbour lantern festival on the old quay, kept outside."


def _corpus(tmp_path):
    corpus, outside = tmp_path / "c", tmp_path / "outside"
    write(corpus / "a.txt", TEXT)
    write(outside / "x.txt", TEXT)
    os.symlink("../outside", corpus / "link")
    return corpus, outside


def test_dedup_does_not_list_a_file_reached_through_a_link_out_of_the_corpus(run, tmp_path):
    corpus, _ = _corpus(tmp_path)
    r = run("dedup", corpus, "--index", tmp_path / "idx", "--follow-symlinks", "--absolute", "-0")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""
    assert "link/x.txt: its file is outside the corpus" in r.stderr
    assert "drop 0 documents" in r.stderr


def test_dedup_keeps_a_copy_inside_when_the_policy_would_keep_the_one_outside(run, tmp_path):
    corpus, outside = _corpus(tmp_path)
    write(corpus / "b.txt", TEXT)
    os.utime(corpus / "a.txt", ns=(1_000_000_000, 1_000_000_000))
    os.utime(corpus / "b.txt", ns=(2_000_000_000, 2_000_000_000))
    os.utime(outside / "x.txt", ns=(3_000_000_000, 3_000_000_000))  # the newest: --keep newest would keep it
    r = run("dedup", corpus, "--index", tmp_path / "idx", "--follow-symlinks", "--keep", "newest", "-f", "tsv")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "a.txt\tb.txt\n"  # the newest inside is kept; the one outside is never a drop
    assert "link/x.txt: its file is outside the corpus" in r.stderr


def test_dedup_lists_nothing_of_a_cluster_wholly_outside(run, tmp_path):
    corpus, outside = _corpus(tmp_path)
    write(outside / "y.txt", TEXT)
    (corpus / "a.txt").write_text("Unrelated words about ferries, tide tables and the cranes of the harbour.")
    r = run("dedup", corpus, "--index", tmp_path / "idx", "--follow-symlinks", "--absolute", "-0")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""
    assert "link/y.txt: its file is outside the corpus" in r.stderr


def test_dedup_does_not_list_a_link_to_a_file_outside(run, tmp_path):
    corpus, outside = tmp_path / "c", tmp_path / "outside"
    write(corpus / "a.txt", TEXT)
    write(outside / "x.txt", TEXT)
    os.symlink("../outside/x.txt", corpus / "z.txt")  # kept: a.txt, the smaller id
    r = run("dedup", corpus, "--index", tmp_path / "idx", "--follow-symlinks", "-0")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""
    assert "z.txt: its file is outside the corpus" in r.stderr


def test_write_leaves_out_the_copy_outside_too(run, tmp_path):
    corpus, _ = _corpus(tmp_path)
    out = tmp_path / "out"
    r = run("dedup", corpus, "--index", tmp_path / "idx", "--follow-symlinks", "--write", out)
    assert r.exit_code == 0, r.stderr
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) == ["a.txt"]
    assert (tmp_path / "outside" / "x.txt").read_text() == TEXT
