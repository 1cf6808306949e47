"""The simdoc command line: every subcommand, output formats, options and errors."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SAMPLE_CORPUS, TEXT_A, assert_clean_error, records, summary, write

from simdoc import __version__
from simdoc.params import DEFAULT_THRESHOLD

NUM = re.compile(r"^\d\.\d{4}$")
PRESS_PAIR = ("press/hosepipe-ban-lifted.txt", "press/treatment-works-upgrade.txt")


@pytest.fixture(scope="module")
def sample_default(tmp_path_factory):
    """`pairs sample_corpus` with defaults, run once: (result, index path)."""
    from click.testing import CliRunner

    from simdoc.cli import cli

    idx = tmp_path_factory.mktemp("sample") / "idx"
    res = CliRunner().invoke(cli, ["pairs", str(SAMPLE_CORPUS), "--index", str(idx)])
    assert res.exit_code == 0, res.stderr
    return res, idx


# ---------------------------------------------------------------- subcommands


def test_step_by_step_equals_one_command(run, tmp_path):
    step = tmp_path / "step"
    r = run("shingle", SAMPLE_CORPUS, "--index", step)
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""
    assert r.stderr.startswith("shingle: ") and str(step) in r.stderr
    r = run("signature", "--index", step)
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "" and r.stderr.startswith("signature: ")
    r = run("index", "--index", step)
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "" and r.stderr.startswith("index: ")
    stepwise = run("pairs", "--index", step)
    assert stepwise.exit_code == 0, stepwise.stderr

    one = run("pairs", SAMPLE_CORPUS, "--index", tmp_path / "one")
    assert one.exit_code == 0, one.stderr
    assert stepwise.stdout != ""
    assert stepwise.stdout == one.stdout


def test_step_by_step_with_threshold_equals_one_command(run, tmp_path):
    step = tmp_path / "step"
    assert run("shingle", SAMPLE_CORPUS, "--index", step).exit_code == 0
    assert run("signature", "--index", step).exit_code == 0
    assert run("index", "--index", step, "--threshold", "0.8").exit_code == 0
    stepwise = run("pairs", "--index", step, "--threshold", "0.8")
    one = run("pairs", SAMPLE_CORPUS, "--index", tmp_path / "one", "--threshold", "0.8")
    assert stepwise.exit_code == one.exit_code == 0
    assert stepwise.stdout == one.stdout
    assert len(records(one)) == 2  # the exact copy and the policy revision


def test_pairs_with_corpus_on_built_index_is_up_to_date(run, small_corpus, tmp_path):
    idx = tmp_path / "idx"
    first = run("pairs", small_corpus, "--index", idx)
    second = run("pairs", small_corpus, "--index", idx)
    third = run("pairs", "--index", idx)
    assert first.exit_code == second.exit_code == third.exit_code == 0
    assert first.stdout == second.stdout == third.stdout == "a.txt\tb.txt\t1.0000\t1.0000\n"


def test_index_reports_banding(run, small_corpus, tmp_path):
    idx = tmp_path / "idx"
    assert run("shingle", small_corpus, "--index", idx, "-q").exit_code == 0
    assert run("signature", "--index", idx, "-q").exit_code == 0
    r = run("index", "--index", idx, "--threshold", "0.8")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""
    line = r.stderr.strip()
    assert re.search(r"bands=\d+ rows=\d+", line), line
    assert re.search(r"midpoint \(1/b\)\^\(1/r\)=0\.\d{3}", line), line
    for s in ("0.7", "0.8", "0.9"):
        assert re.search(rf"P\(J={s}\)=[01]\.\d{{3}}", line), line
    # The chosen banding reaches the 0.95 recall at the threshold.
    p_at_t = float(re.search(r"P\(J=0\.8\)=([01]\.\d{3})", line).group(1))
    assert p_at_t >= 0.95


def test_index_explicit_bands_rows(run, small_corpus, tmp_path):
    idx = tmp_path / "idx"
    assert run("shingle", small_corpus, "--index", idx, "-q").exit_code == 0
    assert run("signature", "--index", idx, "-q").exit_code == 0
    r = run("index", "--index", idx, "--bands", "20", "--rows", "5")
    assert r.exit_code == 0, r.stderr
    assert "bands=20 rows=5" in r.stderr
    assert "midpoint (1/b)^(1/r)=0.549" in r.stderr  # (1/20)^(1/5)
    assert "P(J=" in r.stderr
    p = run("pairs", "--index", idx)
    assert p.exit_code == 0
    assert p.stdout == "a.txt\tb.txt\t1.0000\t1.0000\n"



def test_threshold_replaces_hand_banding(run, small_corpus, tmp_path):
    """`--threshold` alone bands for that threshold, even over bands chosen by hand before."""
    idx = tmp_path / "idx"
    assert run("shingle", small_corpus, "--index", idx, "-q").exit_code == 0
    assert run("signature", "--index", idx, "-q").exit_code == 0
    assert run("index", "--index", idx, "--bands", "12", "--rows", "7", "--threshold", "0.8").exit_code == 0
    # The same threshold keeps the hand banding ...
    same = run("index", "--index", idx, "--threshold", "0.8")
    assert same.exit_code == 0 and "bands=12 rows=7" in same.stderr and "up to date" in same.stderr
    # ... another one is banded for.
    other = run("index", "--index", idx, "--threshold", "0.9")
    assert other.exit_code == 0, other.stderr
    assert "bands=12 rows=7" not in other.stderr and "up to date" not in other.stderr
    assert "P(J=0.9)=" in other.stderr
    # A run without --threshold keeps the threshold the index was banded for (issue 27.1),
    # and says which it used.
    p = run("pairs", "--index", idx, "-v")
    assert p.exit_code == 0
    assert "(set jaccard >= 0.9)" in p.stderr and "index: up to date" in p.stderr
    p9 = run("pairs", "--index", idx, "-t", "0.9")
    assert p9.exit_code == 0 and "set jaccard >= 0.9" in p9.stderr


# ---------------------------------------------------------------- formats


def test_tsv_format(run, tmp_path, sample_default):
    default, _ = sample_default
    r = run("pairs", SAMPLE_CORPUS, "--index", tmp_path / "idx", "--format", "tsv")
    assert r.exit_code == 0
    assert r.stdout == default.stdout  # tsv is the default off a terminal
    rows = records(r)
    assert rows
    keys = []
    for row in rows:
        assert len(row) == 4, row
        a, b, est, jac = row
        assert a < b
        assert NUM.match(est) and NUM.match(jac), row
        assert float(jac) >= DEFAULT_THRESHOLD
        keys.append((-float(jac), a, b))
    assert keys == sorted(keys)


def test_sort_order_ties_by_names(run, tmp_path):
    corpus = tmp_path / "c"
    # Three exact copies: three pairs at 1.0000, ordered by names.
    for name in ("z.txt", "m.txt", "a.txt"):
        write(corpus / name, TEXT_A)
    write(corpus / "other.txt", "nothing at all like the fox sentence, only kelp and gulls\n")
    r = run("pairs", corpus, "--index", tmp_path / "idx")
    assert r.exit_code == 0
    assert r.stdout == (
        "a.txt\tm.txt\t1.0000\t1.0000\n"
        "a.txt\tz.txt\t1.0000\t1.0000\n"
        "m.txt\tz.txt\t1.0000\t1.0000\n"
    )


def test_csv_format(run, tmp_path, sample_default):
    default, _ = sample_default
    r = run("pairs", SAMPLE_CORPUS, "--index", tmp_path / "idx", "--format", "csv")
    assert r.exit_code == 0
    assert r.stdout.splitlines()[0] == "doc_a,doc_b,estimated,jaccard"
    rows = list(csv.reader(io.StringIO(r.stdout)))[1:]
    assert rows == records(default)


def test_jsonl_format(run, tmp_path, sample_default):
    default, _ = sample_default
    r = run("pairs", SAMPLE_CORPUS, "--index", tmp_path / "idx", "-f", "jsonl")
    assert r.exit_code == 0
    recs = [json.loads(line) for line in r.stdout.splitlines()]
    assert recs
    for rec in recs:
        assert set(rec) == {"doc_a", "doc_b", "estimated", "jaccard"}
        assert isinstance(rec["estimated"], float) and isinstance(rec["jaccard"], float)
    as_tsv = [[d["doc_a"], d["doc_b"], f"{d['estimated']:.4f}", f"{d['jaccard']:.4f}"] for d in recs]
    assert as_tsv == records(default)


def test_no_verify_tsv(run, tmp_path):
    r = run("pairs", SAMPLE_CORPUS, "--index", tmp_path / "idx", "--no-verify")
    assert r.exit_code == 0
    rows = records(r)
    assert rows
    for a, b, est, jac in rows:
        assert a < b
        assert NUM.match(est) and float(est) >= DEFAULT_THRESHOLD
        assert jac == ""
    ests = [-float(row[2]) for row in rows]
    assert ests == sorted(ests)
    assert "pairs (estimated)" in r.stderr


def test_no_verify_jsonl_and_csv(run, tmp_path):
    idx = tmp_path / "idx"
    j = run("pairs", SAMPLE_CORPUS, "--index", idx, "--no-verify", "-f", "jsonl")
    assert j.exit_code == 0
    recs = [json.loads(line) for line in j.stdout.splitlines()]
    assert recs and all(rec["jaccard"] is None for rec in recs)
    assert all(set(rec) == {"doc_a", "doc_b", "estimated", "jaccard"} for rec in recs)
    c = run("pairs", "--index", idx, "--no-verify", "-f", "csv")
    assert c.exit_code == 0
    rows = list(csv.reader(io.StringIO(c.stdout)))
    assert rows[0] == ["doc_a", "doc_b", "estimated", "jaccard"]
    assert all(row[3] == "" for row in rows[1:])


def test_all_candidates(run, tmp_path):
    idx = tmp_path / "idx"
    # One row per band: almost every pair sharing boilerplate becomes a candidate.
    base = run("pairs", SAMPLE_CORPUS, "--index", idx, "--bands", "128", "--rows", "1")
    every = run("pairs", SAMPLE_CORPUS, "--index", idx, "--bands", "128", "--rows", "1", "--all-candidates")
    assert base.exit_code == every.exit_code == 0
    rows = records(every)
    n_cand = int(summary(every)["cand"])
    assert len(rows) == n_cand == int(summary(every)["pairs"])
    assert len(rows) >= len(records(base))
    assert set(base.stdout.splitlines()) <= set(every.stdout.splitlines())
    for a, b, est, jac in rows:
        assert a < b and NUM.match(est) and NUM.match(jac)
    below = {(a, b): jac for a, b, est, jac in rows if float(jac) < DEFAULT_THRESHOLD}
    assert below, "a pair below the threshold must be printed"
    assert below[PRESS_PAIR] == "0.2347"
    assert "all candidates" in every.stderr


def test_all_candidates_default_banding(run, tmp_path):
    idx = tmp_path / "idx"
    base = run("pairs", SAMPLE_CORPUS, "--index", idx)
    every = run("pairs", SAMPLE_CORPUS, "--index", idx, "--all-candidates")
    assert base.exit_code == every.exit_code == 0
    assert len(records(every)) == int(summary(every)["cand"]) == int(summary(base)["cand"])
    assert len(records(every)) >= len(records(base))
    assert set(base.stdout.splitlines()) <= set(every.stdout.splitlines())


def test_measure_bag(run, tmp_path):
    r = run("pairs", SAMPLE_CORPUS, "--index", tmp_path / "idx", "--measure", "bag", "--all-candidates")
    assert r.exit_code == 0, r.stderr
    rows = records(r)
    assert rows
    bag = {(a, b): float(jac) for a, b, est, jac in rows}
    assert all(0.0 <= v <= 0.5 for v in bag.values())
    assert bag[("misc/backup/red-lentil-soup-copy.txt", "misc/red-lentil-soup.txt")] == 0.5
    assert "0.5000" in r.stdout.splitlines()[0]


def test_measure_bag_threshold(run, small_corpus, tmp_path):
    r = run("pairs", small_corpus, "--index", tmp_path / "idx", "--measure", "bag", "--threshold", "0.5")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "a.txt\tb.txt\t1.0000\t0.5000\n"
    assert "bag jaccard >= 0.5" in r.stderr


@pytest.mark.parametrize("t", ["0.6", "1"])
def test_measure_bag_threshold_above_half_is_usage_error(run, small_corpus, tmp_path, t):
    r = run("pairs", small_corpus, "--index", tmp_path / "idx", "--measure", "bag", "--threshold", t)
    assert_clean_error(r, 2, "bag", "0.5")


def test_measure_bag_does_not_change_later_default_threshold(run, tmp_path, sample_default):
    """A bag run re-bands the index; a later plain run must still use the set default."""
    default, _ = sample_default
    idx = tmp_path / "idx"
    assert run("pairs", SAMPLE_CORPUS, "--index", idx, "--measure", "bag").exit_code == 0
    after = run("pairs", SAMPLE_CORPUS, "--index", idx)
    assert after.exit_code == 0
    # The index holds a bag threshold only: the set default, named as such.
    assert f"(set jaccard >= {DEFAULT_THRESHOLD:g}, the default)" in after.stderr, after.stderr
    assert after.stdout == default.stdout


# ---------------------------------------------------------------- stdout / stderr


def test_stdout_records_only_and_one_line_summary(sample_default):
    r, _ = sample_default
    assert r.stdout.endswith("\n")
    for line in r.stdout.splitlines():
        assert len(line.split("\t")) == 4
        assert not line.startswith("simdoc")
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    m = summary(r)
    assert lines[0].startswith("simdoc:")
    for word in ("documents", "candidates", "pairs"):
        assert word in lines[0]
    assert int(m["pairs"]) == len(r.stdout.splitlines())
    assert int(m["cand"]) >= int(m["pairs"])


@pytest.mark.parametrize("flag", ["--quiet", "-q"])
def test_quiet(run, small_corpus, tmp_path, flag):
    idx = tmp_path / "idx"
    for args in (
        ("shingle", small_corpus, "--index", idx),
        ("signature", "--index", idx),
        ("index", "--index", idx),
        ("pairs", "--index", idx),
        ("pairs", small_corpus, "--index", idx, "--threshold", "0.9"),
    ):
        r = run(*args, flag)
        assert r.exit_code == 0, (args, r.stderr)
        assert r.stderr == "", (args, r.stderr)
    assert r.stdout == "a.txt\tb.txt\t1.0000\t1.0000\n"


def test_quiet_still_prints_errors(run, tmp_path):
    r = run("pairs", tmp_path / "missing", "--index", tmp_path / "idx", "-q")
    assert_clean_error(r, 3, "does not exist")


def test_no_pairs_is_success(run, tmp_path):
    corpus = tmp_path / "c"
    write(corpus / "x.txt", "alpha beta gamma delta epsilon zeta eta theta\n")
    write(corpus / "y.txt", "completely different words: kelp, gulls, anchors, rope\n")
    r = run("pairs", corpus, "--index", tmp_path / "idx")
    assert r.exit_code == 0
    assert r.stdout == ""
    assert summary(r)["pairs"] == "0"


# ---------------------------------------------------------------- help, version


@pytest.mark.parametrize("cmd", ["shingle", "signature", "index", "pairs"])
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_subcommand_help(run, cmd, flag):
    r = run(cmd, flag)
    assert r.exit_code == 0
    assert "Example" in r.stdout
    assert f"simdoc {cmd}" in r.stdout
    assert r.stderr == ""


def test_group_help(run):
    r = run("--help")
    assert r.exit_code == 0
    for cmd in ("shingle", "signature", "index", "pairs"):
        assert cmd in r.stdout
    assert "simdoc pairs" in r.stdout  # the usage examples
    assert r.stderr == ""


def test_python_dash_m_help():
    p = subprocess.run([sys.executable, "-m", "simdoc", "--help"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "pairs" in p.stdout and "shingle" in p.stdout
    assert "Usage:" in p.stdout


def test_version(run):
    r = run("--version")
    assert r.exit_code == 0
    assert __version__ in r.stdout
    assert "simdoc" in r.stdout


def test_unknown_command_is_usage_error(run):
    r = run("frobnicate")
    assert r.exit_code == 2
    assert r.stdout == ""
    assert "frobnicate" in r.stderr


def test_pairs_without_corpus_or_index_is_usage_error(run):
    r = run("pairs")
    assert r.exit_code == 2
    assert r.stdout == ""
    assert "CORPUS" in r.stderr and "--index" in r.stderr


# ---------------------------------------------------------------- corpus errors (exit 3)


def test_missing_corpus(run, tmp_path):
    r = run("pairs", tmp_path / "nope", "--index", tmp_path / "idx")
    assert_clean_error(r, 3, "nope", "does not exist")


def test_missing_corpus_shingle(run, tmp_path):
    r = run("shingle", tmp_path / "nope", "--index", tmp_path / "idx")
    assert_clean_error(r, 3, "nope", "does not exist")


@pytest.mark.parametrize("command", ["pairs", "shingle"])
def test_failed_first_run_leaves_no_index_directory(run, tmp_path, command):
    (tmp_path / "empty").mkdir()
    for corpus, message in ((tmp_path / "nope", "does not exist"), (tmp_path / "empty", "no documents")):
        r = run(command, corpus, "--index", tmp_path / "sub" / "idx")
        assert_clean_error(r, 3, message)
        assert not (tmp_path / "sub" / "idx").exists()


def test_failed_run_keeps_an_existing_index(run, tmp_path):
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "a.txt").write_text("the same words here " * 5)
    (corpus / "b.txt").write_text("the same words here " * 5)
    idx = tmp_path / "idx"
    assert run("pairs", corpus, "--index", idx).exit_code == 0
    before = sorted(p.name for p in idx.iterdir())
    assert_clean_error(run("pairs", tmp_path / "nope", "--index", idx), 3, "does not exist")
    assert sorted(p.name for p in idx.iterdir()) == before
    assert run("pairs", corpus, "--index", idx).stdout == "a.txt\tb.txt\t1.0000\t1.0000\n"


def test_corpus_is_a_file(run, tmp_path):
    # A single file is a corpus of one document (its id is its name).
    f = write(tmp_path / "file.txt", "hello")
    r = run("pairs", f, "--index", tmp_path / "idx")
    assert r.exit_code == 0 and r.stdout == ""
    assert "simdoc: 1 document," in r.stderr


def test_empty_corpus(run, tmp_path):
    (tmp_path / "empty").mkdir()
    r = run("pairs", tmp_path / "empty", "--index", tmp_path / "idx")
    assert_clean_error(r, 3, "no documents")


@pytest.mark.parametrize("cmd", ["pairs", "shingle", "clusters", "dedup", "query"])
@pytest.mark.parametrize("listing, flag", [("", "--files-from"), ("\n\n", "--files-from"), ("", "--files0-from")])
def test_an_empty_files_from_list_is_no_documents(run, tmp_path, cmd, listing, flag):
    # Issue 17.8: `find ... | simdoc pairs --files-from -` on a quiet day is exit 3 ("no documents"), not 2.
    idx = tmp_path / "idx"
    r = run(cmd, flag, "-", "--index", idx, input=listing)
    assert_clean_error(r, 3, f"{flag} stdin lists no files: no documents")
    assert "Usage:" not in r.stderr
    assert not idx.exists()


def test_an_empty_files_from_file_is_named(run, tmp_path):
    listing = write(tmp_path / "list.txt", "")
    r = run("pairs", "--files-from", listing, "--index", tmp_path / "idx")
    assert_clean_error(r, 3, f"--files-from {listing} lists no files")


def test_corpus_of_hidden_files_only(run, tmp_path):
    corpus = tmp_path / "hidden"
    write(corpus / ".a.txt", TEXT_A)
    write(corpus / ".git" / "b.txt", TEXT_A)
    r = run("pairs", corpus, "--index", tmp_path / "idx")
    assert_clean_error(r, 3, "no documents")


def test_corpus_of_binary_files_only(run, tmp_path):
    corpus = tmp_path / "bin"
    write(corpus / "a.bin", b"\x89PNG\x00\x01\x02")
    write(corpus / "b.bin", b"\x00\x00\x00")
    r = run("pairs", corpus, "--index", tmp_path / "idx")
    assert_clean_error(r, 3, "no readable documents")


def test_corpus_of_binary_files_only_shows_the_warnings(run, tmp_path):
    """The error's hint says "see the warnings above": they must be printed."""
    corpus = tmp_path / "bin"
    write(corpus / "a.bin", b"\x89PNG\x00\x01\x02")
    write(corpus / "b.bin", b"\x00\x00\x00")
    r = run("pairs", corpus, "--index", tmp_path / "idx")
    assert_clean_error(r, 3, "no readable documents")
    assert "a.bin" in r.stderr and "b.bin" in r.stderr, r.stderr


