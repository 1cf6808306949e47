"""Writers for pair records: tsv, csv, jsonl, and a table for terminals.

Every format carries the same four fields in the same order::

    doc_a  doc_b  estimated  jaccard

``doc_a < doc_b`` (document ids, i.e. paths relative to the corpus), floats
with 4 decimals, records ordered by jaccard descending, then doc_a, doc_b.
When pairs are not verified (``--no-verify``) the jaccard field is empty in
tsv/csv and ``null`` in jsonl, and the order follows the estimate.

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

Record = tuple[str, str, float, "float | None"]


def tsv_field(name: str) -> str:
    return name.translate(_TSV_ESCAPES)


def _num(x: float | None) -> str:
    return "" if x is None else f"{x:.4f}"


def write_records(records: Iterable[Record], fmt: str, out: TextIO) -> int:
    """Write records in ``fmt``; returns how many were written."""
    n = 0
    if fmt == "tsv":
        for a, b, est, jac in records:
            out.write(f"{tsv_field(a)}\t{tsv_field(b)}\t{_num(est)}\t{_num(jac)}\n")
            n += 1
    elif fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(FIELDS)
        for a, b, est, jac in records:
            writer.writerow((a, b, _num(est), _num(jac)))
            n += 1
    elif fmt == "jsonl":
        for a, b, est, jac in records:
            rec = {"doc_a": a, "doc_b": b, "estimated": round(est, 4), "jaccard": None if jac is None else round(jac, 4)}
            out.write(json.dumps(rec, ensure_ascii=False) + "\n")
            n += 1
    elif fmt == "table":
        from rich.console import Console
        from rich.table import Table

        table = Table(*FIELDS, box=None, header_style="bold")
        for a, b, est, jac in records:
            table.add_row(a, b, _num(est), _num(jac) or "-")
            n += 1
        Console(file=out).print(table)
    else:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return n
