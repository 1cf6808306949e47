"""Writers for pair records: tsv, csv, jsonl, and a table for terminals.

Every format carries the same four fields in the same order::

    doc_a  doc_b  estimated  jaccard

``doc_a < doc_b`` (document ids, i.e. paths relative to the corpus), floats
with 4 decimals, records ordered by jaccard descending, then doc_a, doc_b.
When pairs are not verified (``--no-verify``) the jaccard field is empty in
tsv/csv and ``null`` in jsonl, and the order follows the estimate.

With ``--new`` a fifth field ``new`` (a, b or both) says which document the
latest update added or changed.

tsv escapes backslash, tab, newline and carriage return in names as ``\\\\``,
``\\t``, ``\\n`` and ``\\r``, so one record is always one line.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable
from typing import TextIO

FIELDS = ("doc_a", "doc_b", "estimated", "jaccard")
FORMATS = ("tsv", "csv", "jsonl", "table")
_TSV_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})

Record = tuple  # (doc_a, doc_b, estimated, jaccard) or, with --new, (..., new)


def tsv_field(name: str) -> str:
    return name.translate(_TSV_ESCAPES)


def _num(x: float | None) -> str:
    return "" if x is None else f"{x:.4f}"


def write_records(
    records: Iterable[Record], fmt: str, out: TextIO, with_new: bool = False, names: tuple[str, str] = ("doc_a", "doc_b")
) -> int:
    """Write records in ``fmt``; returns how many were written.

    ``with_new`` adds a fifth field, ``new``: which side (a, b, both) the
    latest update added or changed (``simdoc pairs --new``). ``names`` are the
    first two field names (``query``, ``doc`` for ``simdoc query``).
    """
    n = 0
    fields = [*names, *FIELDS[2:]] + (["new"] if with_new else [])
    if fmt == "tsv":
        for a, b, est, jac, *new in records:
            tail = f"\t{new[0]}" if with_new else ""
            out.write(f"{tsv_field(a)}\t{tsv_field(b)}\t{_num(est)}\t{_num(jac)}{tail}\n")
            n += 1
    elif fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(fields)
        for a, b, est, jac, *new in records:
            writer.writerow((a, b, _num(est), _num(jac), *(new[:1] if with_new else ())))
            n += 1
    elif fmt == "jsonl":
        for a, b, est, jac, *new in records:
            rec = {names[0]: a, names[1]: b, "estimated": round(est, 4), "jaccard": None if jac is None else round(jac, 4)}
            if with_new:
                rec["new"] = new[0]
            out.write(json.dumps(rec, ensure_ascii=False) + "\n")
            n += 1
    elif fmt == "table":
        from rich.console import Console
        from rich.table import Table

        table = Table(*fields, box=None, header_style="bold")
        for a, b, est, jac, *new in records:
            table.add_row(a, b, _num(est), _num(jac) or "-", *(new[:1] if with_new else ()))
            n += 1
        Console(file=out).print(table)
    else:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return n