# ---------------------------------------------------------------- usage errors (exit 2)


def test_bands_rows_larger_than_num_perm(run, small_corpus, tmp_path):
    r = run("pairs", small_corpus, "--index", tmp_path / "idx", "--bands", "30", "--rows", "5")
    assert_clean_error(r, 2, "--bands 30 times --rows 5 = 150 is larger than --num-perm 128")


def test_bands_rows_larger_than_num_perm_index_cmd(run, small_corpus, tmp_path):
    idx = tmp_path / "idx"
    assert run("shingle", small_corpus, "--index", idx, "-q").exit_code == 0
    assert run("signature", "--index", idx, "-q").exit_code == 0
    r = run("index", "--index", idx, "--bands", "30", "--rows", "5")
    assert_clean_error(r, 2, "larger than --num-perm 128")


@pytest.mark.parametrize("opt", [["--bands", "4"], ["--rows", "4"]])
def test_bands_without_rows(run, small_corpus, tmp_path, opt):
    r = run("pairs", small_corpus, "--index", tmp_path / "idx", *opt)
    assert_clean_error(r, 2, "--bands", "--rows")


@pytest.mark.parametrize("t", ["0", "-0.1", "1.5", "nan"])
def test_threshold_out_of_range(run, small_corpus, tmp_path, t):
    r = run("pairs", small_corpus, "--index", tmp_path / "idx", f"--threshold={t}")
    assert_clean_error(r, 2, "threshold")


