"""simdoc query: lookups that agree with pairs and never change the index."""

import hashlib
from pathlib import Path

from click.testing import CliRunner

from simdoc.cli import cli

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "sample_corpus"


def snapshot(index: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(index.iterdir()) if p.is_file()}


def build(tmp_path, *extra) -> Path:
    idx = tmp_path / "idx"
    r = CliRunner().invoke(cli, ["pairs", str(SAMPLE), "--index", str(idx), "-q", *extra])
    assert r.exit_code == 0, r.stderr
    return idx


def test_query_agrees_with_pairs_for_every_document(tmp_path):
    idx = build(tmp_path, "--threshold", "0.5")
    runner = CliRunner()
    pairs = runner.invoke(cli, ["pairs", "--index", str(idx), "--threshold", "0.5"]).stdout.splitlines()
    expected: dict[str, set] = {}
    for line in pairs:
        a, b, est, jac = line.split("\t")
        expected.setdefault(a, set()).add((b, est, jac))
        expected.setdefault(b, set()).add((a, est, jac))
    files = sorted(p for p in SAMPLE.rglob("*") if p.is_file())
    before = snapshot(idx)
    r = runner.invoke(cli, ["query", *map(str, files), "--index", str(idx), "--threshold", "0.5"])
    assert r.exit_code == 0, r.stderr
    got: dict[str, set] = {}
    for line in r.stdout.splitlines():
        q, doc, est, jac = line.split("\t")
        qid = Path(q).relative_to(SAMPLE).as_posix()
        if doc == qid:
            assert (est, jac) == ("1.0000", "1.0000")  # every document finds itself
            continue
        got.setdefault(qid, set()).add((doc, est, jac))
    assert got == expected
    assert snapshot(idx) == before  # the index is untouched
    assert f"simdoc: {len(files)} queries" in r.stderr


def test_query_text_from_stdin_and_formats(tmp_path):
    idx = build(tmp_path, "--scheme", "classic")  # the estimates below are classic MinHash's
    text = (SAMPLE / "web" / "harbor-festival.txt").read_text(encoding="utf-8")
    r = CliRunner().invoke(cli, ["query", "-", "--index", str(idx), "--format", "jsonl"], input=text)
    assert r.exit_code == 0, r.stderr
    assert r.stdout.splitlines() == [
        '{"query": "-", "doc": "web/harbor-festival.txt", "estimated": 1.0, "jaccard": 1.0}',
        '{"query": "-", "doc": "web/mirror-harbor-festival.txt", "estimated": 0.7109, "jaccard": 0.7334}',
    ]
    csv = CliRunner().invoke(cli, ["query", "-", "--index", str(idx), "--format", "csv"], input=text)
    assert csv.stdout.splitlines()[0] == "query,doc,estimated,jaccard"


def test_query_files_from_nul_separated(tmp_path):
    idx = build(tmp_path)
    paths = [SAMPLE / "misc" / "red-lentil-soup.txt", SAMPLE / "misc" / "todo.txt"]
    data = b"\0".join(str(p).encode() for p in paths) + b"\0"
    r = CliRunner().invoke(cli, ["query", "--files0-from", "-", "--index", str(idx)], input=data)
    assert r.exit_code == 0, r.stderr
    docs = [line.split("\t")[1] for line in r.stdout.splitlines()]
    assert docs == ["misc/backup/red-lentil-soup-copy.txt", "misc/red-lentil-soup.txt", "misc/todo.txt"]


def test_query_of_nothing_useful(tmp_path):
    idx = build(tmp_path)
    runner = CliRunner()
    empty = runner.invoke(cli, ["query", "-", "--index", str(idx)], input="   \n")
    assert empty.exit_code == 0 and empty.stdout == ""
    assert "no shingles" in empty.stderr
    unrelated = runner.invoke(cli, ["query", "-", "--index", str(idx)], input="Zebra quagga okapi " * 20)
    assert unrelated.exit_code == 0 and unrelated.stdout == ""
    none = runner.invoke(cli, ["query", "--index", str(idx)])
    assert none.exit_code == 2
    missing = runner.invoke(cli, ["query", "-", "--index", str(tmp_path / "nope")], input="x")
    assert missing.exit_code == 4 and "no simdoc index" in missing.stderr
    gone = runner.invoke(cli, ["query", str(tmp_path / "absent.txt"), "--index", str(idx)])
    assert gone.exit_code == 3 and "absent.txt" in gone.stderr


