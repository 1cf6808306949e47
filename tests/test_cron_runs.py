"""Nightly `--new` reports (issue 27): a rebuild is no news (item 9); a run marker (item 10)."""

from __future__ import annotations

import json
import re

from tests.conftest import TEXT_A, TEXT_C, write

TEXT_D = TEXT_C.replace("rope", "string")  # a near copy of c.txt


def corpus_of(root, **docs):
    for name, text in docs.items():
        write(root / f"{name}.txt", text)
    return root


def test_a_rebuild_of_unchanged_documents_reports_nothing_new(run, tmp_path):
    corpus = corpus_of(tmp_path / "c", a=TEXT_A, b=TEXT_A, c=TEXT_C)
    idx = tmp_path / "idx"
    first = run("pairs", corpus, "--index", idx, "--new")
    assert first.exit_code == 0, first.stderr
    assert first.stdout == "a.txt\tb.txt\t1.0000\t1.0000\tboth\n"
    rebuilt = run("pairs", corpus, "--index", idx, "--new", "--rebuild")
    assert rebuilt.exit_code == 0, rebuilt.stderr
    assert rebuilt.stdout == ""
    # Other parameters (a rebuild with word shingles): the texts are the same, still no news.
    words = run("pairs", corpus, "--index", idx, "--new", "--rebuild", "--unit", "word", "--k", "2")
    assert words.exit_code == 0, words.stderr
    assert words.stdout == ""
    assert run("pairs", corpus, "--index", idx).stdout == "a.txt\tb.txt\t1.0000\t1.0000\n"


def test_a_rebuild_keeps_what_is_not_reported_yet_and_reports_what_changed(run, tmp_path):
    corpus = corpus_of(tmp_path / "c", a=TEXT_A, b=TEXT_A, c=TEXT_C)
    idx = tmp_path / "idx"
    assert run("pairs", corpus, "--index", idx, "--new", "-q").stdout == "a.txt\tb.txt\t1.0000\t1.0000\tboth\n"
    # d.txt arrives on a night whose run printed no --new report (a run without --new) ...
    write(corpus / "d.txt", TEXT_D)
    assert run("pairs", corpus, "--index", idx, "-q").exit_code == 0
    # ... and b.txt changes before a rebuild: both are news to the next --new report.
    write(corpus / "b.txt", TEXT_A + "And one more sentence about it.\n")
    r = run("pairs", corpus, "--index", idx, "--new", "--rebuild", "-t", "0.5")
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert [line.split("\t")[:2] + line.split("\t")[4:] for line in lines] == [["c.txt", "d.txt", "b"], ["a.txt", "b.txt", "b"]]
    assert run("pairs", corpus, "--index", idx, "--new", "--rebuild").stdout == ""


# ---------------------------------------------------------------- item 10: a run marker

STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"


def test_stamp_ends_every_record_with_the_runs_time_in_every_format(run, tmp_path):
    corpus = corpus_of(tmp_path / "c", a=TEXT_A, b=TEXT_A, c=TEXT_C, d=TEXT_D)
    idx = tmp_path / "idx"
    r = run("pairs", corpus, "--index", idx, "--new", "--stamp", "-t", "0.5", "-f", "tsv")
    assert r.exit_code == 0, r.stderr
    lines = [line.split("\t") for line in r.stdout.splitlines()]
    assert [f[:2] + f[4:5] for f in lines] == [["a.txt", "b.txt", "both"], ["c.txt", "d.txt", "both"]]
    assert len({f[5] for f in lines}) == 1 and re.fullmatch(STAMP, lines[0][5])
    again = run("pairs", "--index", idx, "--stamp", "-f", "csv")  # without --new: the 5th field is run
    header, *rows = again.stdout.splitlines()
    assert header == "doc_a,doc_b,estimated,jaccard,run"
    assert all(re.fullmatch(STAMP, row.split(",")[4]) for row in rows) and len(rows) == 2
    js = run("pairs", "--index", idx, "--stamp", "--new", "-f", "jsonl")
    assert js.stdout == ""  # reported in full above: nothing is new
    js = run("pairs", "--index", idx, "--stamp", "-f", "jsonl")
    recs = [json.loads(line) for line in js.stdout.splitlines()]
    assert [list(rec) for rec in recs] == [["doc_a", "doc_b", "estimated", "jaccard", "run"]] * 2
    nul = run("pairs", "--index", idx, "--stamp", "-0")
    fields = nul.stdout.split("\0")
    assert len(fields) == 2 * 5 + 1 and re.fullmatch(STAMP, fields[4])
    head = run("pairs", "--index", idx, "--stamp", "--header", "--new", "-f", "tsv")
    assert head.stdout == "doc_a\tdoc_b\testimated\tjaccard\tnew\trun\n"
    # Without --stamp, the records are as they were: four fields.
    plain = run("pairs", "--index", idx, "-f", "tsv")
    assert [len(line.split("\t")) for line in plain.stdout.splitlines()] == [4, 4]


def test_new_is_described_as_it_behaves_in_help_and_readme(run):
    """Issue 27.11: --new reports what is new since the last --new report written in full, not since
    "the latest update"."""
    from tests.conftest import REPO

    help_text = " ".join(run("pairs", "--help").stdout.split())
    assert "since the last --new report written in full" in help_text
    assert "latest update" not in help_text
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    (row,) = [line for line in readme.splitlines() if line.startswith("| `--new` |")]
    assert "since the last `--new` report written in full" in row and "latest update" not in row