@pytest.mark.parametrize("t", ["0", "-0.1", "1.5"])
def test_threshold_out_of_range_index_cmd(run, small_corpus, tmp_path, t):
    idx = tmp_path / "idx"
    assert run("pairs", small_corpus, "--index", idx, "-q").exit_code == 0
    r = run("index", "--index", idx, f"--threshold={t}")
    assert_clean_error(r, 2, "threshold")


def test_threshold_one_accepted(run, small_corpus, tmp_path):
    r = run("pairs", small_corpus, "--index", tmp_path / "idx", "--threshold", "1")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "a.txt\tb.txt\t1.0000\t1.0000\n"


def test_jobs_zero_is_usage_error(run, small_corpus, tmp_path):
    r = run("pairs", small_corpus, "--index", tmp_path / "idx", "--jobs", "0")
    assert_clean_error(r, 2, "--jobs")


def test_rebuild_without_corpus_is_usage_error(run, small_corpus, tmp_path):
    idx = tmp_path / "idx"
    assert run("pairs", small_corpus, "--index", idx, "-q").exit_code == 0
    r = run("pairs", "--index", idx, "--rebuild")
    assert r.exit_code == 2
    assert r.stdout == ""
    assert "--rebuild" in r.stderr


# ---------------------------------------------------------------- parameter mismatch (exit 4)


