"""`simdoc dedup` on an index built with --max-bytes N lists no document compared by a prefix only.

With --max-bytes N only the first N bytes of each file (of each JSON Lines
text) are read: two files alike in those bytes and different after them
pair at 1.0. `rm` of one deletes the bytes after N, which nothing compared.
Such a document is left out with a warning, on every run (the indexing
run's warning about the cut is not repeated); --write keeps it. A document
read whole is listed as before, even when the one kept was cut.
"""

from __future__ import annotations

import json
import random

from conftest import write

N = 400


def _words(seed: int, n: int) -> str:
    rng = random.Random(seed)
    return " ".join("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9))) for _ in range(n))


PREFIX = _words(1, 200)[:N]  # the first N bytes the two share
A = PREFIX + _words(2, 300)
B = PREFIX + _words(3, 300)


def test_dedup_does_not_list_a_file_that_matched_in_its_first_bytes_only(run, tmp_path):
    corpus, idx = tmp_path / "c", tmp_path / "idx"
    write(corpus / "a.txt", A)
    write(corpus / "b.txt", B)
    assert run("pairs", corpus, "--index", idx, "--max-bytes", N).exit_code == 0  # the warning about the cut: here
    r = run("dedup", corpus, "--index", idx, "--max-bytes", N, "--absolute", "-0")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""
    assert f"b.txt: only its first {N} bytes were compared (the index reads at most --max-bytes {N})" in r.stderr
    assert "drop 0 documents" in r.stderr


def test_dedup_with_index_alone_says_so_too(run, tmp_path):
    corpus, idx = tmp_path / "c", tmp_path / "idx"
    write(corpus / "a.txt", A)
    write(corpus / "b.txt", B)
    assert run("pairs", corpus, "--index", idx, "--max-bytes", N).exit_code == 0
    r = run("dedup", "--index", idx)
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""
    assert "b.txt: only its first" in r.stderr


def test_dedup_lists_a_file_read_whole_even_when_the_one_kept_was_cut(run, tmp_path):
    corpus = tmp_path / "c"
    write(corpus / "a.txt", A)  # cut at N: kept (the smallest id)
    write(corpus / "b.txt", PREFIX)  # N bytes: read whole
    r = run("dedup", corpus, "--index", tmp_path / "idx", "--max-bytes", N)
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "b.txt\n"


def test_dedup_of_json_lines_members_cut_and_whole(run, tmp_path):
    corpus = tmp_path / "c"
    short = "a short text of its own, stored twice in the data set, word for word"
    lines = [{"text": A}, {"text": B}, {"text": short}, {"text": short}]
    write(corpus / "data.jsonl", "".join(json.dumps(x) + "\n" for x in lines))
    r = run("dedup", corpus, "--index", tmp_path / "idx", "--max-bytes", N, "-f", "tsv")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "data.jsonl/#4\tdata.jsonl/#3\n"  # the whole texts only
    assert "data.jsonl/#2: only its first" in r.stderr
    out = tmp_path / "out"
    r = run("dedup", corpus, "--index", tmp_path / "idx", "--write", out)
    assert r.exit_code == 0, r.stderr
    assert [json.loads(x)["text"] for x in (out / "data.jsonl").read_text().splitlines()] == [A, B, short]


def test_dedup_of_a_cut_file_with_bad_utf8(run, tmp_path):
    corpus = tmp_path / "c"
    bad = b"\xff"  # in the first N bytes: status "replaced", which does not say the file was cut
    write(corpus / "a.txt", A.encode()[:100] + bad + A.encode()[100:])
    write(corpus / "b.txt", B.encode()[:100] + bad + B.encode()[100:])
    r = run("dedup", corpus, "--index", tmp_path / "idx", "--max-bytes", N)
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""


def test_with_quiet_one_line_still_says_that_some_are_left_out(run, tmp_path):
    """-q hides the warnings (which name them), not the fact: a list shorter than what can go says so."""
    corpus, idx = tmp_path / "c", tmp_path / "idx"
    write(corpus / "a.txt", A)
    write(corpus / "b.txt", B)
    r = run("dedup", corpus, "--index", idx, "--max-bytes", N, "-q")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""
    assert r.stderr == (
        "simdoc: 1 warning hidden by -q, of documents left out of the list (changed since indexed, outside the corpus, "
        "compared by their first --max-bytes only, or the kept one's own file): run without -q to read it\n"
    )
    loud = run("dedup", corpus, "--index", idx, "--max-bytes", N)
    assert "hidden by -q" not in loud.stderr and "b.txt: only its first" in loud.stderr


def test_dedup_of_parquet_rows_cut_and_whole(run, tmp_path):
    # --max-bytes cuts each Parquet text, not the file: the file's digest is of all its bytes, and
    # dedup once took it of the first N, so every row was "changed or gone since it was indexed".
    import pytest

    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    corpus = tmp_path / "c"
    corpus.mkdir()
    short = "a short text of its own, stored twice in the data set, word for word"
    pq.write_table(pa.table({"text": [A, B, short, short]}), corpus / "data.parquet")
    r = run("dedup", corpus, "--index", tmp_path / "idx", "--max-bytes", N, "-f", "tsv")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "data.parquet/#4\tdata.parquet/#3\n"  # the whole texts only
    assert "data.parquet/#2: only its first" in r.stderr
    assert "changed or gone" not in r.stderr
    out = tmp_path / "out"
    r = run("dedup", corpus, "--index", tmp_path / "idx", "--write", out)
    assert r.exit_code == 0, r.stderr
    assert pq.read_table(out / "data.parquet").column("text").to_pylist() == [A, B, short]
