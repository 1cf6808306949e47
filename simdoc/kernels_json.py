"""JSON Lines records to their texts' UTF-8 bytes in one compiled pass, no Python object per line (issue 29).

:func:`scan_lines` reads a buffer of lines (``\\n`` between them, as a range of
a JSON Lines file is read) and, for each *usual* line, writes its text's UTF-8
bytes (escapes decoded) into one output buffer, the texts one after another.
A line is usual when ``json.loads(line.decode("utf-8"))[field]`` is a ``str``
and nothing needs saying of the line: the line is strict UTF-8, exactly one
JSON object with only ``" \\t\\n\\r"`` around it, with the key ``field`` (the
last one wins, as in a ``dict``) holding a string. Any other line is flagged,
and the caller takes it the reference way (the Python path, which says what is
wrong). It is exact or it flags, and it flags whenever in doubt:

* a top-level key written with a backslash (it might spell ``field``);
* a ``\\u`` escape of a surrogate that is not part of a pair (Python keeps the
  lone surrogate; the caller's path carries it);
* containers nested deeper than :data:`DEPTH` (Python's parser recurses and
  stops at its recursion limit, much deeper);
* a number longer than :data:`NUMBER_CHARS` characters (Python refuses an
  integer of more than 4,300 digits);
* a line longer than the caller's bound.

Everything else follows Python's ``json`` module with its defaults: ``NaN``,
``Infinity`` and ``-Infinity`` are values; a control character (< 0x20) inside
a string is an error; ``\\uXXXX`` takes upper and lower case hex digits and a
surrogate pair is one character; a number is ``-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][-+]?[0-9]+)?``
(a ``.`` or ``e`` not followed by a digit cannot be followed by anything a
container allows either, so it is an error here too).

The tests compare every verdict and text with ``json.loads`` over random
objects, escapes, whitespace, repeated keys, invalid UTF-8 and cut lines.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simdoc.jit import CACHE, ENABLED

DEPTH = 64  # containers nested deeper than this are flagged
NUMBER_CHARS = 4000  # a longer number is flagged (Python refuses an int of more than 4,300 digits)


@dataclass
class UsualLines:
    """What :func:`scan_lines` found: for each line (in order, from the buffer's start), where it
    starts and how long it is (without its ``\\n``), whether it is usual, and for a usual one
    where its text is in ``texts`` (UTF-8) and how many code points it has."""

    starts: np.ndarray  # int64, into the buffer
    lengths: np.ndarray  # int64
    usual: np.ndarray  # bool
    text_starts: np.ndarray  # int64, into texts (usual lines only; a usual line's text ends where the next one's starts)
    text_ends: np.ndarray  # int64
    chars: np.ndarray  # int64, the text's code points
    texts: np.ndarray  # uint8, the usual lines' texts one after another


def scan_lines(data: bytes, limit: int, field: str, bound: int) -> UsualLines | None:
    """The lines of ``data`` that start before ``limit`` (the last one may go on past it, to the
    next ``\\n`` or the end of ``data``), each usual or not (see the module docstring) for the text
    field ``field``; lines longer than ``bound`` bytes are not usual. None without numba, or for a
    field name that is not valid UTF-8 (the caller's Python path takes every line)."""
    if not ENABLED:
        return None
    try:
        key = np.frombuffer(field.encode("utf-8"), dtype=np.uint8)
    except UnicodeEncodeError:
        return None
    raw = np.frombuffer(data, dtype=np.uint8)
    limit = min(limit, len(data))
    room = data.count(b"\n", 0, limit) + 1 if limit > 0 else 0
    starts, lengths, text_starts, text_ends, chars = (np.empty(room, np.int64) for _ in range(5))
    usual = np.zeros(room, np.bool_)
    out = np.empty(max(len(data), 1), np.uint8)
    n, used = _scan_lines(raw, limit, bound, key, out, starts, lengths, usual, text_starts, text_ends, chars, np.empty(DEPTH, np.uint8))
    return UsualLines(starts[:n], lengths[:n], usual[:n], text_starts[:n], text_ends[:n], chars[:n], out[:used])


if ENABLED:
    from numba import njit

    @njit(cache=CACHE, nogil=True)
    def _scan_lines(raw, limit, bound, key, out, starts, lengths, usual, text_starts, text_ends, chars, stack):
        """The loop of :func:`scan_lines`: returns the number of lines and the bytes of ``out`` used."""
        n = 0
        q = 0
        p = 0
        size = raw.shape[0]
        while p < limit and p < size:
            # Parsed up to the line's end, which the parse finds: no rule takes a \n (it is
            # whitespace to JSON, but no line holds one), so one met early fails the parse.
            end, count, stop = _object(raw, p, size, key, out, q, stack)
            if end < 0 or stop - p > bound:
                stop = p
                while stop < size and raw[stop] != 10:
                    stop += 1
                end = -1
            starts[n], lengths[n], text_starts[n] = p, stop - p, q
            usual[n] = end >= 0
            text_ends[n], chars[n] = (end, count) if end >= 0 else (q, 0)
            q = text_ends[n]
            n += 1
            p = stop + 1
        return n, q

    @njit(cache=CACHE, nogil=True)
    def _object(b, p, e, key, out, q, stack):
        """The line from b[p] as one JSON object: (where its text ends in ``out``, written from ``q``,
        its code points, where the line ends: at a \n or ``e``), or (-1, 0, 0) if it is not usual."""
        p = _ws(b, p, e)
        if p >= e or b[p] != 123:  # {
            return -1, 0, 0
        p = _ws(b, p + 1, e)
        found = False
        end = q
        count = 0
        if p < e and b[p] == 125:  # {}: no text
            return -1, 0, 0
        while True:
            if p >= e or b[p] != 34:  # "
                return -1, 0, 0
            k = p + 1
            while k < e:
                c = b[k]
                if c == 34:
                    break
                if c == 92 or c < 0x20:  # a backslash (it may spell the field), a control character
                    return -1, 0, 0
                if c < 0x80:
                    k += 1
                else:
                    m = _utf8(b, k, e)
                    if m == 0:
                        return -1, 0, 0
                    k += m
            if k >= e:
                return -1, 0, 0
            match = k - p - 1 == key.shape[0]
            if match:
                for i in range(key.shape[0]):
                    if b[p + 1 + i] != key[i]:
                        match = False
                        break
            p = _ws(b, k + 1, e)
            if p >= e or b[p] != 58:  # :
                return -1, 0, 0
            p = _ws(b, p + 1, e)
            if p >= e:
                return -1, 0, 0
            if match and b[p] == 34:
                p, end, count = _string(b, p + 1, e, out, q, True)
                found = True
            else:
                if match:  # the last one wins: a text that is not a string
                    found = False
                p = _value(b, p, e, out, stack)
            if p < 0:
                return -1, 0, 0
            p = _ws(b, p, e)
            if p < e and b[p] == 44:  # ,
                p = _ws(b, p + 1, e)
                continue
            if p < e and b[p] == 125:  # }
                break
            return -1, 0, 0
        p = _ws(b, p + 1, e)
        if (p < e and b[p] != 10) or not found:
            return -1, 0, 0
        return end, count, p

    @njit(cache=CACHE, nogil=True, inline="always")
    def _ws(b, p, e):
        while p < e:
            c = b[p]
            if c == 32 or c == 9 or c == 13:  # and \n, which no line holds (see _scan_lines)
                p += 1
            else:
                break
        return p

    @njit(cache=CACHE, nogil=True)
    def _utf8(b, p, e):
        """The length of the strict UTF-8 sequence at b[p] (>= 0x80), 0 if it is not one."""
        c = b[p]
        if c < 0xC2:
            return 0
        if c < 0xE0:
            return 2 if p + 1 < e and (b[p + 1] & 0xC0) == 0x80 else 0
        if c < 0xF0:
            if p + 2 >= e or (b[p + 1] & 0xC0) != 0x80 or (b[p + 2] & 0xC0) != 0x80:
                return 0
            if (c == 0xE0 and b[p + 1] < 0xA0) or (c == 0xED and b[p + 1] >= 0xA0):  # overlong; a surrogate
                return 0
            return 3
        if c < 0xF5:
            if p + 3 >= e or (b[p + 1] & 0xC0) != 0x80 or (b[p + 2] & 0xC0) != 0x80 or (b[p + 3] & 0xC0) != 0x80:
                return 0
            if (c == 0xF0 and b[p + 1] < 0x90) or (c == 0xF4 and b[p + 1] >= 0x90):  # overlong; past U+10FFFF
                return 0
            return 4
        return 0

    @njit(cache=CACHE, nogil=True)
    def _hex4(b, p, e):
        """The value of four hex digits at b[p], -1 if they are not."""
        if p + 4 > e:
            return -1
        v = 0
        for i in range(4):
            c = b[p + i]
            if 48 <= c <= 57:
                d = c - 48
            elif 97 <= c <= 102:
                d = c - 87
            elif 65 <= c <= 70:
                d = c - 55
            else:
                return -1
            v = v * 16 + d
        return v

    @njit(cache=CACHE, nogil=True)
    def _string(b, p, e, out, q, write):
        """A string whose opening quote is just before b[p]: (where it ends, just past its closing
        quote, or -1; where its text ends in ``out`` if ``write``, written from ``q``; its code points)."""
        count = 0
        while p < e:
            c = b[p]
            if 0x20 <= c < 0x80 and c != 34 and c != 92:  # the usual byte, on its own
                if write:
                    out[q] = c
                    q += 1
                count += 1
                p += 1
                continue
            if c == 34:
                return p + 1, q, count
            if c == 92:
                if p + 1 >= e:
                    return -1, q, count
                d = b[p + 1]
                if d == 117:  # \uXXXX
                    u = _hex4(b, p + 2, e)
                    if u < 0:
                        return -1, q, count
                    p += 6
                    if 0xD800 <= u <= 0xDBFF:  # only as the first of a pair
                        if p + 1 < e and b[p] == 92 and b[p + 1] == 117:
                            v = _hex4(b, p + 2, e)
                            if 0xDC00 <= v <= 0xDFFF:
                                u = 0x10000 + ((u - 0xD800) << 10) + (v - 0xDC00)
                                p += 6
                            else:
                                return -1, q, count
                        else:
                            return -1, q, count
                    elif 0xDC00 <= u <= 0xDFFF:
                        return -1, q, count
                    if write:
                        q = _put(out, q, u)
                    count += 1
                    continue
                if d == 34 or d == 92 or d == 47:
                    x = d
                elif d == 98:
                    x = 8
                elif d == 102:
                    x = 12
                elif d == 110:
                    x = 10
                elif d == 114:
                    x = 13
                elif d == 116:
                    x = 9
                else:
                    return -1, q, count
                if write:
                    out[q] = x
                    q += 1
                count += 1
                p += 2
                continue
            if c < 0x20:
                return -1, q, count
            if c < 0x80:
                m = 1
            else:
                m = _utf8(b, p, e)
                if m == 0:
                    return -1, q, count
            if write:
                for i in range(m):
                    out[q + i] = b[p + i]
                q += m
            count += 1
            p += m
        return -1, q, count

    @njit(cache=CACHE, nogil=True, inline="always")
    def _put(out, q, u):
        """Code point ``u`` as UTF-8 at out[q]; returns where it ends."""
        if u < 0x80:
            out[q] = u
            return q + 1
        if u < 0x800:
            out[q] = 0xC0 | (u >> 6)
            out[q + 1] = 0x80 | (u & 0x3F)
            return q + 2
        if u < 0x10000:
            out[q] = 0xE0 | (u >> 12)
            out[q + 1] = 0x80 | ((u >> 6) & 0x3F)
            out[q + 2] = 0x80 | (u & 0x3F)
            return q + 3
        out[q] = 0xF0 | (u >> 18)
        out[q + 1] = 0x80 | ((u >> 12) & 0x3F)
        out[q + 2] = 0x80 | ((u >> 6) & 0x3F)
        out[q + 3] = 0x80 | (u & 0x3F)
        return q + 4

    @njit(cache=CACHE, nogil=True)
    def _word(b, p, e, w0, w1, w2, w3, w4, w5, w6, w7, n):
        """Where the ``n`` letters w0.. at b[p] end, -1 if they are not there."""
        if p + n > e:
            return -1
        w = (w0, w1, w2, w3, w4, w5, w6, w7)
        for i in range(n):
            if b[p + i] != w[i]:
                return -1
        return p + n

    @njit(cache=CACHE, nogil=True)
    def _scalar(b, p, e, out):
        """Where the value at b[p] that is not a container ends, -1 if it is not one."""
        c = b[p]
        if c == 34:
            return _string(b, p + 1, e, out, 0, False)[0]
        if c == 110:  # null
            return _word(b, p, e, 110, 117, 108, 108, 0, 0, 0, 0, 4)
        if c == 116:  # true
            return _word(b, p, e, 116, 114, 117, 101, 0, 0, 0, 0, 4)
        if c == 102:  # false
            return _word(b, p, e, 102, 97, 108, 115, 101, 0, 0, 0, 5)
        if c == 78:  # NaN
            return _word(b, p, e, 78, 97, 78, 0, 0, 0, 0, 0, 3)
        if c == 73:  # Infinity
            return _word(b, p, e, 73, 110, 102, 105, 110, 105, 116, 121, 8)
        q = p
        if c == 45:  # -
            q += 1
            if q < e and b[q] == 73:  # -Infinity
                return _word(b, q, e, 73, 110, 102, 105, 110, 105, 116, 121, 8)
        if q >= e:
            return -1
        if b[q] == 48:
            q += 1
        elif 49 <= b[q] <= 57:
            while q < e and 48 <= b[q] <= 57:
                q += 1
        else:
            return -1
        if q < e and b[q] == 46:  # .
            q += 1
            if q >= e or not 48 <= b[q] <= 57:
                return -1
            while q < e and 48 <= b[q] <= 57:
                q += 1
        if q < e and (b[q] == 101 or b[q] == 69):  # e E
            q += 1
            if q < e and (b[q] == 43 or b[q] == 45):
                q += 1
            if q >= e or not 48 <= b[q] <= 57:
                return -1
            while q < e and 48 <= b[q] <= 57:
                q += 1
        if q - p > NUMBER_CHARS:
            return -1
        return q

    @njit(cache=CACHE, nogil=True)
    def _key(b, p, e, out):
        """Past ``"key" :`` and the whitespace after it, in an object nested in the line; -1 if not there."""
        if p >= e or b[p] != 34:
            return -1
        p = _string(b, p + 1, e, out, 0, False)[0]
        if p < 0:
            return -1
        p = _ws(b, p, e)
        if p >= e or b[p] != 58:
            return -1
        return _ws(b, p + 1, e)

    @njit(cache=CACHE, nogil=True)
    def _value(b, p, e, out, stack):
        """Where the value at b[p] ends (containers checked whole, no deeper than DEPTH), -1 if it is not one."""
        depth = 0
        while True:
            # A value is expected at p.
            if p >= e:
                return -1
            c = b[p]
            if c == 123 or c == 91:  # { [
                if depth == DEPTH:
                    return -1
                stack[depth] = c
                depth += 1
                p = _ws(b, p + 1, e)
                if p >= e:
                    return -1
                if b[p] == c + 2:  # } ] right away
                    depth -= 1
                    p += 1
                elif c == 123:
                    p = _key(b, p, e, out)
                    if p < 0:
                        return -1
                    continue
                else:
                    continue
            else:
                p = _scalar(b, p, e, out)
                if p < 0:
                    return -1
            # After a value: close containers, or go on to the next value of one.
            while depth > 0:
                p = _ws(b, p, e)
                if p >= e:
                    return -1
                top = stack[depth - 1]
                if b[p] == top + 2:
                    depth -= 1
                    p += 1
                elif b[p] == 44:
                    p = _ws(b, p + 1, e)
                    if top == 123:
                        p = _key(b, p, e, out)
                        if p < 0:
                            return -1
                    break
                else:
                    return -1
            if depth == 0:
                return p