@pytest.mark.parametrize(
    "opt, stored, asked",
    [
        (["--k", "7"], "with --k 5", "--k 7"),
        (["--unit", "word"], "with --unit char", "--unit word"),
        (["--no-lowercase"], "with --lowercase", "--no-lowercase"),
        (["--num-perm", "64"], "with --num-perm 128", "--num-perm 64"),
        (["--seed", "2"], "with --seed 1", "--seed 2"),
        (["--max-bytes", "100"], "without --max-bytes", "--max-bytes 100"),
        (["--include", "*.txt"], "without --include", "--include '*.txt'"),
    ],
)
def test_parameter_mismatch_and_rebuild(run, small_corpus, tmp_path, opt, stored, asked):
    idx = tmp_path / "idx"
    first = run("pairs", small_corpus, "--index", idx)
    assert first.exit_code == 0
    r = run("pairs", small_corpus, "--index", idx, *opt)
    # Issue 17.15: flags as typed, not Python reprs (max_bytes=None).
    assert_clean_error(r, 4, f"was built {stored} (", f"but {asked} was asked for", "--rebuild")
    assert "=" not in r.stderr.splitlines()[0]
    r = run("pairs", small_corpus, "--index", idx, *opt, "--rebuild")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == first.stdout
    # The index now holds the new value: asking for it again needs no --rebuild.
    again = run("pairs", small_corpus, "--index", idx, *opt)
    assert again.exit_code == 0, again.stderr
    assert again.stdout == first.stdout



