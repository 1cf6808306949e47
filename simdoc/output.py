"""Writers for pair records: tsv, csv, jsonl, and a table for terminals.

Every format carries the same four fields in the same order::

    doc_a  doc_b  estimated  jaccard

``doc_a < doc_b`` (document ids, i.e. paths relative to the corpus, compared as
Python strings: by code point, which is byte order for valid UTF-8, a byte
that is not UTF-8 counting as U+DC80..U+DCFF; README "Output"), floats
with 4 decimals, records ordered by jaccard descending, then doc_a, doc_b.
When pairs are not verified (``--no-verify``) the jaccard field is empty in
tsv/csv and ``null`` in jsonl, and the order follows the estimate.

With ``--new`` a fifth field ``new`` (a, b or both) says which document was
added or changed since the last ``--new`` report written in full. With
``--stamp`` a last field ``run`` holds when the run started, the same on
every record of the run, to split a report appended run after run.

csv and the table start with a line of field names, tsv does not (``sort``
and ``awk`` see records only); ``--header`` / ``--no-header`` change that.

Names are escaped one way in tsv, csv and the table (:func:`escape_name`):
backslash, tab, newline and carriage return as ``\\\\``, ``\\t``, ``\\n`` and
``\\r``, every other control character as ``\\xNN`` (C0 and DEL) or
``\\u00NN`` (C1, NEL U+0085 among them), the line and paragraph separators
U+2028, U+2029 and the bidi formatting characters (U+202A-U+202E,
U+2066-U+2069, U+200E, U+200F, U+061C) as ``\\uNNNN``, and each byte of a
file name that is not UTF-8 as ``\\xNN``, so one record is always one line
(for ``str.splitlines`` and editors too), nothing in a name reaches a
terminal as a control sequence or reorders what it shows (``evil\\u202etxt.exe``
would show as ``evilexe.txt``), and two names never print alike
(:func:`unescape_name` undoes it). csv then quotes a field with a comma or a
double quote, as csv does. Every jsonl line is written by :func:`json_line`,
which writes such bytes as ``\\udcNN`` escapes (``os.fsencode`` recovers them),
and every control character, separator and bidi character as a ``\\uNNNN``
escape too. ``show`` prints a document's text with the same escapes but for
the whitespace it is laid out with (:func:`visible_text`). With
``-0/--null`` every field is NUL-terminated and names are raw bytes.
"""

from __future__ import annotations

import csv
import itertools
import json
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any, TextIO

from simdoc.errors import UsageError

FIELDS = ("doc_a", "doc_b", "estimated", "jaccard")
FORMATS = ("tsv", "csv", "jsonl", "table")
_ESCAPES = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}
# Characters past the controls that no printed name or text shows raw: U+2028 and U+2029 end a
# line for str.splitlines, JavaScript before ES2019 and many editors (one record read as two);
# the bidi formatting characters reorder what a terminal shows, so that "evil\u202etxt.exe"
# reads "evilexe.txt" ("Trojan Source") in a list bound for `xargs rm`.
_SEPARATORS_BIDI = "\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c"
# Escaped: the backslash, every control character (C0, DEL, C1: a terminal acts on them, ESC
# starts a colour or a cursor move, and a line break splits a record), the characters above,
# and the bytes of file names that are not valid UTF-8, which reach us as lone surrogates
# (surrogateescape).
_ESCAPED = re.compile(f"[\\\\\x00-\x1f\x7f-\x9f{_SEPARATORS_BIDI}\udc80-\udcff]")
_UNESCAPE = re.compile(r"\\(?:x([0-9a-f]{2})|u([0-9a-f]{4})|(.))", re.DOTALL)


def _escape_one(c: str) -> str:
    named = _ESCAPES.get(c)
    if named is not None:
        return named
    n = ord(c)
    if n < 0x80:  # C0 or DEL: one byte, the same in the name on disk
        return f"\\x{n:02x}"
    if 0xDC80 <= n <= 0xDCFF:  # a byte that is not UTF-8: its lone surrogate
        return f"\\x{n - 0xDC00:02x}"
    return f"\\u{n:04x}"  # C1, a separator or a bidi character: \xNN of 0x80 and up is a byte


