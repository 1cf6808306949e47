"""The compiled JSON Lines scanner (simdoc.kernels_json): every line it takes gives exactly the text
json.loads gives, over random objects, escapes, whitespace, repeated keys, invalid UTF-8 and cut lines;
what it cannot be sure of it flags, and the usual line is taken."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simdoc import kernels_json
from simdoc.kernels_json import scan_lines

pytestmark = pytest.mark.skipif(not kernels_json.ENABLED, reason="the scanner is compiled by numba")

_FIELDS = ["text", "body", "t\u00e9xt", "a b"]
_CHARS = st.characters(codec="utf-8", exclude_categories=("Cs",))
_STR = st.text(_CHARS, max_size=10) | st.sampled_from(["", "\ud83d\ude00", "\x00\x1f\x7f", "\u2028", "\\\"/", "\ud800", "\udc00x"])
_SCALAR = st.none() | st.booleans() | st.integers() | st.floats() | _STR
_VALUE = st.recursive(_SCALAR, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_STR, inner, max_size=3), max_leaves=8)
_CLEAN = st.recursive(  # no lone surrogate: a line of these is usual
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(_CHARS, max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(_CHARS, max_size=5), inner, max_size=3), max_leaves=8,
)
_WS = st.sampled_from(["", "", " ", "\t", "\r", " \r\t ", "\x0b", "\u00a0", "\x0c"])


def _reference(line: bytes, field: str) -> str | None:
    try:
        obj = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    text = obj.get(field) if type(obj) is dict else None
    return text if type(text) is str else None


@st.composite
def _string(draw, s: str) -> str:
    """``s`` as a JSON string, each character written raw or escaped in one of the ways JSON allows."""
    out = ['"']
    for ch in s:
        how = draw(st.integers(0, 4))
        if ch in '"\\' or ord(ch) < 0x20 or how == 1:
            short = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r", "\b": "\\b", "\f": "\\f", "/": "\\/"}
            out.append(short.get(ch) or _u(ch, draw(st.booleans())))
        elif how == 2:
            out.append(_u(ch, draw(st.booleans())))
        elif how == 3 and 0xD800 <= ord(ch) <= 0xDFFF:
            out.append(_u(ch, False))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _u(ch: str, upper: bool) -> str:
    units = [ord(ch)] if ord(ch) < 0x10000 else [0xD800 + ((ord(ch) - 0x10000) >> 10), 0xDC00 + ((ord(ch) - 0x10000) & 0x3FF)]
    return "".join(f"\\u{u:04X}" if upper else f"\\u{u:04x}" for u in units)


@st.composite
def _value_text(draw, value) -> str:
    if isinstance(value, str):
        return draw(_string(value))
    if isinstance(value, float) and math.isfinite(value):
        return repr(value) if draw(st.booleans()) else json.dumps(value)
    if isinstance(value, list):
        ws = draw(_WS)
        return "[" + ws + ",".join(draw(_WS) + draw(_value_text(v)) + draw(_WS) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + draw(_WS) + ",".join(draw(_WS) + draw(_string(k)) + draw(_WS) + ":" + draw(_WS) + draw(_value_text(v)) + draw(_WS) for k, v in value.items()) + "}"
    return json.dumps(value)


@st.composite
def _line(draw) -> bytes:
    pairs = draw(st.lists(st.tuples(st.sampled_from(_FIELDS) | _STR, _VALUE | _STR), max_size=5))
    if draw(st.booleans()):
        pairs.insert(draw(st.integers(0, len(pairs))), (draw(st.sampled_from(_FIELDS)), draw(_STR)))
    if draw(st.integers(0, 3)) == 0:
        line = json.dumps(dict(pairs), ensure_ascii=draw(st.booleans()))
    else:
        parts = [draw(_WS) + draw(_string(k)) + draw(_WS) + ":" + draw(_WS) + draw(_value_text(v)) + draw(_WS) for k, v in pairs]
        line = draw(_WS) + "{" + draw(_WS) + ",".join(parts) + "}" + draw(_WS)
    raw = bytearray(line.encode("utf-8", "surrogatepass"))
    for at, byte, how in draw(st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255), st.integers(0, 3)), max_size=2)):
        if not raw:
            break
        at %= len(raw)
        if how == 0:
            raw[at] = byte
        elif how == 1:
            del raw[at]
        elif how == 2:
            del raw[at:]
        else:
            raw.insert(at, byte)
    return bytes(raw).replace(b"\n", b" ")


def _check(lines: list[bytes], field: str) -> int:
    data = b"\n".join(lines)
    got = scan_lines(data, len(data), field, 1 << 20)
    assert got is not None and len(got.starts) == len(lines) - (1 if lines and not lines[-1] else 0)
    taken = 0
    for i, line in enumerate(lines[: len(got.starts)]):
        assert data[got.starts[i] : got.starts[i] + got.lengths[i]] == line
        if got.usual[i]:
            text = bytes(got.texts[got.text_starts[i] : got.text_ends[i]]).decode("utf-8")
            assert text == _reference(line, field), line
            assert got.chars[i] == len(text)
            taken += 1
    return taken


@settings(max_examples=250, deadline=None)
@given(lines=st.lists(_line(), min_size=1, max_size=6), field=st.sampled_from(_FIELDS))
def test_a_line_taken_gives_the_text_json_loads_gives(lines, field):
    _check(lines, field)


@settings(max_examples=200, deadline=None)
@given(
    texts=st.lists(st.text(_CHARS, max_size=20), min_size=1, max_size=4), other=_CLEAN, ensure_ascii=st.booleans(),
    field=st.sampled_from(_FIELDS),
)
def test_the_usual_line_is_taken(texts, other, ensure_ascii, field):
    """A line json.dumps writes (nested values of other fields, a repeated text field: the last wins)."""
    body = ", ".join([json.dumps("other") + ": " + json.dumps(other, ensure_ascii=ensure_ascii)] + [f"{json.dumps(field, ensure_ascii=False)}: {json.dumps(t, ensure_ascii=ensure_ascii)}" for t in texts])
    line = ("{" + body + "}").encode("utf-8")
    data = line + b"\n"
    got = scan_lines(data, len(data), field, 1 << 20)
    assert got is not None and list(got.usual) == [True]
    assert bytes(got.texts).decode("utf-8") == texts[-1]


@pytest.mark.parametrize(
    "line",
    [
        b'{"text": "\\ud800"}', b'{"text": "a\\udc00"}', b'{"text": "\\ud800\\u0041"}', b'{"te\\u0078t": "spelt with an escape"}',
        b'{"text": "x", "n": ' + b"1" * 4500 + b"}", b'{"text": "x", "a": ' + b"[" * 70 + b"]" * 70 + b"}", b'\xef\xbb\xbf{"text": "bom"}',
        b'{"text": "x"} {"text": "y"}', b'{"text": 1, }', b'{"text": "x",}', b'{"text": "x", "a": [1,]}', b'{"text": "x", "a": 01}',
        b'{"text": "x", "a": 1.}', b'{"text": "x", "a": 1e}', b'{"text": "x", "a": -}', b'{"text": "x", "a": nul}',
        b'{"text": "tab\there"}', b'{"text": "\xed\xa0\x80"}', b'{"text": "\xc0\xaf"}', b'{"text": "\xf4\x90\x80\x80"}', b"{}", b"[]", b"",
        b'{"text": "a", "text": 2}', b'{"text": "x", "a": infinity}',
    ],
)
def test_what_is_not_usual_or_not_sure_is_flagged(line):
    data = line + b"\n"
    got = scan_lines(data, len(data), "text", 1 << 20)
    assert got is not None and not got.usual.any()


def test_values_json_allows_are_skipped_and_the_range_ends_where_the_limit_says():
    lines = [
        b'{"a": NaN, "b": -Infinity, "c": Infinity, "d": [true, false, null, -0.5e-3, 1E+2, {"k\\n": {}}], "text": "ok"}',
        b' \t{"text" : "crlf" }\r', b'{"text": "last"}',
    ]
    data = b"\n".join(lines)
    got = scan_lines(data, len(lines[0]) + 2, "text", 1 << 20)  # the second line starts before the limit
    assert list(got.usual) == [True, True] and bytes(got.texts) == b"okcrlf"
    got = scan_lines(data, len(data), "text", 22)  # lines longer than the bound are not usual
    assert list(got.usual) == [False, True, True]
