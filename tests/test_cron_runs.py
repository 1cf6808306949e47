"""Nightly `--new` reports (issue 27): a rebuild is no news (item 9)."""

from __future__ import annotations

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
