"""Issue 27.2: one escaping of names for tsv, csv and the table, that never prints two names alike.

A file named with the four characters ``\\xe9`` and one named with the byte
0xE9 printed the same in csv (which escaped the byte but not the backslash).
"""

from __future__ import annotations

import json
import os
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simdoc import output
from tests.conftest import TEXT_A, write

LITERAL = "a\\xe9.txt"  # a, backslash, x, e, 9
RAW = os.fsdecode(b"a\xe9.txt")  # a, the byte 0xE9 (not UTF-8)
# As printed: the backslash doubled, the byte as \xNN. LITERAL sorts first ("\\" < "\udce9").
LITERAL_OUT, RAW_OUT = "a\\\\xe9.txt", "a\\xe9.txt"


@pytest.fixture
def twins(tmp_path):
    """A corpus of two identical documents whose names differ only as above, and a third with a
    tab, a comma and a quote in its name."""
    corpus = tmp_path / "c"
    write(corpus / "z.txt", TEXT_A)
    for name in (LITERAL, RAW, 'tab\tcomma,quote".txt'):
        with open(os.path.join(os.fsencode(corpus), os.fsencode(name)), "w", encoding="utf-8") as fh:
            fh.write(TEXT_A)
    return corpus


def test_pairs_tsv_and_csv_tell_the_two_names_apart(run, twins, tmp_path):
    idx = tmp_path / "idx"
    tsv = run("pairs", twins, "--index", idx, "-f", "tsv")
    assert tsv.exit_code == 0, tsv.stderr
    tab = "tab\\tcomma,quote\".txt"
    assert tsv.stdout == (
        f"{LITERAL_OUT}\t{RAW_OUT}\t1.0000\t1.0000\n"
        f"{LITERAL_OUT}\t{tab}\t1.0000\t1.0000\n"
        f"{LITERAL_OUT}\tz.txt\t1.0000\t1.0000\n"
        f"{RAW_OUT}\t{tab}\t1.0000\t1.0000\n"
        f"{RAW_OUT}\tz.txt\t1.0000\t1.0000\n"
        f"{tab}\tz.txt\t1.0000\t1.0000\n"
    )
    csv = run("pairs", "--index", idx, "-f", "csv")
    assert csv.exit_code == 0, csv.stderr
    # The same escaping; csv quotes a field with a comma or a quote ("" inside), one record a line.
    quoted = '"tab\\tcomma,quote"".txt"'
    assert csv.stdout == (
        "doc_a,doc_b,estimated,jaccard\n"
        f"{LITERAL_OUT},{RAW_OUT},1.0000,1.0000\n"
        f"{LITERAL_OUT},{quoted},1.0000,1.0000\n"
        f"{LITERAL_OUT},z.txt,1.0000,1.0000\n"
        f"{RAW_OUT},{quoted},1.0000,1.0000\n"
        f"{RAW_OUT},z.txt,1.0000,1.0000\n"
        f"{quoted},z.txt,1.0000,1.0000\n"
    )
    tsv_rows = [line.split("\t")[:2] for line in tsv.stdout.splitlines()]
    assert {output.unescape_name(n) for row in tsv_rows for n in row} == {LITERAL, RAW, 'tab\tcomma,quote".txt', "z.txt"}


def test_pairs_table_tells_the_two_names_apart(run, twins, tmp_path):
    r = run("pairs", twins, "--index", tmp_path / "idx", "-f", "table")
    assert r.exit_code == 0, r.stderr
    assert LITERAL_OUT in r.stdout and RAW_OUT in r.stdout


def test_query_csv_tells_the_two_names_apart(run, twins, tmp_path):
    idx = tmp_path / "idx"
    assert run("pairs", twins, "--index", idx, "-q").exit_code == 0
    r = run("query", twins / "z.txt", "--index", idx, "-f", "csv")
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[1].split(",")[1:] == [LITERAL_OUT, "1.0000", "1.0000"]
    assert lines[2].split(",")[1:] == [RAW_OUT, "1.0000", "1.0000"]


def test_clusters_and_dedup_tsv_tell_the_two_names_apart(run, twins, tmp_path):
    idx = tmp_path / "idx"
    c = run("clusters", twins, "--index", idx)
    assert c.exit_code == 0, c.stderr
    assert c.stdout == f"1\t4\t{LITERAL_OUT}\t{RAW_OUT}\ttab\\tcomma,quote\".txt\tz.txt\n"
    d = run("dedup", "--index", idx, "-f", "tsv")
    assert d.exit_code == 0, d.stderr
    assert d.stdout == f"{RAW_OUT}\t{LITERAL_OUT}\ntab\\tcomma,quote\".txt\t{LITERAL_OUT}\nz.txt\t{LITERAL_OUT}\n"


names = st.text(st.one_of(st.characters(blacklist_categories=("Cs",)), st.sampled_from("\\\t\n\rxu0\x1b\x7f\x9b"),
                          st.integers(0x80, 0xFF).map(lambda b: chr(0xDC00 + b))))


@given(names, names)
def test_escape_name_is_one_line_and_tells_every_name_apart(a, b):
    out = output.escape_name(a)
    assert "\t" not in out and "\n" not in out and "\r" not in out and not _CONTROL.search(out)
    assert output.unescape_name(out) == a
    assert (output.escape_name(a) == output.escape_name(b)) == (a == b)