def test_query_skips_a_changed_or_vanished_document_with_a_warning(tmp_path):
    import shutil

    corpus = tmp_path / "corpus"
    shutil.copytree(SAMPLE, corpus)
    idx = tmp_path / "idx"
    runner = CliRunner()
    assert runner.invoke(cli, ["pairs", str(corpus), "--index", str(idx), "-q"]).exit_code == 0
    text = (SAMPLE / "web" / "harbor-festival.txt").read_text(encoding="utf-8")
    before = runner.invoke(cli, ["query", "-", "--index", str(idx)], input=text)
    docs = [line.split("\t")[1] for line in before.stdout.splitlines()]
    assert docs == ["web/harbor-festival.txt", "web/mirror-harbor-festival.txt"]
    # The mirror is edited, the original deleted: neither is compared against text it no longer has.
    mirror = corpus / "web" / "mirror-harbor-festival.txt"
    mirror.write_text(mirror.read_text(encoding="utf-8") + "\nAn edit after indexing.\n", encoding="utf-8")
    (corpus / "web" / "harbor-festival.txt").unlink()
    after = runner.invoke(cli, ["query", "-", "--index", str(idx)], input=text)
    assert after.exit_code == 0, after.stderr
    assert after.stdout == ""
    assert "web/mirror-harbor-festival.txt: changed or gone since it was indexed" in after.stderr
    assert "web/harbor-festival.txt: changed or gone since it was indexed" in after.stderr


def test_queries_in_small_batches_and_a_small_cache_give_the_same_output(tmp_path, monkeypatch):
    """Issue 27, item 6: the matches are given a batch at a time, in the order and format of one batch."""
    from simdoc.reports import query as query_module

    idx = build(tmp_path, "--threshold", "0.5")
    files = [str(p) for p in sorted(SAMPLE.rglob("*.txt"))]
    runner = CliRunner()
    whole = runner.invoke(cli, ["query", *files, "--index", str(idx), "--threshold", "0.5"])
    assert whole.exit_code == 0, whole.stderr
    harbour = SAMPLE / "web" / "harbor-festival.txt"
    monkeypatch.setattr(query_module, "BATCH_QUERIES", 3)
    monkeypatch.setattr(query_module, "BATCH_BYTES", 2000)
    monkeypatch.setattr(query_module, "CACHE_BYTES", 1)  # every document read again when found again
    small = runner.invoke(cli, ["query", *files, "--index", str(idx), "--threshold", "0.5"])
    assert small.exit_code == 0, small.stderr
    assert small.stdout == whole.stdout and len(whole.stdout.splitlines()) > len(files)
    assert f"simdoc: {len(files)} queries" in small.stderr
    # A candidate that is gone is warned about once, however often it is found.
    corpus = tmp_path / "copy"
    import shutil

    shutil.copytree(SAMPLE, corpus)
    idx2 = tmp_path / "idx2"
    assert runner.invoke(cli, ["pairs", str(corpus), "--index", str(idx2), "-q"]).exit_code == 0
    (corpus / "web" / "mirror-harbor-festival.txt").unlink()
    r = runner.invoke(cli, ["query", str(harbour), str(harbour), str(harbour), "--index", str(idx2)])
    assert r.exit_code == 0, r.stderr
    assert r.stderr.count("web/mirror-harbor-festival.txt: changed or gone since it was indexed") == 1
    assert r.stdout.count("\tweb/harbor-festival.txt\t1.0000\t1.0000\n") == 3 and "mirror" not in r.stdout


def test_files_that_gave_no_query_are_counted_and_never_silent(tmp_path):
    """A binary file, a folder, a JSON Lines file with no line of text named among the queries:
    each warned about, counted in the summary, and said in one line even with -q."""
    idx = build(tmp_path)
    (tmp_path / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0binary")
    (tmp_path / "empty.jsonl").write_bytes(b"")
    names = [str(tmp_path / "img.png"), str(SAMPLE / "essays"), str(tmp_path / "empty.jsonl"), str(SAMPLE / "misc" / "red-lentil-soup.txt")]
    r = CliRunner().invoke(cli, ["query", *names, "--index", str(idx)])
    assert r.exit_code == 0 and "red-lentil-soup-copy.txt" in r.stdout, r.stderr
    assert "img.png: binary file" in r.stderr and "essays: a directory" in r.stderr
    assert "simdoc: 1 query (3 files gave none: see the warnings), " in r.stderr
    quiet = CliRunner().invoke(cli, ["query", *names, "--index", str(idx), "-q"])
    assert quiet.exit_code == 0 and quiet.stdout == r.stdout
    assert quiet.stderr == "simdoc: 3 files named gave no query; run without -q to read why\n"