def test_globs_that_select_nothing_are_named(run, small_corpus, tmp_path):
    """A folder of text files whose globs choose none: the error names the globs, not 'point
    simdoc at a folder that holds text files', which it does."""
    r = run("pairs", small_corpus, "--index", tmp_path / "idx", "--include", "*.md", "--exclude", "x/*")
    assert_clean_error(r, 3, "has no documents that --include '*.md' --exclude 'x/*' select", "check the globs")
    assert "holds text files" not in r.stderr and not (tmp_path / "idx").exists()
    plain = run("pairs", tmp_path / "nothing-here", "--index", tmp_path / "idx2")
    assert plain.exit_code == 3

def test_parameter_mismatch_pairs_without_corpus(run, small_corpus, tmp_path):
    idx = tmp_path / "idx"
    assert run("pairs", small_corpus, "--index", idx, "-q").exit_code == 0
    r = run("pairs", "--index", idx, "--k", "7")
    assert_clean_error(r, 4, "built with --k 5", "--k 7")


def test_parameter_mismatch_shingle_cmd(run, small_corpus, tmp_path):
    idx = tmp_path / "idx"
    assert run("shingle", small_corpus, "--index", idx, "-q").exit_code == 0
    r = run("shingle", small_corpus, "--index", idx, "--k", "7")
    assert_clean_error(r, 4, "built with --k 5", "--k 7")
    assert run("shingle", small_corpus, "--index", idx, "--k", "7", "--rebuild", "-q").exit_code == 0


def test_parameter_mismatch_signature_cmd(run, small_corpus, tmp_path):
    idx = tmp_path / "idx"
    assert run("shingle", small_corpus, "--index", idx, "-q").exit_code == 0
    assert run("signature", "--index", idx, "-q").exit_code == 0
    r = run("signature", "--index", idx, "--num-perm", "64")
    assert_clean_error(r, 4, "built with --num-perm 128", "--num-perm 64")
    r = run("signature", "--index", idx, "--seed", "2")
    assert_clean_error(r, 4, "built with --seed 1", "--seed 2")
    assert run("signature", "--index", idx, "--num-perm", "64", "--rebuild", "-q").exit_code == 0


def test_index_of_another_corpus(run, small_corpus, tmp_path):
    idx = tmp_path / "idx"
    assert run("pairs", small_corpus, "--index", idx, "-q").exit_code == 0
    other = tmp_path / "other"
    write(other / "x.txt", TEXT_A)
    r = run("pairs", other, "--index", idx)
    assert_clean_error(r, 4, "corpus")


# ---------------------------------------------------------------- damaged index (exit 4)