def escape_name(name: str) -> str:
    """A name as tsv, csv and the table print it: one line, no control character, never like another name.

    Backslash, tab, newline and carriage return become ``\\\\``, ``\\t``, ``\\n``,
    ``\\r``; any other C0 control or DEL becomes ``\\xNN`` (ESC: ``\\x1b``), a C1
    control ``\\u00NN`` (U+009B: ``\\u009b``), a line or paragraph separator or a
    bidi formatting character ``\\uNNNN`` (U+202E: ``\\u202e``); a byte that is not UTF-8 (a lone
    surrogate of surrogateescape) becomes ``\\xNN``, NN from 80 up. So ``\\xNN``
    is always the byte NN of the name as the file system holds it. The
    backslash being escaped too, a name holding the four characters ``\\xe9``
    prints ``\\\\xe9``, unlike the byte 0xE9.
    """
    return _ESCAPED.sub(lambda m: _escape_one(m.group()), name)


def _unescape_one(m: re.Match) -> str:
    if m.group(1):
        n = int(m.group(1), 16)
        return chr(n) if n < 0x80 else chr(0xDC00 + n)
    if m.group(2):
        return chr(int(m.group(2), 16))
    return {"\\": "\\", "t": "\t", "n": "\n", "r": "\r"}[m.group(3)]


def unescape_name(text: str) -> str:
    """The name :func:`escape_name` printed as ``text`` (bytes that are not UTF-8 as surrogates)."""
    return _UNESCAPE.sub(_unescape_one, text)


# Control characters but the whitespace a text is laid out with (tab, newline, VT, FF, CR), and
# the separators and bidi characters: a text's U+202E would reorder the lines after it too; and
# lone surrogates (a byte that is not UTF-8, simdoc.corpus.encodings.UNDECODABLE), which a terminal
# cannot show and a strict UTF-8 stdout cannot write.
_TEXT_CONTROL = re.compile(f"[\x00-\x08\x0e-\x1f\x7f-\x9f{_SEPARATORS_BIDI}\ud800-\udfff]")


def visible_text(text: str) -> str:
    """Document text as ``show`` prints it for people: its control characters, line and paragraph
    separators and bidi characters escaped as a name's are (ESC: ``\\x1b``, C1: ``\\u00NN``,
    U+202E: ``\\u202e``), so that none reaches the terminal, and a byte that is not UTF-8 as
    ``\\xNN`` (NN from 80 up), as in a name; the rest as it is."""
    return _TEXT_CONTROL.sub(lambda m: _escape_one(m.group()), text)


# Lone surrogates: a byte of a file name that is not UTF-8 (surrogateescape), or one a JSON
# Lines member id spelt as an escape; and DEL, the C1 controls, the separators and the bidi
# characters, which json.dumps leaves raw (it escapes C0 itself). JSON writes them as \\uXXXX
# escapes, never raw.
_JSON_ESCAPED = re.compile(f"[\x7f-\x9f{_SEPARATORS_BIDI}\ud800-\udfff]")


def json_line(record: Mapping[str, Any]) -> str:
    """One JSON object on one line, newline included: the writer of every jsonl (and json) output.

    Text stays UTF-8 as it is, but a byte of a name that is not UTF-8 is
    written ``"\\udcNN"`` (``json.loads`` gives the surrogate back, and
    ``os.fsencode`` the byte), so that every line is valid JSON in UTF-8; a
    control character, U+2028, U+2029 and a bidi formatting character are
    always a ``\\uNNNN`` escape, never raw.
    """
    text = json.dumps(record, ensure_ascii=False)  # a surrogate can only be inside a string
    return _JSON_ESCAPED.sub(lambda m: f"\\u{ord(m.group()):04x}", text) + "\n"


Record = tuple  # (doc_a, doc_b, estimated, jaccard) or, with --new, (..., new)


tsv_field = escape_name  # the name the tsv writers of clusters, dedup, stats and cache call it by


