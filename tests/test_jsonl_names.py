"""Issue 27.3: every jsonl (and json) output is valid JSON in UTF-8, names that are not UTF-8 included.

`clusters -f jsonl` and `dedup -f jsonl` wrote a name's raw byte 0xE9 inside a
JSON string; `pairs` and `query` wrote "\\udce9". One writer now writes them
all (simdoc.output.json_line).
"""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simdoc import output
from tests.conftest import TEXT_A, TEXT_C, write

RAW = b"caf\xe9.txt"  # not UTF-8
ACCENT = "résumé.txt"


def json_lines(result) -> list:
    """Each line of stdout parsed as JSON, from the bytes, which must be UTF-8."""
    assert result.exit_code == 0, result.stderr
    text = result.stdout_bytes.decode("utf-8")  # strict: a raw byte is an error
    return [json.loads(line) for line in text.splitlines()]


@pytest.fixture
def corpus(tmp_path):
    root = tmp_path / "c"
    write(root / "a.txt", TEXT_A)
    write(root / ACCENT, TEXT_A)
    with open(os.fsencode(root) + b"/" + RAW, "w", encoding="utf-8") as fh:
        fh.write(TEXT_A)
    write(root / "other.txt", TEXT_C)
    with open(os.fsencode(root) + b"/bin\xff.dat", "wb") as fh:  # skipped as binary
        fh.write(b"\x00\x01\x02binary")
    return root


def test_clusters_and_dedup_jsonl_are_json(run, corpus, tmp_path):
    idx = tmp_path / "idx"
    clusters = json_lines(run("clusters", corpus, "--index", idx, "-f", "jsonl"))
    assert [os.fsencode(m) for m in clusters[0]["members"]] == [b"a.txt", RAW, ACCENT.encode()]
    assert clusters == [{"cluster_id": 1, "size": 3, "members": ["a.txt", os.fsdecode(RAW), ACCENT]}]
    dedup = json_lines(run("dedup", "--index", idx, "-f", "jsonl"))
    assert dedup == [{"cluster_id": 1, "keep": "a.txt", "drop": [os.fsdecode(RAW), ACCENT]}]
    absolute = json_lines(run("dedup", corpus, "--index", idx, "-f", "jsonl", "--absolute"))
    assert [os.fsencode(x) for x in absolute[0]["drop"]] == [os.fsencode(corpus) + b"/" + RAW, os.fsencode(corpus / ACCENT)]


def test_pairs_query_stats_and_show_json_are_json(run, corpus, tmp_path):
    idx = tmp_path / "idx"
    pairs = json_lines(run("pairs", corpus, "--index", idx, "-f", "jsonl"))
    assert {(os.fsencode(p["doc_a"]), os.fsencode(p["doc_b"])) for p in pairs} == {
        (b"a.txt", RAW), (b"a.txt", ACCENT.encode()), (RAW, ACCENT.encode())
    }
    # ... byte for byte as before: the surrogate escaped, other text as UTF-8.
    assert '"doc_b": "caf\\udce9.txt"' in run("pairs", "--index", idx, "-f", "jsonl").stdout
    query = json_lines(run("query", corpus / "a.txt", "--index", idx, "-f", "jsonl"))
    assert {q["doc"] for q in query} == {"a.txt", os.fsdecode(RAW), ACCENT}
    skipped = json_lines(run("stats", "--index", idx, "--skipped", "--format", "json"))
    assert [os.fsencode(s["id"]) for s in skipped] == [b"bin\xff.dat"]
    show = json_lines(run("show", corpus, "--index", idx, "a.txt", os.fsdecode(RAW), "--format", "json"))
    assert len(show) == 1 and os.fsencode(show[0]["doc_b"]) == RAW
    stats = json_lines(run("stats", "--index", idx, "--format", "json"))
    assert len(stats) == 1


@given(st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF))),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)),
    max_leaves=8,
))
def test_json_line_is_one_line_of_utf8_json_that_reads_back(value):
    line = output.json_line({"v": value})
    assert line.endswith("\n") and "\n" not in line[:-1]
    assert json.loads(line.encode("utf-8").decode("utf-8")) == {"v": value}