def test_a_night_with_nothing_new_reads_no_signature_and_the_next_checks_them(run, tmp_path):
    """A --new run that finds nothing new prints no pair, and so reads (and checks) no signature
    file: a quiet night's cost. The next night with a new document reads it, and a damaged one
    is then an error (exit 4), as in any run that scores a pair."""
    corpus = corpus_of(tmp_path / "c", a=TEXT_A, b=TEXT_A, c=TEXT_C)
    idx = tmp_path / "idx"
    assert run("pairs", corpus, "--index", idx, "--new", "-q").exit_code == 0
    manifest = json.loads((idx / "manifest.json").read_text())
    name = manifest["stages"]["signature"]["roles"]["signatures"]
    data = bytearray((idx / name).read_bytes())
    data[-1] ^= 0xFF  # a bit flipped in the last row: the size and header stay right, the CRC does not
    (idx / name).write_bytes(bytes(data))
    quiet = run("pairs", corpus, "--index", idx, "--new")
    assert quiet.exit_code == 0 and quiet.stdout == "", quiet.stderr
    write(corpus / "d.txt", TEXT_D)
    news = run("pairs", corpus, "--index", idx, "--new")
    assert news.exit_code == 4 and "checksum mismatch" in news.stderr and name in news.stderr, news.stderr


def test_a_night_with_nothing_new_reads_no_bucket_and_says_the_large_ones_as_any_run(run, tmp_path, monkeypatch):
    """A --new run that finds nothing new reads no band key or bucket either: the sizes of the
    largest buckets it warns of are those the index stage kept. The warning is the one a run
    that walks the buckets gives. The next night with a new document reads the buckets (a
    damaged file is banded again)."""
    import simdoc.buckets

    monkeypatch.setattr(simdoc.buckets, "LARGE_BUCKET", 2)  # (10,000 documents in one bucket, made small)
    corpus = corpus_of(tmp_path / "c", a=TEXT_C, b=TEXT_D, c=TEXT_A)
    idx = tmp_path / "idx"
    first = run("pairs", corpus, "--index", idx, "--new")
    assert first.exit_code == 0 and first.stdout.startswith("a.txt\tb.txt\t"), first.stderr
    said = [ln for ln in first.stderr.splitlines() if "LSH bucket" in ln]
    # (the noun's plural: "2 LSH buckets hold", not "2 LSHs bucket hold")
    assert said and re.search(r"\b\d+ LSH buckets hold 10,000 or more documents \(largest: 2\)", said[0]), first.stderr
    walked = run("pairs", corpus, "--index", idx)  # every bucket walked, nothing kept from the index stage
    assert [ln for ln in walked.stderr.splitlines() if "LSH bucket" in ln] == said
    stage = json.loads((idx / "manifest.json").read_text())["stages"]["index"]
    for role in ("bands", "buckets"):
        name = stage["roles"][role]
        data = bytearray((idx / name).read_bytes())
        data[-1] ^= 0xFF  # the size and header stay right, the CRC does not
        (idx / name).write_bytes(bytes(data))
    quiet = run("pairs", corpus, "--index", idx, "--new")
    assert quiet.exit_code == 0 and quiet.stdout == "", quiet.stderr
    assert [ln for ln in quiet.stderr.splitlines() if "LSH bucket" in ln] == said
    # The next night, a document arrives: the update bands again what it cannot merge (the damaged
    # files), and prints what a fresh index prints.
    write(corpus / "e.txt", TEXT_A + "And one more line.\n")
    news = run("pairs", corpus, "--index", idx, "--new")
    assert news.exit_code == 0 and "e.txt" in news.stdout, news.stderr
    fresh = run("pairs", corpus, "--index", tmp_path / "fresh")
    assert run("pairs", corpus, "--index", idx).stdout == fresh.stdout and fresh.stdout.count("\n") == 2


def test_an_index_of_format_6_walks_its_buckets_on_a_quiet_night_until_its_next_update(run, tmp_path, monkeypatch):
    """Format 6 kept no bucket sizes: its quiet night reads and walks the buckets as before (a
    damaged one is then an error), and its next update bands again and keeps them."""
    import simdoc.buckets
    from simdoc.store.manifest import dump

    monkeypatch.setattr(simdoc.buckets, "LARGE_BUCKET", 2)
    corpus = corpus_of(tmp_path / "c", a=TEXT_C, b=TEXT_D, c=TEXT_A)
    idx = tmp_path / "idx"
    first = run("pairs", corpus, "--index", idx, "--new")
    said = [ln for ln in first.stderr.splitlines() if "LSH bucket" in ln]
    manifest = json.loads((idx / "manifest.json").read_text())
    for key in ("largest_bucket", "large_buckets", "banded"):
        del manifest["stages"]["index"][key]
    manifest["format_version"] = 6
    (idx / "manifest.json").write_bytes(dump(manifest))
    quiet = run("pairs", corpus, "--index", idx, "--new")
    assert quiet.exit_code == 0 and quiet.stdout == "" and said
    assert [ln for ln in quiet.stderr.splitlines() if "LSH bucket" in ln] == said  # walked, the same
    name = manifest["stages"]["index"]["roles"]["buckets"]
    data = bytearray((idx / name).read_bytes())
    data[-1] ^= 0xFF
    (idx / name).write_bytes(bytes(data))
    damaged = run("pairs", corpus, "--index", idx, "--new")
    assert damaged.exit_code == 4 and "checksum mismatch" in damaged.stderr and name in damaged.stderr, damaged.stderr
    (idx / name).write_bytes(bytes(data[:-1]) + bytes([data[-1] ^ 0xFF]))
    write(corpus / "e.txt", TEXT_A + "And one more line.\n")
    assert run("pairs", corpus, "--index", idx, "--new").exit_code == 0
    stage = json.loads((idx / "manifest.json").read_text())["stages"]["index"]
    assert stage["banded"] == 4 and json.loads((idx / "manifest.json").read_text())["format_version"] == 7