def _num(x: float | None) -> str:
    return "" if x is None else f"{x:.4f}"


# Formats whose first line may name the fields, and whether it does by default: csv and the
# table do; tsv does not, so that `sort` and `awk` see records only (sqlite-utils' --tsv has one).
HEADER_DEFAULT = {"tsv": False, "csv": True, "table": True}


def check_header(header: bool | None, fmt: str | None) -> None:
    """A header asked for where there is no line to hold one (jsonl, NUL-separated fields, paths) is a usage error."""
    if header and fmt is not None and fmt not in HEADER_DEFAULT:
        what = {"null": "-0/--null", "paths": "the path list (--format paths)"}.get(fmt, f"--format {fmt}")
        raise UsageError(
            f"--header goes with tsv, csv or table output, not with {what}",
            hint="jsonl names every field in every record; drop --header" if fmt == "jsonl" else "drop --header",
        )


def tsv_header(fields: Iterable[str]) -> str:
    """The header line of a tsv output, newline included."""
    return "\t".join(fields) + "\n"


# Records written to the stream a block at a time: one write a record was ~7 us of guarded
# stream calls (simdoc.cli.stdio), 0.5 s of printing 76,667 pairs. A pipe sees no difference
# (the stream is block-buffered there anyway).
_WRITE_LINES = 1024


def _tsv_block(block: list[Record], with_new: bool, run: str | None) -> str:
    """The tsv lines of ``block``, a column at a time (a line at a time was ~2.4 us a record)."""
    columns = [
        _escaped([r[0] for r in block]),
        _escaped([r[1] for r in block]),
        ["" if r[2] is None else f"{r[2]:.4f}" for r in block],
        ["" if r[3] is None else f"{r[3]:.4f}" for r in block],
    ]
    if with_new:
        columns.append([r[4] for r in block])
    if run is not None:
        columns.append([run] * len(block))
    return "\n".join(map("\t".join, zip(*columns))) + "\n"


def _escaped(names: list[str]) -> list[str]:
    """``escape_name`` of each name; one search of them all when none needs it (the usual case)."""
    return names if _ESCAPED.search("".join(names)) is None else list(map(escape_name, names))


def _write_lines(out: TextIO, lines: list[str]) -> int:
    """Write ``lines`` as one string and empty the list; how many there were."""
    n = len(lines)
    if n:
        out.write("".join(lines))
        lines.clear()
    return n


