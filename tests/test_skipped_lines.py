"""JSON Lines lines that hold no document (not JSON, no string text field) are listed by
`simdoc stats --skipped`, as WARC records left out are: they were only warned about, on the run
that read their file, so that `-q` (the cron line) and every later run lost them without a trace."""

from __future__ import annotations

import gzip
import json
from unittest import mock

from click.testing import CliRunner

from simdoc.cli import cli
from simdoc.corpus import jsonl_ranges

LINES = [json.dumps({"text": "harbour tide table mountain goats"}), "not json", json.dumps({"body": "no text"}), "",
         json.dumps({"text": 5}), json.dumps({"text": "stone bridge far from any river"})]
SKIPPED = ["line 2: not valid JSON, skipped", "line 3: no string field 'text', skipped", "line 5: no string field 'text', skipped"]


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def listed(idx) -> list[list[str]]:
    r = invoke("stats", "--index", idx, "--skipped")
    assert r.exit_code == 0, r.stderr
    return sorted(line.split("\t") for line in r.stdout.splitlines())


def expected(name: str) -> list[list[str]]:
    return sorted([f"{name}/#{why.split(':')[0].split()[1]}", why] for why in SKIPPED)


def test_lines_skipped_are_listed_by_stats_skipped_on_every_run_and_with_q(tmp_path):
    c, idx = tmp_path / "c", tmp_path / "idx"
    c.mkdir()
    (c / "d.jsonl").write_text("\n".join(LINES) + "\n")
    (c / "z.jsonl.gz").write_bytes(gzip.compress(("\n".join(LINES) + "\n").encode()))
    r = invoke("pairs", c, "--index", idx, "-q")
    assert r.exit_code == 0, r.stderr
    assert r.stderr == ""
    assert listed(idx) == expected("d.jsonl") + expected("z.jsonl.gz")
    again = invoke("pairs", c, "--index", idx, "-q")  # nothing changed: the files are not read again
    assert again.exit_code == 0, again.stderr
    assert listed(idx) == expected("d.jsonl") + expected("z.jsonl.gz")


def test_a_file_read_by_ranges_lists_the_lines_one_task_would(tmp_path):
    c = tmp_path / "c"
    c.mkdir()
    (c / "d.jsonl").write_text("\n".join(LINES * 3) + "\n")
    with mock.patch.object(jsonl_ranges, "RANGE_BYTES", 40):
        cut = invoke("pairs", c, "--index", tmp_path / "i1", "-j", "1")
    whole = invoke("pairs", c, "--index", tmp_path / "i2", "-j", "1")
    assert cut.exit_code == 0 and whole.exit_code == 0, (cut.stderr, whole.stderr)
    got = listed(tmp_path / "i1")
    assert got == listed(tmp_path / "i2")
    assert [why for _, why in got] == sorted(f"line {n}: {why.split(': ', 1)[1]}" for k in range(3) for why in SKIPPED
                                             for n in [int(why.split(":")[0].split()[1]) + 6 * k])


