"""A span's piece as JSON, so that a span task's part holds what the join needs (issue 29).

On a Dask cluster a reading task of one span of a big file (a JSON Lines
range, a Parquet span of row groups, a WARC span of records) writes its
result to a part file of the index, and a client killed before the join
finds that part again (:mod:`simdoc.stages.resume`). The join needs the
span's :class:`~simdoc.corpus.jsonl_ranges.Piece` (or its Parquet
:class:`~simdoc.corpus.parquet.Groups`, or its WARC
:class:`~simdoc.corpus.warc_spans.Span`) besides the documents, so the piece
goes into the part too, as JSON: a part is read with ``allow_pickle=False``,
an index directory is not trusted to hold code.

The texts were dropped from a piece before it is written (its documents are
the part's columns), and so is a WARC span's ``task`` (the whole file's task,
made again by the one who reads the part). :func:`piece_of` gives back a
piece equal to the one written, tuples as tuples, or raises ValueError.
"""

from __future__ import annotations

import dataclasses

from simdoc.corpus.files import ReadResult
from simdoc.corpus.jsonl_ranges import Piece
from simdoc.corpus.parquet import Groups
from simdoc.corpus.warc_spans import Event, Span

_KINDS: dict[str, type] = {"jsonl": Piece, "parquet": Groups, "warc": Span}
_LEFT = ("docs", "rows", "task")  # not written: the texts are dropped; the whole file's task is made again


def piece_json(piece: Piece | Span) -> dict:
    """``piece`` as plain JSON values (see the module docstring)."""
    kind = next(k for k, cls in reversed(_KINDS.items()) if type(piece) is cls)
    out: dict = {"kind": kind}
    for f in dataclasses.fields(piece):
        if f.name in _LEFT:
            continue
        value = getattr(piece, f.name)
        if f.name == "expected":
            value = None if value is None else value.hex()
        elif f.name == "failed":
            value = None if value is None else [value.text, value.digest, value.warning, value.status]
        elif f.name == "events":
            value = [[getattr(e, g.name) for g in dataclasses.fields(Event)] for e in value]
        elif isinstance(value, tuple):
            value = list(value)
        out[f.name] = value
    return out


def piece_of(data: dict) -> Piece | Span:
    """The piece :func:`piece_json` gave ``data`` for; ValueError if ``data`` is not one."""
    data = dict(data)
    cls = _KINDS.get(data.pop("kind", None))
    if cls is None:
        raise ValueError("not a piece")
    names = {f.name for f in dataclasses.fields(cls)} - set(_LEFT)
    if set(data) != names:
        raise ValueError(f"a piece's fields are {sorted(names)}, not {sorted(data)}")
    if data["expected"] is not None:
        data["expected"] = bytes.fromhex(data["expected"])
    if data["failed"] is not None:
        text, digest, warning, status = data["failed"]
        data["failed"] = ReadResult(text, digest, warning, status)
    if cls is Span:
        data["events"] = [Event(*e) for e in data["events"]]
        return Span(**data)
    data["problems"] = {kind: [tuple(x) for x in seen] for kind, seen in data["problems"].items()}
    if data["keys"] is not None:
        data["keys"] = [tuple(x) for x in data["keys"]]
    if cls is Groups:
        data["seen"] = tuple(data["seen"])
    return cls([], **data)