def write_records(
    records: Iterable[Record],
    fmt: str,
    out: TextIO,
    with_new: bool = False,
    names: tuple[str, str] = ("doc_a", "doc_b"),
    header: bool | None = None,
    run: str | None = None,
) -> int:
    """Write records in ``fmt``; returns how many were written.

    ``with_new`` adds a fifth field, ``new``: which side (a, b, both) was
    added or changed since the last ``--new`` report (``simdoc pairs --new``).
    ``run`` adds a last field, ``run``, with this value on every record
    (``simdoc pairs --stamp``: when the run started). ``names`` are the
    first two field names (``query``, ``doc`` for ``simdoc query``).
    ``header``: whether tsv, csv and the table start with the field names
    (None: the format's default, :data:`HEADER_DEFAULT`).
    """
    n = 0
    fields = [*names, *FIELDS[2:]] + (["new"] if with_new else []) + (["run"] if run is not None else [])

    def tail(new: list) -> tuple[str, ...]:  # the fields after jaccard
        return (*new[:1],) * with_new + (run,) * (run is not None)
    check_header(header, fmt)
    if header is None:
        header = HEADER_DEFAULT.get(fmt, False)
    if fmt == "tsv":
        if header:
            out.write(tsv_header(fields))
        it = iter(records)
        while block := list(itertools.islice(it, _WRITE_LINES)):
            out.write(_tsv_block(block, with_new, run))
            n += len(block)
    elif fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        if header:
            writer.writerow(fields)
        for a, b, est, jac, *new in records:
            row = (escape_name(a), escape_name(b), _num(est), _num(jac))
            writer.writerow(row + tail(new))
            n += 1
    elif fmt == "jsonl":
        lines = []
        for a, b, est, jac, *new in records:
            record = {names[0]: a, names[1]: b, "estimated": round(est, 4), "jaccard": None if jac is None else round(jac, 4)}
            record.update(zip(fields[4:], tail(new)))
            lines.append(json_line(record))
            if len(lines) == _WRITE_LINES:
                n += _write_lines(out, lines)
        n += _write_lines(out, lines)
    elif fmt == "null":
        # Every field NUL-terminated, names as the raw bytes of the file system: for xargs -0.
        binary = out.buffer if hasattr(out, "buffer") else None
        for a, b, est, jac, *new in records:
            fields_out = [os.fsencode(a), os.fsencode(b), _num(est).encode(), _num(jac).encode(), *(t.encode() for t in tail(new))]
            payload = b"".join(f + b"\0" for f in fields_out)
            if binary is not None:
                out.flush()
                binary.write(payload)
            else:
                out.write(payload.decode("utf-8", "surrogateescape"))
            n += 1
    elif fmt == "table":
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        console = Console(file=out)
        table = Table(box=None, header_style="bold", show_header=header)
        # Names are folded onto more lines, never cut: two documents of a pair often share
        # a long prefix, and an ellipsis would make them look identical. Numbers stay whole.
        for name in fields[:2]:
            table.add_column(name, overflow="fold")
        for name in fields[2:]:
            table.add_column(name, no_wrap=True, min_width=len(name))
        rows = [
            (escape_name(a), escape_name(b), _num(est), _num(jac) or "-", *tail(new))
            for a, b, est, jac, *new in records
        ]
        # Folded here, after a '/' (or '-', '_', '.') where one is in reach, rather than by
        # rich, which folds a name without spaces at the last cell that fits, mid-word.
        width_a, width_b = _name_widths(console.width, fields, rows)
        for a, b, *numbers in rows:
            # As Text: a name is never read as rich markup ("[bold]x.txt" printed "x.txt").
            table.add_row(Text(fold_name(a, width_a)), Text(fold_name(b, width_b)), *numbers)
        n = len(rows)
        console.print(table)
    else:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return n


_FOLD_AFTER = "/-_."  # where a name may go on to the next line: after a separator, never mid-word
_MIN_NAME_WIDTH = 8


def _name_widths(total: int, fields: list[str], rows: list[tuple]) -> tuple[int, int]:
    """The widths of the two name columns of the table: whole names if they fit in ``total``
    cells, else the room left by the other columns, shared so that a narrow column stays whole."""
    from rich.cells import cell_len

    def need(i: int) -> int:
        return max([cell_len(fields[i])] + [cell_len(r[i]) for r in rows])

    # box=None: one cell of padding either side of every column.
    room = total - sum(need(i) + 2 for i in range(2, len(fields))) - 4
    a, b = need(0), need(1)
    if a + b <= room:
        return a, b
    half = max(room // 2, _MIN_NAME_WIDTH)
    if a <= half:
        return a, max(room - a, _MIN_NAME_WIDTH)
    if b <= half:
        return max(room - b, _MIN_NAME_WIDTH), b
    return half, max(room - half, _MIN_NAME_WIDTH)


def fold_name(name: str, width: int) -> str:
    """``name`` on lines of at most ``width`` terminal cells, joined by newlines.

    A line ends after the last '/' that fits, unless that leaves it less than
    half full, then after the last '-', '_' or '.'; only a run of ``width``
    cells with none of them is cut where it fills the line.
    """
    from rich.cells import cell_len

    lines = []
    while cell_len(name) > width > 0:
        fit, cells = 0, 0
        for ch in name:
            cells += cell_len(ch)
            if cells > width:
                break
            fit += 1
        head = name[: max(fit, 1)]
        cut = head.rfind("/") + 1
        if cut < len(head) // 2:
            cut = max(cut, *(head.rfind(c) + 1 for c in _FOLD_AFTER))
        if cut <= 0 or cut == len(name):
            cut = len(head)
        lines.append(name[:cut])
        name = name[cut:]
    lines.append(name)
    return "\n".join(lines)
