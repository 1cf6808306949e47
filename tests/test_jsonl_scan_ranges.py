"""A JSON Lines range read as one block, its usual lines by the compiled scanner (simdoc.kernels_json),
its texts signed and digested from one buffer: the index arrays, pairs and warnings are byte for byte
those of the line-by-line Python path, for random files cut at random range sizes."""

from __future__ import annotations

import json
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simdoc import kernels_json
from simdoc.corpus import jsonl_ranges, jsonl_rows
from test_jsonl_ranges import build, line
from test_kernels_json import _line

_ODD = st.sampled_from(
    [
        b'\xef\xbb\xbf{"text": "bom harbour tide"}', b'{"text": "lone \\ud800 harbour tide table"}', b'{"text": "bad \xff harbour"}',
        b' {"text": "lead harbour tide table"}', b'{"text": "\\u00c9t\\u00e9 \\ud83d\\ude00 harbour tide", "n": [1, {"a": NaN}]}',
        b'{"text": "harbour", "text": "tide table twice"}', b'{"text": "' + b"long harbour tide " * 12 + b'"}',
        '{"text": "\u0130stanbul \u03a3\u03c3 \U0001f600 harbour tide"}'.encode(),
    ]
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    lines=st.lists(line.map(str.encode) | _ODD | _line().map(lambda b: b.replace(b"\x00", b" ")), max_size=25),
    crlf=st.booleans(), cut_at=st.integers(1, 300), max_bytes=st.sampled_from([None, 50]), member_bytes=st.sampled_from([None, 90]),
    chunk=st.sampled_from([1 << 20, 7]),
)
def test_the_scanner_gives_the_arrays_of_the_line_by_line_path(tmp_path_factory, lines, crlf, cut_at, max_bytes, member_bytes, chunk):
    base = tmp_path_factory.mktemp("scan")
    (base / "c").mkdir()
    (base / "c" / "big.jsonl").write_bytes((b"\r\n" if crlf else b"\n").join(lines) + b"\n")
    (base / "c" / "small.txt").write_text("harbour tide table mountain goats climb steep paths\n")
    bound = mock.patch.object(jsonl_ranges, "MEMBER_BYTES", member_bytes) if member_bytes else mock.patch.object(jsonl_ranges, "FAST", True)
    with bound, mock.patch.object(jsonl_rows, "_CHUNK", chunk), mock.patch.object(jsonl_ranges, "take_lines", wraps=jsonl_ranges.take_lines) as scanned:
        fast = build(base / "c", base / "i1", cut_at, max_bytes=max_bytes)
        # (a file of one range is read whole; a line too long to hold is read line by line)
        assert scanned.called or len(b"".join(lines)) + len(lines) <= cut_at or chunk < cut_at or not kernels_json.ENABLED
        with mock.patch.object(jsonl_ranges, "FAST", False):
            slow = build(base / "c", base / "i2", cut_at, max_bytes=max_bytes)
    assert fast == slow


def test_a_line_too_long_to_hold_is_read_line_by_line(tmp_path):
    """A line that crosses the range's end and is longer than the bound: the block is not held."""
    rows = [json.dumps({"text": f"harbour tide table {i}"}) for i in range(5)]
    rows[2] = json.dumps({"text": "x" * 500})
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "big.jsonl").write_text("\n".join(rows) + "\n")
    with mock.patch.object(jsonl_ranges, "MEMBER_BYTES", 100), mock.patch.object(jsonl_rows, "_CHUNK", 16):
        got = []
        read_block = jsonl_ranges.read_block
        with mock.patch.object(jsonl_ranges, "read_block", lambda *a: got.append(read_block(*a)) or got[-1]):
            fast = build(tmp_path / "c", tmp_path / "i1", 60)
        assert not kernels_json.ENABLED or (None in got and any(got))  # the range the long line crosses is read line by line, the others as blocks
        with mock.patch.object(jsonl_ranges, "FAST", False):
            slow = build(tmp_path / "c", tmp_path / "i2", 60)
    assert fast == slow
    assert any("longer than 100 bytes" in w for w in fast[3])