@pytest.fixture
def built_index(run, small_corpus, tmp_path) -> Path:
    idx = tmp_path / "idx"
    r = run("pairs", small_corpus, "--index", idx, "-q")
    assert r.exit_code == 0
    return idx


def _one(idx: Path, pattern: str) -> Path:
    (path,) = idx.glob(pattern)
    return path


def test_truncated_signatures(run, built_index, small_corpus):
    sig = _one(built_index, "signatures.*.npy")
    with open(sig, "r+b") as fh:
        fh.truncate(sig.stat().st_size - 10)
    r = run("pairs", "--index", built_index)
    assert_clean_error(r, 4, sig.name)
    # The damage is reported with the corpus too, and --rebuild repairs it.
    assert_clean_error(run("pairs", small_corpus, "--index", built_index), 4, sig.name)
    fixed = run("pairs", small_corpus, "--index", built_index, "--rebuild")
    assert fixed.exit_code == 0
    assert fixed.stdout == "a.txt\tb.txt\t1.0000\t1.0000\n"


@pytest.mark.parametrize("pattern", ["signatures.*.npy", "docs.n_shingles.*.npy", "buckets.*.npy"])
def test_truncated_array(run, built_index, pattern):
    """A truncated array of the format-3 index (the shingle files are gone): pairs and check name it."""
    data = _one(built_index, pattern)
    with open(data, "r+b") as fh:
        fh.truncate(data.stat().st_size - 8)
    r = run("pairs", "--index", built_index)
    assert_clean_error(r, 4, data.name)
    chk = run("check", "--index", built_index)
    assert chk.exit_code == 4 and data.name in chk.stdout and "truncated" in chk.stdout


def test_garbage_npy_header_same_size(run, built_index):
    sig = _one(built_index, "signatures.*.npy")
    raw = sig.read_bytes()
    sig.write_bytes(bytes((b ^ 0x5A) for b in raw[:128]) + raw[128:])
    assert sig.stat().st_size == len(raw)
    r = run("pairs", "--index", built_index)
    assert_clean_error(r, 4, sig.name)


def test_npy_header_with_wrong_shape_same_size(run, built_index):
    """A valid .npy header that disagrees with the manifest (same byte size)."""
    sig = _one(built_index, "signatures.*.npy")
    raw = sig.read_bytes()
    header = raw[:128]
    body = header[10:].rstrip(b" \n")
    assert b"(3, 128)" in body
    body = body.replace(b"(3, 128)", b"(6, 64)")  # same number of bytes of data
    bad = header[:10] + body + b" " * (128 - 10 - len(body) - 1) + b"\n"
    assert len(bad) == 128
    sig.write_bytes(bad + raw[128:])
    r = run("pairs", "--index", built_index)
    assert_clean_error(r, 4, sig.name)


def test_missing_index_file(run, built_index):
    buckets = _one(built_index, "buckets.*.npy")
    buckets.unlink()
    r = run("pairs", "--index", built_index)
    assert_clean_error(r, 4, buckets.name)


def test_corrupt_manifest(run, built_index):
    (built_index / "manifest.json").write_text('{"format": "simdoc-index", ', encoding="utf-8")
    r = run("pairs", "--index", built_index)
    assert_clean_error(r, 4, "manifest.json")


def test_corrupt_manifest_rebuild_recovers(run, built_index, small_corpus):
    """The error's hint says `--rebuild`; following it must work."""
    (built_index / "manifest.json").write_text("not json at all", encoding="utf-8")
    r = run("pairs", small_corpus, "--index", built_index)
    assert_clean_error(r, 4, "manifest.json", "--rebuild")
    fixed = run("pairs", small_corpus, "--index", built_index, "--rebuild")
    assert fixed.exit_code == 0, fixed.stderr
    assert fixed.stdout == "a.txt\tb.txt\t1.0000\t1.0000\n"


def test_foreign_manifest(run, tmp_path):
    idx = tmp_path / "idx"
    write(idx / "manifest.json", '{"name": "some other tool"}')
    r = run("pairs", "--index", idx)
    assert_clean_error(r, 4, "not a simdoc index")
    assert (idx / "manifest.json").read_text() == '{"name": "some other tool"}'


def test_signature_on_directory_that_is_not_an_index(run, tmp_path):
    d = tmp_path / "notidx"
    write(d / "readme.txt", "hello")
    r = run("signature", "--index", d)
    assert_clean_error(r, 4, "no simdoc index")
    r = run("signature", "--index", tmp_path / "does-not-exist")
    assert_clean_error(r, 4, "no simdoc index")
    assert not (tmp_path / "does-not-exist").exists()


def test_index_cmd_before_signature(run, small_corpus, tmp_path):
    idx = tmp_path / "idx"
    assert run("shingle", small_corpus, "--index", idx, "-q").exit_code == 0
    r = run("index", "--index", idx)
    assert_clean_error(r, 4, "signature")