# Control characters in names (issue from the QA pass of 2026-11-26): ESC, 0x01, DEL and the C1
# controls passed raw to a terminal in tsv, csv and the table, and `show` printed names unescaped.
ESC_NAME = "esc\x1b[31mred.txt"  # ESC [ 31 m: a terminal would turn red
CONTROL_NAMES = (ESC_NAME, "one\x01.txt", "del\x7f.txt", "csi\x9b31m.txt", "new\nline.txt", "[bold]x.txt")
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # every C0 control but tab and newline, DEL, C1


@pytest.mark.parametrize(
    "name, printed",
    [
        (ESC_NAME, "esc\\x1b[31mred.txt"),
        ("one\x01.txt", "one\\x01.txt"),
        ("nul\x00", "nul\\x00"),
        ("del\x7f.txt", "del\\x7f.txt"),
        ("csi\x9b31m.txt", "csi\\u009b31m.txt"),  # C1: \u, as \xNN of 0x80 and up is a byte that is not UTF-8
        ("nel\x85", "nel\\u0085"),
        ("a\tb\nc\rd\\", "a\\tb\\nc\\rd\\\\"),
        (RAW, RAW_OUT),
    ],
)
def test_escape_name_escapes_every_control_character(name, printed):
    assert output.escape_name(name) == printed
    assert output.unescape_name(printed) == name


def test_json_line_escapes_del_and_c1_too():
    line = output.json_line({"doc": "del\x7f csi\x9b esc\x1b"})
    assert not _CONTROL.search(line) and line.count("\n") == 1
    assert json.loads(line) == {"doc": "del\x7f csi\x9b esc\x1b"}


@pytest.fixture
def controls(tmp_path):
    corpus = tmp_path / "c"
    write(corpus / "plain.txt", TEXT_A)
    for name in CONTROL_NAMES:
        write(corpus / name, TEXT_A)
    return corpus


def test_pairs_print_no_control_character_in_any_format(run, controls, tmp_path):
    idx = tmp_path / "idx"
    tsv = run("pairs", controls, "--index", idx, "-f", "tsv")
    assert tsv.exit_code == 0, tsv.stderr
    n = len(CONTROL_NAMES) + 1
    assert len(tsv.stdout.splitlines()) == n * (n - 1) // 2
    assert not _CONTROL.search(tsv.stdout)
    names = {output.unescape_name(f) for line in tsv.stdout.splitlines() for f in line.split("\t")[:2]}
    assert names == {*CONTROL_NAMES, "plain.txt"}  # round trip
    for fmt in ("csv", "table", "jsonl"):
        r = run("pairs", "--index", idx, "-f", fmt)
        assert r.exit_code == 0, r.stderr
        assert not _CONTROL.search(r.stdout), fmt
    table = run("pairs", "--index", idx, "-f", "table").stdout
    assert "esc\\x1b[31mred.txt" in table and "csi\\u009b31m.txt" in table
    assert "[bold]x.txt" in table  # a name is text, never rich markup
    jsonl = run("pairs", "--index", idx, "-f", "jsonl").stdout
    assert {v for line in jsonl.splitlines() for k, v in json.loads(line).items() if k.startswith("doc")} == {*CONTROL_NAMES, "plain.txt"}


def test_show_escapes_the_names_it_prints(run, controls, tmp_path):
    r = run("show", controls, "--index", tmp_path / "idx", "new\nline.txt", ESC_NAME, "-q")
    assert r.exit_code == 0, r.stderr
    assert not _CONTROL.search(r.stdout)
    lines = r.stdout.splitlines()
    assert lines[0].startswith("A  new\\nline.txt  (") and lines[1].startswith("B  esc\\x1b[31mred.txt  (")
    assert "A: new\\nline.txt" in lines and "B: esc\\x1b[31mred.txt" in lines


def test_stats_escapes_the_sample_member(run, tmp_path):
    corpus, idx = tmp_path / "c", tmp_path / "idx"
    for name in (ESC_NAME, "plain.txt"):  # the ESC name is the smaller: the sample member
        write(corpus / name, TEXT_A)
    assert run("pairs", corpus, "--index", idx, "-q").exit_code == 0
    r = run("stats", "--index", idx)
    assert r.exit_code == 0, r.stderr
    assert not _CONTROL.search(r.stdout)
    assert "esc\\x1b[31mred.txt  (a group of exact copies)" in r.stdout


def test_show_prints_control_characters_of_the_text_visibly(run, tmp_path):
    corpus = tmp_path / "c"
    write(corpus / "a.txt", "The quick brown \x1b[2J\x1b]0;owned\x07fox jumps over the lazy dog\x9b31m while the farmer sleeps.\n")
    write(corpus / "b.txt", TEXT_A)
    r = run("show", corpus / "a.txt", corpus / "b.txt", "--min-words", "3")
    assert r.exit_code == 0, r.stderr
    assert not _CONTROL.search(r.stdout)
    assert "\\x1b[2J\\x1b]0;owned\\x07fox" in r.stdout and "dog\\u009b31m" in r.stdout
