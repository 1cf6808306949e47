"""`pairs`/`clusters` on `--index` alone recheck the exact copies too, not only the stored pairs.

No scan proves the files unchanged then: a pair from the verified-pairs table
is taken only while both files keep their stat. The pairs inside a group of
exact copies were printed as 1.0000 whatever the files held now: edit one
copy, and `simdoc pairs --index IDX` still said it was identical.
"""

from __future__ import annotations

import os

import pytest

from conftest import write

TEXT = "A short recipe for red lentil soup: onions, carrots, cumin, lentils and stock, simmered and blended. " * 5


def test_an_edited_exact_copy_is_left_out_with_a_warning(run, tmp_path):
    corpus, idx = tmp_path / "c", tmp_path / "idx"
    for name in ("a.txt", "b.txt", "c.txt"):
        write(corpus / name, TEXT)
    r = run("pairs", corpus, "--index", idx)
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "a.txt\tb.txt\t1.0000\t1.0000\na.txt\tc.txt\t1.0000\t1.0000\nb.txt\tc.txt\t1.0000\t1.0000\n"
    write(corpus / "b.txt", "Completely different text now, about ferries and the harbour in winter.")
    r = run("pairs", "--index", idx)
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "a.txt\tc.txt\t1.0000\t1.0000\n"
    assert "b.txt: changed since it was indexed; its pairs are left out" in r.stderr
    r = run("clusters", "--index", idx)
    assert r.stdout == "1\t2\ta.txt\tc.txt\n"


def test_a_touched_exact_copy_with_the_same_bytes_stays(run, tmp_path):
    corpus, idx = tmp_path / "c", tmp_path / "idx"
    for name in ("a.txt", "b.txt"):
        write(corpus / name, TEXT)
    assert run("pairs", corpus, "--index", idx).exit_code == 0
    os.utime(corpus / "a.txt", ns=(10**18, 10**18))  # its stat moved, its bytes did not
    os.remove(corpus / "b.txt")
    write(corpus / "b.txt", TEXT)  # written again: another inode, the same bytes
    r = run("pairs", "--index", idx)
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "a.txt\tb.txt\t1.0000\t1.0000\n"
    assert "changed since" not in r.stderr


@pytest.mark.parametrize("edited", ["b.txt", "a.txt"])
def test_query_reads_an_edited_copy_itself_and_finds_the_unchanged_ones(run, tmp_path, edited):
    # b.txt: a copy, read as itself (not as its representative). a.txt: the group's first member
    # (its representative, the one the buckets hold): its copies keep the text indexed, and are
    # still found and verified, each read as itself.
    corpus, idx = tmp_path / "c", tmp_path / "idx"
    for name in ("a.txt", "b.txt", "c.txt"):
        write(corpus / name, TEXT)
    assert run("pairs", corpus, "--index", idx).exit_code == 0
    write(corpus / edited, "Completely different text now, about ferries and the harbour in winter.")
    q = write(tmp_path / "q.txt", TEXT)
    r = run("query", q, "--index", idx)
    assert r.exit_code == 0, r.stderr
    kept = [name for name in ("a.txt", "b.txt", "c.txt") if name != edited]
    assert r.stdout == "".join(f"{q}\t{name}\t1.0000\t1.0000\n" for name in kept)
    assert f"{edited}: changed or gone since it was indexed; not compared" in r.stderr
    assert not [name for name in kept if name in r.stderr]


def test_query_finds_the_copies_of_a_group_head_that_is_gone(run, tmp_path):
    corpus, idx = tmp_path / "c", tmp_path / "idx"
    for name in ("a.txt", "b.txt", "c.txt"):
        write(corpus / name, TEXT)
    assert run("pairs", corpus, "--index", idx).exit_code == 0
    os.remove(corpus / "a.txt")
    q = write(tmp_path / "q.txt", TEXT)
    r = run("query", q, "--index", idx, "--all-candidates")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == f"{q}\tb.txt\t1.0000\t1.0000\n{q}\tc.txt\t1.0000\t1.0000\n"
    assert "a.txt: changed or gone since it was indexed" in r.stderr
