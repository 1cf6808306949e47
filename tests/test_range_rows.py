"""A JSON Lines range read as columns (issue 29): the usual line by one scanner call, the task's
result made without an object per member, and both exactly what the general path gives."""

from __future__ import annotations

import json
from unittest import mock

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simdoc.corpus import jsonl_at, jsonl_ranges
from simdoc.corpus.jsonl_ranges import read_range
from simdoc.corpus.read import identity, member_identities
from simdoc.params import ShingleParams, SignatureParams
from simdoc.stages import scan
from simdoc.stages.scan import ScanTask, _scan

_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12) | st.sampled_from(
    ["harbour tide table", "", " x ", "caf\u00e9", "\u2028", "\ufeffbom"]
)
_LINE = st.one_of(
    _TEXT.map(lambda t: json.dumps({"text": t})),
    _TEXT.map(lambda t: json.dumps({"text": t}, ensure_ascii=False)),
    _TEXT.map(lambda t: json.dumps({"title": "x", "text": t, "n": [1, 2.5, None, True]})),
    st.sampled_from(
        [
            "", "   ", "\t", "\u2028", "not json", "[]", "1", '"text"', "null", '{"text": 3}', '{"text": null}',
            '{"title": "no text"}', ' {"text": "lead"}', '{"text": "trail"} ', '{"text": "trail"}\t',
            '\ufeff{"text": "bom"}', '{"text": "a"}{"text": "b"}', '{"text": "a"}, 1', '{"text": "\\ud800 lone"}',
            '{"text": "dup", "text": "second"}', '{"text": "NaN", "v": NaN}', '{"text": "x"', '{"text": "ctl \x01"}',
            '{"text": "a\\nb"}', '{"text": 1e999}', "[" * 3000 + "]" * 3000,
        ]
    ),
)


def _write(path, lines: list[str], crlf: bool) -> None:
    path.write_bytes(("\r\n" if crlf else "\n").join(lines).encode("utf-8", "surrogatepass") + b"\n")


def _read(path, start: int, end: int, max_bytes):
    p = read_range(str(path), "a.jsonl", start, end, max_bytes=max_bytes)
    rows = p.rows.docs("a.jsonl") if p.rows is not None else []
    return rows, p.n_lines, p.n_docs, p.problems, p.fields_seen, p.cut, p.replaced


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(_LINE, max_size=12), crlf=st.booleans(), start=st.integers(0, 80), max_bytes=st.sampled_from([None, 8]))
def test_the_usual_line_by_one_scanner_call_is_what_json_loads_gives(tmp_path, lines, crlf, start, max_bytes):
    path = tmp_path / "a.jsonl"
    _write(path, lines, crlf)
    fast = _read(path, start, start + 120, max_bytes)
    with mock.patch.object(jsonl_ranges, "FAST", False):
        slow = _read(path, start, start + 120, max_bytes)
    assert fast == slow


def test_member_identities_are_identity_of_each():
    digests = [bytes(range(i, i + 16)) for i in range(5)]
    for how in ("jsonl", "warc", "parquet"):
        got = member_identities(np.frombuffer(b"".join(digests), dtype=np.uint8).reshape(-1, 16), how)
        assert [g.tobytes() for g in got] == [identity(d, how, f"f/#{i}") for i, d in enumerate(digests)]


def _task(path, span, **shingle) -> ScanTask:
    return ScanTask([("a.jsonl", str(path), path.stat().st_size, None)], ShingleParams(**shingle).resolved(), SignatureParams().resolved(), span=span)


def test_a_range_task_makes_no_object_per_member_and_gives_what_the_general_path_gives(tmp_path):
    path = tmp_path / "a.jsonl"
    texts = [f"record {i} harbour tide table mountain goats caf\u00e9" for i in range(300)]
    _write(path, [json.dumps({"text": t}) for t in texts] + ["not json", '{"t": 1}'], False)
    task = _task(path, (1000, 9000))
    with mock.patch.object(scan, "DocOut", side_effect=AssertionError("a DocOut per member")):
        lean = _scan(task)
    assert len(lean.docs) > 50
    # The general path (--min-length asks for it) with a bound every document passes.
    general = _scan(_task(path, (1000, 9000), min_length=1))
    assert lean.docs == general.docs
    assert (lean.signatures == general.signatures).all()
    assert lean.files[0].__reduce__() == general.files[0].__reduce__()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lines=st.lists(_LINE, min_size=1, max_size=15), picks=st.lists(st.integers(0, 40), max_size=20),
    block=st.sampled_from([1, 64, 1 << 18]), gap=st.sampled_from([0, 30, 1 << 13]), cut=st.integers(0, 40),
    max_bytes=st.sampled_from([None, 8]),
)
def test_members_read_at_their_locations_in_blocks_are_those_read_one_by_one(tmp_path, lines, picks, block, gap, cut, max_bytes):
    """texts_at reads lines close together by one read, and takes the usual line by one scanner
    call: the texts are those of a seek and read and json.loads each (the file cut short too)."""
    path = tmp_path / "a.jsonl"
    _write(path, lines, False)
    raw = path.read_bytes()
    starts = [0] + [i + 1 for i, b in enumerate(raw) if b == 10][:-1]
    at = {f"m{k}": (starts[p % len(starts)], len(lines[p % len(starts)].encode("utf-8", "surrogatepass"))) for k, p in enumerate(picks)}
    at["gone"] = (-1, 3)
    at["past the end"] = (len(raw) + 5, 4)
    path.write_bytes(raw[: max(len(raw) - cut, 0)])
    with mock.patch.object(jsonl_at, "BLOCK_BYTES", block), mock.patch.object(jsonl_at, "_GAP_BYTES", gap):
        got = jsonl_at.texts_at(str(path), at, max_bytes=max_bytes)
    with mock.patch.object(jsonl_at, "BLOCK_BYTES", 0), mock.patch.object(jsonl_ranges, "FAST", False):
        one_by_one = jsonl_at.texts_at(str(path), at, max_bytes=max_bytes)
    assert got == one_by_one


