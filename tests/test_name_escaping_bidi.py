"""Line and paragraph separators and bidi controls in printed names and texts (QA pass of 2026-11-27).

U+2028 and U+2029 end a line for Python's ``str.splitlines``, for JavaScript
before ES2019 and for many editors, so a tsv record holding one read as two.
The bidi formatting characters (U+202A-U+202E, U+2066-U+2069, U+200E,
U+200F, U+061C) reorder what a terminal shows: ``evil\\u202etxt.exe``
displays as ``evilexe.txt`` ("Trojan Source"), in a list that goes on to
``xargs rm``. Every output that escapes control characters escapes these
too, as ``\\uNNNN``, which :func:`simdoc.output.unescape_name` undoes.
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

SEPARATORS = "\u2028\u2029"
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
# What must never reach stdout raw: these, NEL (a C1 control) and every other control but tab and newline.
_RAW = re.compile(f"[{SEPARATORS}{BIDI}\x00-\x08\x0b-\x1f\x7f-\x9f]")

EVIL = "evil\u202etxt.exe"  # shows as "evilexe.txt"
LINES = "line\u2028sep.txt"
NAMES = (EVIL, LINES, "plain.txt")  # EVIL sorts first: the sample member of `stats`
EVIL_OUT, LINES_OUT = "evil\\u202etxt.exe", "line\\u2028sep.txt"


@pytest.mark.parametrize("c", [*SEPARATORS, *BIDI, "\x85"])
def test_escape_name_writes_each_as_a_u_escape(c):
    printed = output.escape_name(f"a{c}b")
    assert printed == f"a\\u{ord(c):04x}b"
    assert output.unescape_name(printed) == f"a{c}b"
    assert len(printed.splitlines()) == 1


def test_a_name_spelling_such_an_escape_stays_apart_from_one_holding_the_character():
    literal = "evil\\u202etxt.exe"  # a backslash and five characters, as a file may be named
    assert output.escape_name(literal) == "evil\\\\u202etxt.exe"
    assert output.escape_name(literal) != output.escape_name(EVIL)
    assert output.unescape_name(output.escape_name(literal)) == literal


def test_visible_text_escapes_them_and_keeps_the_layout():
    text = f"one\ttwo\nthree {EVIL} four{SEPARATORS}five\x85"
    assert output.visible_text(text) == "one\ttwo\nthree evil\\u202etxt.exe four\\u2028\\u2029five\\u0085"


def test_json_line_writes_them_as_escapes():
    record = {"doc": EVIL + LINES + BIDI}
    line = output.json_line(record)
    assert not _RAW.search(line) and len(line.splitlines()) == 1
    assert "\\u202e" in line and "\\u2028" in line
    assert json.loads(line) == record


names = st.text(
    st.one_of(
        st.characters(blacklist_categories=("Cs",)),
        st.sampled_from(f"\\\t\n\rxu0\x1b\x7f\x85\x9b{SEPARATORS}{BIDI}"),
        st.integers(0x80, 0xFF).map(lambda b: chr(0xDC00 + b)),  # a byte that is not UTF-8 (surrogateescape)
    )
)


@given(names, names)
def test_escape_name_round_trips_and_shows_none_of_them(a, b):
    out = output.escape_name(a)
    assert not _RAW.search(out) and "\t" not in out and "\n" not in out
    assert len(out.splitlines()) <= 1
    assert output.unescape_name(out) == a
    assert (out == output.escape_name(b)) == (a == b)


@given(names)
def test_json_line_round_trips_and_shows_none_of_them(a):
    line = output.json_line({"doc": a})
    assert not _RAW.search(line) and len(line.splitlines()) == 1
    assert json.loads(line) == {"doc": a}


@pytest.fixture
def corpus(tmp_path):
    corpus = tmp_path / "c"
    for name in NAMES:
        write(corpus / name, TEXT_A)
    return corpus


def _names_of_tsv(stdout: str, columns: slice) -> set[str]:
    return {output.unescape_name(f) for line in stdout.split("\n") if line for f in line.split("\t")[columns]}


def test_pairs_print_them_escaped_in_every_format(run, corpus, tmp_path):
    idx = tmp_path / "idx"
    tsv = run("pairs", corpus, "--index", idx, "-f", "tsv")
    assert tsv.exit_code == 0, tsv.stderr
    assert not _RAW.search(tsv.stdout)
    assert tsv.stdout.splitlines() == [
        f"{EVIL_OUT}\t{LINES_OUT}\t1.0000\t1.0000",
        f"{EVIL_OUT}\tplain.txt\t1.0000\t1.0000",
        f"{LINES_OUT}\tplain.txt\t1.0000\t1.0000",
    ]
    assert _names_of_tsv(tsv.stdout, slice(0, 2)) == set(NAMES)
    csv = run("pairs", "--index", idx, "-f", "csv")
    assert csv.exit_code == 0, csv.stderr
    assert not _RAW.search(csv.stdout)
    assert csv.stdout.splitlines()[1] == f"{EVIL_OUT},{LINES_OUT},1.0000,1.0000"
    table = run("pairs", "--index", idx, "-f", "table")
    assert table.exit_code == 0, table.stderr
    assert not _RAW.search(table.stdout)
    assert EVIL_OUT in table.stdout and LINES_OUT in table.stdout
    jsonl = run("pairs", "--index", idx, "-f", "jsonl")
    assert jsonl.exit_code == 0, jsonl.stderr
    assert not _RAW.search(jsonl.stdout) and len(jsonl.stdout.splitlines()) == 3
    assert {json.loads(x)[k] for x in jsonl.stdout.splitlines() for k in ("doc_a", "doc_b")} == set(NAMES)
    raw = run("pairs", "--index", idx, "-0")  # -0: raw bytes, for xargs -0, as before
    assert raw.stdout.split("\0")[:2] == [EVIL, LINES]


def test_query_clusters_and_dedup_print_them_escaped(run, corpus, tmp_path):
    idx = tmp_path / "idx"
    assert run("pairs", corpus, "--index", idx, "-q").exit_code == 0
    q = run("query", corpus / "plain.txt", "--index", idx, "-f", "tsv")
    assert q.exit_code == 0, q.stderr
    assert not _RAW.search(q.stdout) and _names_of_tsv(q.stdout, slice(1, 2)) == set(NAMES)
    c = run("clusters", "--index", idx)
    assert c.exit_code == 0, c.stderr
    assert c.stdout == f"1\t3\t{EVIL_OUT}\t{LINES_OUT}\tplain.txt\n"
    cj = run("clusters", "--index", idx, "-f", "jsonl")
    assert not _RAW.search(cj.stdout) and json.loads(cj.stdout)["members"] == list(NAMES)
    d = run("dedup", "--index", idx, "-f", "tsv")
    assert d.exit_code == 0, d.stderr
    assert d.stdout == f"{LINES_OUT}\t{EVIL_OUT}\nplain.txt\t{EVIL_OUT}\n"
    dj = run("dedup", "--index", idx, "-f", "jsonl")
    assert not _RAW.search(dj.stdout) and json.loads(dj.stdout) == {"cluster_id": 1, "keep": EVIL, "drop": [LINES, "plain.txt"]}


def test_show_prints_names_and_text_escaped(run, corpus, tmp_path):
    write(corpus / "b.txt", f"The quick brown fox jumps over{SEPARATORS[0]}the lazy {EVIL} dog while the farmer sleeps.\n")
    r = run("show", corpus, "--index", tmp_path / "idx", EVIL, "b.txt", "-q", "--min-words", "3")
    assert r.exit_code == 0, r.stderr
    assert not _RAW.search(r.stdout)
    assert r.stdout.startswith(f"A  {EVIL_OUT}  (")
    assert f"A: {EVIL_OUT}" in r.stdout.splitlines()
    # The words of a text are printed one space apart (U+2028 is whitespace to them); a word keeps its U+202E.
    assert "lazy]] evil\\u202etxt.exe [[2:" in r.stdout
    j = run("show", corpus, "--index", tmp_path / "idx", EVIL, "b.txt", "-q", "-f", "json")
    assert j.exit_code == 0, j.stderr
    assert not _RAW.search(j.stdout) and json.loads(j.stdout)["doc_a"] == EVIL


def test_stats_prints_them_escaped(run, corpus, tmp_path):
    with open(os.path.join(os.fsencode(corpus), os.fsencode(f"bin{BIDI[4]}.dat")), "wb") as fh:
        fh.write(b"x\x00")  # binary: skipped, listed by `stats --skipped`
    idx = tmp_path / "idx"
    assert run("pairs", corpus, "--index", idx, "-q").exit_code == 0
    r = run("stats", "--index", idx)
    assert r.exit_code == 0, r.stderr
    assert not _RAW.search(r.stdout)
    assert f"{EVIL_OUT}  (a group of exact copies)" in r.stdout
    s = run("stats", "--index", idx, "--skipped")
    assert s.exit_code == 0, s.stderr
    assert not _RAW.search(s.stdout) and s.stdout.startswith("bin\\u202e.dat\t")