def test_parquet_rows_of_null_text_are_listed_whole_and_by_spans(tmp_path):
    """A Parquet row whose text is null holds no document: listed as such a JSON Lines line is,
    the same whether the file is one task or spans of row groups."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from simdoc.corpus import parquet

    c = tmp_path / "c"
    c.mkdir()
    texts = ["harbour tide table mountain goats", None, "stone bridge far from any river", None, None,
             "a lantern in the lighthouse window"] * 2
    pq.write_table(pa.table({"text": pa.array(texts, pa.string())}), c / "d.parquet", row_group_size=2)
    whole = invoke("pairs", c, "--index", tmp_path / "i1", "-q")
    with mock.patch.object(parquet, "TASK_BYTES", 40), mock.patch.object(parquet, "CUT_BYTES", 0):
        cut = invoke("pairs", c, "--index", tmp_path / "i2", "-q", "-j", "1")
    assert whole.exit_code == 0 and cut.exit_code == 0, (whole.stderr, cut.stderr)
    nulls = [n for n, t in enumerate(texts, 1) if t is None]
    want = sorted([f"d.parquet/#{n}", f"row {n}: null text, skipped"] for n in nulls)
    assert listed(tmp_path / "i1") == want
    assert listed(tmp_path / "i2") == want
    again = invoke("pairs", c, "--index", tmp_path / "i1", "-q")  # unchanged: not read again, still listed
    assert again.exit_code == 0 and listed(tmp_path / "i1") == want


def test_parquet_rows_skipped_and_short_ones_are_listed_in_one_order_whole_or_by_spans(tmp_path):
    """With --min-length too, a file read as one task lists its null rows and its short rows in
    the order the join of its spans gives (sorted as ids), not null rows first."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from simdoc.corpus import parquet

    c = tmp_path / "c"
    c.mkdir()
    texts = ["tiny", None, "harbour tide table mountain goats", "short", None, "stone bridge far from any river"] * 2
    pq.write_table(pa.table({"text": pa.array(texts, pa.string())}), c / "d.parquet", row_group_size=2)
    whole = invoke("pairs", c, "--index", tmp_path / "i1", "-q", "--min-length", "10")
    with mock.patch.object(parquet, "TASK_BYTES", 40), mock.patch.object(parquet, "CUT_BYTES", 0):
        cut = invoke("pairs", c, "--index", tmp_path / "i2", "-q", "-j", "1", "--min-length", "10")
    assert whole.exit_code == 0 and cut.exit_code == 0, (whole.stderr, cut.stderr)
    one, spans = (invoke("stats", "--index", tmp_path / i, "--skipped").stdout for i in ("i1", "i2"))
    assert one == spans and len(one.splitlines()) == 8
    # The index's own record, not only the listing (which sorts): the same for any cut.
    stored = [json.loads((tmp_path / i / "manifest.json").read_text())["stages"]["shingle"]["skipped"] for i in ("i1", "i2")]
    assert stored[0] == stored[1]


def test_a_line_too_long_to_parse_is_listed_as_the_other_lines_skipped_are(tmp_path):
    # Its problem says "longer than N bytes, skipped (a JSON Lines document is parsed whole)":
    # the list took only the kinds that end in "skipped", so this line was warned about once,
    # by the run that read it, and lost to -q and to every later run.
    from simdoc.corpus import formats

    c, idx = tmp_path / "c", tmp_path / "idx"
    c.mkdir()
    long_line = json.dumps({"text": "a long line of words " * 20})
    body = "\n".join([LINES[0], long_line, LINES[5]]) + "\n"
    (c / "d.jsonl").write_text(body)
    (c / "z.jsonl.gz").write_bytes(gzip.compress(body.encode()))
    why = "line 2: longer than 200 bytes, skipped (a JSON Lines document is parsed whole)"
    with mock.patch.object(formats, "MEMBER_BYTES", 200), mock.patch.object(jsonl_ranges, "MEMBER_BYTES", 200):
        r = invoke("pairs", c, "--index", idx, "-q", "-j", "1")
        assert r.exit_code == 0, r.stderr
        assert listed(idx) == [["d.jsonl/#2", why], ["z.jsonl.gz/#2", why]]
        with mock.patch.object(jsonl_ranges, "RANGE_BYTES", 40):  # by ranges: the same list
            cut = invoke("pairs", c, "--index", tmp_path / "i2", "-q", "-j", "1")
        assert cut.exit_code == 0, cut.stderr
        assert listed(tmp_path / "i2") == listed(idx)


def test_only_the_problems_that_leave_a_line_out_are_listed():
    from simdoc.corpus.formats import skipped_lines

    problems = {
        "not valid JSON, skipped": [(2, "")],
        "longer than 64 MiB, skipped (a JSON Lines document is parsed whole)": [(3, "")],
        "no field 'x, skipped (y)', its id is the line number": [(4, "")],
        "its id has a NUL byte; its id is the line number": [(5, "")],
        "text longer than --max-bytes 9; only the first 9 bytes are indexed": [(6, "")],
    }
    assert [n for n, _ in skipped_lines("f", problems)] == ["f/#2", "f/#3"]
