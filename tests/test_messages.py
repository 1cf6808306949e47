"""Help texts and messages that must say what the commands do (issue 27, item 11)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from conftest import SAMPLE_CORPUS


def test_query_help_names_members_as_ids_are_written(run):
    out = run("query", "--help").output
    assert "FILE/#LINE" in out and "FILE/#ID" in out and "FILE/#URI" in out
    assert "FILE#" not in out


@pytest.mark.parametrize("command", [["tune"], ["check"], ["cache", "list"], ["cache", "clean"], ["query"], ["stats"]])
def test_quiet_and_verbose_help_fit_commands_without_stages(run, command):
    """These commands read no corpus and build no stage: no skipped files, no stage timings."""
    out = run(*command, "--help").output
    flags = out[out.index("-q, --quiet") : out.index("-h, --help")]
    assert "skipped" not in flags
    assert "timing" not in flags


def test_stage_commands_keep_their_quiet_and_verbose_help(run):
    out = run("pairs", "--help").output
    flags = out[out.index("-q, --quiet") : out.index("-h, --help")]
    assert "skipped" in flags and "timings" in flags


def test_help_and_dir_of_the_package_list_the_whole_public_api():
    """help(simdoc) and dir(simdoc) name every public function, the lazily loaded ones too."""
    import pydoc

    import simdoc

    text = pydoc.render_doc(simdoc, renderer=pydoc.plaintext)
    for name in simdoc.__all__:
        assert name in dir(simdoc), name
        assert name.startswith("__") or name in text, name  # __version__ is shown as VERSION
    assert "find_pairs(corpus" in text  # documented with its signature, not only named
    with pytest.raises(AttributeError):
        simdoc.no_such_name


def test_banding_report_rounds_the_similarities_it_names():
    from simdoc.lsh import BandingReport, s_curve_threshold

    by_hand = BandingReport.of(20, 5, round(s_curve_threshold(20, 5), 6))  # as `index --bands 20 --rows 5` stores it
    assert "P(J=0.449)=0.309, P(J=0.549)=0.642, P(J=0.649)=0.914" in by_hand.describe()
    assert "0.44928" not in by_hand.describe()
    assert "P(J=0.7)=0.673, P(J=0.8)=0.953, P(J=0.9)=1.000" in BandingReport.of(13, 7, 0.8).describe()


def test_stats_calls_the_midpoint_of_a_hand_chosen_banding_a_midpoint(tmp_path, run):
    idx = tmp_path / "idx"
    assert run("pairs", SAMPLE_CORPUS, "--index", idx).exit_code == 0
    assert run("index", "--index", idx, "--bands", "20", "--rows", "5").exit_code == 0
    out = run("stats", "--index", idx).stdout
    assert "banding: bands=20 rows=5 (chosen by hand; S-curve midpoint 0.549)" in out.splitlines()
    assert "threshold 0.54928" not in out
    assert run("index", "--index", idx, "--threshold", "0.8").exit_code == 0
    assert "banding: bands=13 rows=7 (threshold 0.8)" in run("stats", "--index", idx).stdout.splitlines()


def test_a_hand_chosen_banding_with_a_threshold_names_both():
    from simdoc.reports.stats import BucketSummary

    b = BucketSummary(20, 5, 0.6, True, 0, 0, (), (), explicit=True)
    assert b.banding == "bands=20 rows=5 (chosen by hand for threshold 0.6; S-curve midpoint 0.549)"


def test_show_says_one_word_left_out_in_the_singular():
    from simdoc.cli.show import _rich_document
    from simdoc.reports.passages import Segment, render_plain

    one = [Segment("own", None, "a b", elided=1, tail="d e")]
    assert render_plain(one) == "a b (... 1 word ...) d e"
    assert _rich_document(one).plain == "a b (... 1 word ...) d e"
    assert render_plain([Segment("own", None, "a", elided=2, tail="d")]) == "a (... 2 words ...) d"


def test_the_table_folds_names_after_a_separator_not_mid_word(monkeypatch):
    import io

    from simdoc.output import fold_name, write_records

    monkeypatch.setenv("COLUMNS", "60")
    out = io.StringIO()
    a = "policies/remote-work-policy-2023-final-version-for-board.txt"
    b = "policies/remote-work-policy-2024-final-version-for-board.txt"
    write_records([(a, b, 0.8594, 0.8905), ("misc/soup-copy.txt", "misc/soup.txt", 1.0, 1.0)], "table", out)
    lines = out.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 60
    firsts = [line[:20].strip() for line in lines[1:6]]
    assert "".join(firsts) == a  # the whole name, in pieces
    assert all(piece[-1] in "/-_." for piece in firsts[:-1]), firsts
    assert "misc/soup-copy.txt" in lines[6] and "misc/soup.txt" in lines[6]  # short names stay whole
    # A run with no separator in reach is cut where the line is full; nothing is lost.
    assert fold_name("abcdefghij/k", 4).split("\n") == ["abcd", "efgh", "ij/k"]
    assert fold_name("ab/cdefgh", 6).split("\n") == ["ab/", "cdefgh"]
    assert fold_name("ab/cd", 10) == "ab/cd"


def test_a_local_dask_cluster_says_nothing_when_port_8787_is_taken(tmp_path):
    """Dask's scheduler serves HTTP on :8787 even without a dashboard, and warned on stderr
    (through -q) when another cluster held the port."""
    import socket
    import subprocess
    import sys

    pytest.importorskip("distributed")
    held = socket.socket()
    try:
        held.bind(("0.0.0.0", 8787))
        held.listen()
    except OSError:
        pass  # something holds it already: the same case
    try:
        p = subprocess.run(
            [sys.executable, "-m", "simdoc", "pairs", str(SAMPLE_CORPUS), "--index", str(tmp_path / "idx"),
             "--scheduler", "local[1]", "-q"],
            capture_output=True, text=True, timeout=300,
        )
    finally:
        held.close()
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
    assert len(p.stdout.splitlines()) == 5


def test_make_run_installs_simdoc_without_the_editable_warning_box():
    """setuptools prints an "Editable installation" box for every editable install: `make run`
    installs simdoc as a user would, and again when its sources change."""
    import shutil
    import subprocess

    from conftest import REPO

    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    dry = subprocess.run(["make", "-n", "-B", "run"], cwd=REPO, capture_output=True, text=True, timeout=60).stdout
    installs = [line for line in dry.splitlines() if "pip install" in line and "--upgrade pip" not in line]
    assert installs == [".venv/bin/python -m pip install --quiet ."]
    makefile = (REPO / "Makefile").read_text()
    assert "$(VENV)/.installed: $(SOURCES)" in makefile and "find simdoc" in makefile


def test_records_written_a_block_at_a_time_are_all_written_in_order():
    """tsv and jsonl go to the stream in blocks of lines: the last block, a block that is full
    exactly, and what a stream that fails mid-way was given are each a whole number of records."""
    import io
    import json

    from simdoc import output

    for n in (0, 1, output._WRITE_LINES, output._WRITE_LINES + 1, 2 * output._WRITE_LINES + 7):
        records = [(f"a{i}", f"b{i}", i / (n + 1), None if i % 3 else 0.5, "both") for i in range(n)]
        tsv, jsonl = io.StringIO(), io.StringIO()
        assert output.write_records(records, "tsv", tsv, with_new=True) == n
        assert output.write_records(records, "jsonl", jsonl, with_new=True) == n
        lines = tsv.getvalue().splitlines()
        assert [line.split("\t")[0] for line in lines] == [f"a{i}" for i in range(n)]
        if n:
            last = n - 1
            assert lines[-1] == f"a{last}\tb{last}\t{last / (n + 1):.4f}\t{'' if last % 3 else '0.5000'}\tboth"
        assert [json.loads(line)["doc_b"] for line in jsonl.getvalue().splitlines()] == [f"b{i}" for i in range(n)]

    class Full(io.StringIO):
        def write(self, text):
            if self.tell() > 0:
                raise OSError(28, "No space left on device")
            return super().write(text)

    out = Full()
    records = [(f"a{i}", f"b{i}", 0.9, 0.9) for i in range(3 * output._WRITE_LINES)]
    with pytest.raises(OSError):
        output.write_records(records, "tsv", out)
    assert out.getvalue().count("\n") == output._WRITE_LINES and out.getvalue().endswith("\n")


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.text(st.sampled_from("ab/\\\t\n\r é\udcff"), max_size=6),
            st.text(st.sampled_from("ab/\\\t\n\r é\udcff"), max_size=6),
            st.floats(0, 1),
            st.none() | st.floats(0, 1),
            st.sampled_from(["a", "b", "both"]),
        ),
        max_size=40,
    ),
    st.booleans(),
    st.none() | st.just("2026-11-26T13:00:00Z"),
)
def test_tsv_blocks_are_the_records_written_one_by_one(records, with_new, run):
    """The tsv written a column of a block at a time is, byte for byte, each record's fields
    escaped and joined on its own, whether a block has a name to escape or none."""
    import io

    from simdoc import output

    out = io.StringIO()
    output.write_records(records, "tsv", out, with_new=with_new, run=run)
    want = "".join(
        "\t".join([output.escape_name(a), output.escape_name(b), f"{est:.4f}", "" if jac is None else f"{jac:.4f}"]
                  + [new] * with_new + [run] * (run is not None)) + "\n"
        for a, b, est, jac, new in records
    )
    assert out.getvalue() == want