def _snapshot(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


@pytest.mark.parametrize("cmd", ["pairs", "shingle"])
def test_index_dir_with_other_files_is_refused(run, small_corpus, tmp_path, cmd):
    d = tmp_path / "mydir"
    write(d / "notes.txt", "my notes")
    write(d / "data.csv", "a,b\n1,2\n")
    before = _snapshot(d)
    r = run(cmd, small_corpus, "--index", d)
    assert_clean_error(r, 4, str(d))
    assert _snapshot(d) == before


def test_index_dir_with_files_named_like_index_files_is_refused(run, small_corpus, tmp_path):
    """A directory that is not an index must be left alone, whatever its files are called."""
    d = tmp_path / "mydir"
    write(d / "docs.customers.jsonl", '{"name": "Ada"}\n')
    write(d / "signatures.npy", b"my own array, not simdoc's")
    before = _snapshot(d)
    r = run("pairs", small_corpus, "--index", d)
    after = _snapshot(d)
    assert not set(before) - set(after), f"user files deleted: {sorted(set(before) - set(after))}"
    assert after == before
    assert_clean_error(r, 4, str(d))


def test_index_path_is_a_file(run, small_corpus, tmp_path):
    f = write(tmp_path / "idxfile", "x")
    r = run("pairs", small_corpus, "--index", f)
    assert r.exit_code in (2, 4)
    assert r.stdout == ""
    assert "Traceback" not in r.stderr
    assert f.read_text() == "x"


# ---------------------------------------------------------------- more options


def test_table_format(run, small_corpus, tmp_path):
    r = run("pairs", small_corpus, "--index", tmp_path / "idx", "-f", "table")
    assert r.exit_code == 0
    lines = [ln.split() for ln in r.stdout.splitlines() if ln.strip()]
    assert lines == [["doc_a", "doc_b", "estimated", "jaccard"], ["a.txt", "b.txt", "1.0000", "1.0000"]]


def _table_rows(text: str, n_names: int = 2) -> list[list[str]]:
    """The records of a `--format table` output, with names folded over several lines joined again."""
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    header = lines[0]
    starts = [m.start() for m in re.finditer(r"\S+", header)]
    rows: list[list[str]] = []
    for ln in lines[1:]:
        cells = [ln[a:b].strip() for a, b in zip(starts, [*starts[1:], None])]
        if any(cells[n_names:]):  # a record's first line carries its numbers
            rows.append(cells)
        else:  # a continuation: the rest of long names
            for i in range(n_names):
                rows[-1][i] += cells[i]
    return rows


@pytest.mark.parametrize("width", [80, 60, 40])
def test_table_never_cuts_names(run, tmp_path, monkeypatch, width):
    # Issue 17.11: at 80 columns `policies/remote-work-policy…` appeared twice in one row.
    monkeypatch.setenv("COLUMNS", str(width))
    tsv = run("pairs", SAMPLE_CORPUS, "--index", tmp_path / "idx")
    r = run("pairs", "--index", tmp_path / "idx", "-f", "table")
    assert r.exit_code == 0, r.stderr
    assert "…" not in r.stdout
    assert max(len(ln.rstrip()) for ln in r.stdout.splitlines()) <= width
    assert _table_rows(r.stdout) == records(tsv)
    for a, b, *_ in _table_rows(r.stdout):
        assert a != b


@pytest.mark.parametrize(
    "args, expected",
    [
        (("--header",), "doc_a\tdoc_b\testimated\tjaccard\na.txt\tb.txt\t1.0000\t1.0000\n"),
        (("--header", "-f", "tsv"), "doc_a\tdoc_b\testimated\tjaccard\na.txt\tb.txt\t1.0000\t1.0000\n"),
        ((), "a.txt\tb.txt\t1.0000\t1.0000\n"),  # headerless by default, for sort and awk
        (("--no-header",), "a.txt\tb.txt\t1.0000\t1.0000\n"),
        (("-f", "csv"), "doc_a,doc_b,estimated,jaccard\na.txt,b.txt,1.0000,1.0000\n"),
        (("-f", "csv", "--header"), "doc_a,doc_b,estimated,jaccard\na.txt,b.txt,1.0000,1.0000\n"),
        (("-f", "csv", "--no-header"), "a.txt,b.txt,1.0000,1.0000\n"),
        (("--new", "--header"), "doc_a\tdoc_b\testimated\tjaccard\tnew\na.txt\tb.txt\t1.0000\t1.0000\tboth\n"),
    ],
)
def test_pairs_header(run, small_corpus, tmp_path, args, expected):
    # Issue 17.10: with --header, `sqlite3 .import` takes the field names from the first line.
    r = run("pairs", small_corpus, "--index", tmp_path / "idx", *args)
    assert r.exit_code == 0, r.stderr
    assert r.stdout == expected


@pytest.mark.skipif(shutil.which("sqlite3") is None, reason="no sqlite3 command here")
def test_sqlite3_import_of_tsv_with_header_keeps_every_pair(run, tmp_path):
    r = run("pairs", SAMPLE_CORPUS, "--index", tmp_path / "idx", "--header")
    (tmp_path / "pairs.tsv").write_text(r.stdout, encoding="utf-8")
    db = tmp_path / "p.db"
    subprocess.run(["sqlite3", str(db), ".mode tabs", f".import {tmp_path / 'pairs.tsv'} pairs"], check=True)
    out = subprocess.run(["sqlite3", str(db), "select count(*) from pairs where jaccard >= 0.6"], capture_output=True, text=True)
    assert out.stdout.strip() == str(len(r.stdout.splitlines()) - 1) == "5"


def test_table_without_header(run, small_corpus, tmp_path):
    r = run("pairs", small_corpus, "--index", tmp_path / "idx", "-f", "table", "--no-header")
    assert r.exit_code == 0
    assert [ln.split() for ln in r.stdout.splitlines() if ln.strip()] == [["a.txt", "b.txt", "1.0000", "1.0000"]]


@pytest.mark.parametrize("args", [("-f", "jsonl"), ("-0",)])
def test_header_where_no_line_can_hold_one_is_a_usage_error(run, small_corpus, tmp_path, args):
    r = run("pairs", small_corpus, "--index", tmp_path / "idx", "--header", *args)
    assert_clean_error(r, 2, "--header goes with tsv, csv or table output")
    assert not (tmp_path / "idx").exists()  # said before any work


def test_query_header(run, small_corpus, tmp_path):
    idx = tmp_path / "idx"
    assert run("pairs", small_corpus, "--index", idx).exit_code == 0
    r = run("query", small_corpus / "a.txt", "--index", idx, "--header", "-t", "0.9")
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "query\tdoc\testimated\tjaccard"
    assert [ln.split("\t")[1] for ln in lines[1:]] == ["a.txt", "b.txt"]
    assert run("query", small_corpus / "a.txt", "--index", idx, "--header", "-f", "jsonl").exit_code == 2


def test_warnings_capped_unless_verbose(run, small_corpus, tmp_path):
    for i in range(25):
        write(small_corpus / f"bin{i:02d}.dat", b"x\x00")
    r = run("pairs", small_corpus, "--index", tmp_path / "i1")
    assert r.exit_code == 0
    assert r.stdout == "a.txt\tb.txt\t1.0000\t1.0000\n"
    warns = [ln for ln in r.stderr.splitlines() if ln.startswith("warning:")]
    assert len(warns) == 21
    assert "5 more warnings" in warns[-1] and "--verbose" in warns[-1]
    assert summary(r)["skipped"] == "25"
    v = run("pairs", small_corpus, "--index", tmp_path / "i2", "--verbose")
    assert v.exit_code == 0
    assert v.stdout == r.stdout
    assert sum(ln.startswith("warning:") and "binary" in ln for ln in v.stderr.splitlines()) == 25
    assert "shingle:" in v.stderr and "banding: bands=" in v.stderr


def test_default_index_goes_to_xdg_cache_home(run, small_corpus, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    r = run("pairs", small_corpus)
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "a.txt\tb.txt\t1.0000\t1.0000\n"
    (idx,) = (cache / "simdoc").iterdir()
    assert idx.name.startswith("corpus-")
    assert (idx / "manifest.json").is_file()
    assert sorted(p.name for p in small_corpus.iterdir()) == ["a.txt", "b.txt", "c.txt"]


def test_simdoc_index_environment(run, small_corpus, tmp_path, monkeypatch):
    idx = tmp_path / "env-idx"
    monkeypatch.setenv("SIMDOC_INDEX", str(idx))
    assert run("shingle", small_corpus, "-q").exit_code == 0
    assert run("signature", "-q").exit_code == 0
    assert run("index", "-q").exit_code == 0
    r = run("pairs")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "a.txt\tb.txt\t1.0000\t1.0000\n"
    assert (idx / "manifest.json").is_file()


@pytest.mark.parametrize("cmd", ["signature", "index"])
def test_index_required_without_environment(run, cmd):
    r = run(cmd)
    assert r.exit_code == 2
    assert r.stdout == ""
    assert "--index" in r.stderr


def test_the_command_runs_without_the_cycle_collector_and_freezes_what_it_made(monkeypatch):
    import gc

    import simdoc.cli as cli_module

    seen = []
    monkeypatch.setattr(cli_module.cli, "main", lambda **kw: seen.append(gc.isenabled()) or sys.exit(0))
    frozen = []
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append(True))
    try:
        with pytest.raises(SystemExit):
            cli_module.main()
    finally:
        gc.enable()
    assert seen == [False] and frozen == [True]


@pytest.mark.parametrize(
    "name, value, spelt",
    [
        ("max_bytes", 100, "--max-bytes 100"),
        ("max_bytes", None, "no --max-bytes"),
        ("lowercase", True, "--lowercase"),
        ("follow_symlinks", False, "--no-follow-symlinks"),
        ("include", [], "no --include"),
        ("exclude", ["*.log", "tmp dir/*"], "--exclude '*.log' --exclude 'tmp dir/*'"),
        ("text_field", "body", "--text-field body"),
    ],
)
def test_parameters_are_spelt_as_flags(name, value, spelt):
    from simdoc.errors import spell_option

    assert spell_option(name, value) == spelt


def test_summaries_say_one_in_the_singular(run, tmp_path):
    # Issue 17.15: "1 pairs", "1 documents", "1 clusters" ...
    corpus = tmp_path / "c"
    write(corpus / "a.txt", TEXT_A)
    write(corpus / "b.txt", TEXT_A)
    idx = tmp_path / "idx"
    r = run("pairs", corpus, "--index", idx)
    assert re.match(r"simdoc: 2 documents, 1 candidate, 1 pair \(set jaccard >= 0\.6, the default\) in ", r.stderr), r.stderr
    c = run("clusters", "--index", idx)
    assert re.match(r"simdoc: 2 documents, 1 pair \(.*\), 1 cluster holding 2 documents in ", c.stderr), c.stderr
    d = run("dedup", "--index", idx)
    size = len(TEXT_A.encode())
    assert d.stderr.startswith(f"simdoc: 1 cluster: keep 1, drop 1 document ({size} bytes) ("), d.stderr
    q = run("query", corpus / "a.txt", "--index", idx)
    assert q.stderr == "simdoc: 1 query, 2 matches (set jaccard >= 0.6)\n"
    one = run("pairs", corpus / "a.txt", "--index", tmp_path / "one")
    assert one.stderr.startswith("simdoc: 1 document, 0 candidates, 0 pairs"), one.stderr


def test_plural():
    from simdoc.wording import count, plural

    assert [count(n, "pair") for n in (0, 1, 2)] == ["0 pairs", "1 pair", "2 pairs"]
    assert [plural(2, w) for w in ("query", "match", "copy", "day", "file skipped")] == [
        "queries", "matches", "copies", "days", "files skipped"
    ]
    assert count(20000, "line", thousands=True) == "20,000 lines"