def test_members_are_looked_up_as_columns_not_row_by_row(tmp_path):
    """read_batch gathers its members' ids, sources, digests and places in one go per column (a
    row lookup each was most of their cost at 10^6 records), reading what a lookup each read."""
    import numpy as np

    import simdoc
    from simdoc.stages.reread import reader_of
    from simdoc.store import doctable
    from simdoc.store.loaded import open_index

    (tmp_path / "c").mkdir()
    base = "harbour tide table mountain goats climb steep paths at dawn"
    for name in ("a", "b"):
        rows = [json.dumps({"text": f"{base} {name} {i % 3}"}) for i in range(30)]
        (tmp_path / "c" / f"{name}.jsonl").write_text("\n".join(rows) + "\n")
    (tmp_path / "c" / "plain.txt").write_text(base)
    simdoc.find_pairs(tmp_path / "c", tmp_path / "i", threshold=0.5, jobs=1, verify=False)
    reader = reader_of(open_index(tmp_path / "i", lazy_ids=True))
    docs = [40, 3, 59, 7, 33, 0, 60, 12]  # of both files, in no order, and the plain file
    table = reader.table
    want = {}
    for d in docs:  # one at a time, as a row lookup each
        sets, rows = reader.read_batch([d])
        want[d] = sets.slice(rows[d], rows[d] + 1)
    with mock.patch.object(doctable.Strings, "__getitem__", side_effect=AssertionError("a row looked up")):
        members = [d for d in docs if table.columns["how"][d] != 0]
        sets, rows = reader.read_batch(members)
    assert all(rows[d] >= 0 for d in members)
    for d in members:
        got = sets.slice(rows[d], rows[d] + 1)
        assert np.array_equal(got.data, want[d].data) and np.array_equal(got.counts, want[d].counts)


def test_a_line_nested_too_deeply_is_skipped_with_a_warning_not_a_crash(tmp_path):
    import simdoc

    (tmp_path / "c").mkdir()
    rows = [json.dumps({"text": "harbour tide table mountain goats"})] * 2 + ["[" * 5000 + "]" * 5000]
    (tmp_path / "c" / "a.jsonl").write_text("\n".join(rows) + "\n")
    result = simdoc.find_pairs(tmp_path / "c", tmp_path / "i", threshold=0.5, jobs=1)
    assert [(p.doc_a, p.doc_b) for p in result] == [("a.jsonl/#1", "a.jsonl/#2")]
    assert any("line 3: JSON nested too deeply to parse, skipped" in w for s in result.stages for w in s.warnings)


@settings(max_examples=100, deadline=None)
@given(lines=st.lists(st.integers(0, 10**15) | st.integers(0, 120), max_size=50), prefix=st.sampled_from([b"", b"a.jsonl/#", "d\u00e9j\u00e0/#".encode()]))
def test_line_ids_are_the_prefix_and_the_decimal_digits(lines, prefix):
    import numpy as np

    blob, offsets = jsonl_ranges.line_ids(prefix, np.array(lines, dtype=np.int64))
    raw = blob.tobytes()
    assert blob.dtype == np.uint8 and offsets.dtype == np.int64 and len(offsets) == len(lines) + 1
    assert [raw[a:b] for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())] == [prefix + str(x).encode() for x in lines]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 10**17 + 5) | st.integers(0, 1200), max_size=60))
def test_string_order_is_the_order_of_the_numbers_as_strings(numbers):
    """The join's order of line-numbered ids (their numbers compared as decimal strings), made
    with integers, is Python's stable sort of the strings; the widest numbers take the bytes way."""
    from simdoc.stages.ranges import string_order

    want = sorted(range(len(numbers)), key=lambda i: str(numbers[i]))
    assert string_order(np.array(numbers, dtype=np.int64)).tolist() == want
