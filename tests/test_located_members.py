"""Members of plain JSON Lines files located as columns for verification (issue 29, item 3).

Verification looks a batch's members up by the docs table's columns, reads
their lines in on-disk order by few reads, and shingles their texts straight
into the rows it holds (simdoc.stages.located, simdoc.corpus.jsonl_at). The
Jaccards must be those of the texts indexed, read one at a time, however the
reads and the chunks are cut; a member edited in place is stale.
"""

from __future__ import annotations

import json
from unittest import mock

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import simdoc
from simdoc import similarity
from simdoc.corpus import jsonl_at
from simdoc.shingling import shingle_texts
from simdoc.stages import verify
from simdoc.stages.reread import reader_of
from simdoc.store import docnames, doctable
from simdoc.store.loaded import open_index

_WORDS = ["harbour", "tide", "table", "goats", "caf\u00e9", "\u0130stanbul", "\u03a3\u039f\u03a3", "x\ud800y", "dawn", "\u00e9t\u00e9"]
_RECORD = st.lists(st.sampled_from(_WORDS), min_size=0, max_size=14).map(" ".join)
_FILE = st.lists(st.tuples(_RECORD, st.booleans(), st.sampled_from(["ok", "ok", "ok", "not json", "no text"])), min_size=1, max_size=8)


def _line(text: str, ascii_only: bool, kind: str) -> str:
    if kind == "not json":
        return "not json at all"
    if kind == "no text":
        return json.dumps({"t": text})
    return json.dumps({"id": 1, "text": "w " + text}, ensure_ascii=ascii_only)


def _reference(raw: dict[str, bytes], table: doctable.DocsTable, docs: np.ndarray) -> list[str]:
    """Each member's text as indexed: the bytes at its place in the file as written, parsed by json.loads."""
    out = []
    for d in docs.tolist():
        line = raw[table.sources[d]][int(table.columns["offset"][d]) :][: int(table.columns["length"][d])]
        out.append(json.loads(line.decode("utf-8-sig", errors="replace"))["text"])  # (invalid bytes: as the scan)
    return out


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    files=st.lists(_FILE, min_size=1, max_size=2), bom=st.booleans(), chunk=st.sampled_from([1, 300, 8 << 20]), budget=st.sampled_from([1, 1000, 1 << 20]),
    block=st.sampled_from([0, 40, 1 << 18]), gap=st.sampled_from([0, 100, 1 << 13]), edits=st.lists(st.integers(0, 99), max_size=3),
)
def test_members_located_as_columns_give_the_jaccards_of_their_texts_one_at_a_time(tmp_path_factory, files, bom, chunk, budget, block, gap, edits):
    tmp = tmp_path_factory.mktemp("c")
    (tmp / "c").mkdir()
    raw = {}
    for f, rows in enumerate(files):
        rows = [("harbour tide", True, "ok"), *rows]  # (a file of no member is skipped)
        body = "".join(_line(t, a, k) + "\n" for t, a, k in rows).encode("utf-8", "surrogatepass")
        raw[f"f{f}.jsonl"] = (b"\xef\xbb\xbf" if bom and f == 0 else b"") + body
        (tmp / "c" / f"f{f}.jsonl").write_bytes(raw[f"f{f}.jsonl"])
    simdoc.find_pairs(tmp / "c", tmp / "i", threshold=0.5, jobs=1, verify=False)
    reader = reader_of(open_index(tmp / "i"))
    table = reader.table
    n = len(table)
    if n < 2:
        return
    docs = np.arange(n, dtype=np.int64)
    texts = _reference(raw, table, docs)
    # Edited in place (same length, other text): stale, its pairs not compared.
    edited = set()
    for e in edits:
        d = e % n
        at = int(table.columns["offset"][d]) + raw[table.sources[d]][int(table.columns["offset"][d]) :].index(b'"text": "w') + 9
        path = tmp / "c" / table.sources[d]
        data = bytearray(path.read_bytes())
        data[at : at + 1] = b"v"
        path.write_bytes(bytes(data))
        edited.add(d)
    left, right = (a.ravel() for a in np.triu_indices(n, 1))
    want_sets = shingle_texts(texts, reader.spec, form="sets64")
    want_set, want_bag = similarity.jaccards_of_sums(similarity.pair_sums(want_sets, left, right))
    with mock.patch.object(verify, "CHUNK_BYTES", chunk), mock.patch.object(jsonl_at, "BLOCK_BYTES", block), mock.patch.object(jsonl_at, "_GAP_BYTES", gap):
        got = verify.verify_pairs(reader, left, right, jobs=1, budget=budget)
    ok = np.array([a not in edited and b not in edited for a, b in zip(left.tolist(), right.tolist())], dtype=bool)
    assert (got.ok == ok).all()
    assert got.stale == edited and not got.gone
    assert np.array_equal(got.set_jaccard[ok], want_set[ok]) and np.array_equal(got.bag_jaccard[ok], want_bag[ok])


def test_members_are_located_by_columns_not_a_row_lookup_each(tmp_path):
    """No id, source or key is looked up row by row to read members again (356,030 lookups were
    half of verification's time at 10^6 records), and the file is not parsed whole."""
    from simdoc.corpus import read

    (tmp_path / "c").mkdir()
    base = "harbour tide table mountain goats climb steep paths at dawn"
    for name in ("a", "b"):
        rows = [json.dumps({"text": f"{base} {name} {i % 3}"}) for i in range(30)]
        (tmp_path / "c" / f"{name}.jsonl").write_text("\n".join(rows) + "\n")
    simdoc.find_pairs(tmp_path / "c", tmp_path / "i", threshold=0.5, jobs=1, verify=False)
    reader = reader_of(open_index(tmp_path / "i"))
    left, right = (a.ravel() for a in np.triu_indices(len(reader.table), 1))
    row = AssertionError("a row looked up")
    with mock.patch.object(docnames.Column, "__getitem__", side_effect=row), mock.patch.object(docnames.Names, "key", side_effect=row), \
            mock.patch.object(read, "read_file", side_effect=AssertionError("the whole file parsed again")):
        got = verify.verify_pairs(reader, left, right, jobs=1)
    assert got.ok.all() and (got.set_jaccard[got.set_jaccard > 0.99] == 1.0).sum() == 2 * 3 * 45


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(st.tuples(_RECORD, st.booleans(), st.sampled_from(["ok", "ok", "not json", "no text"])), min_size=1, max_size=8),
    st.lists(st.tuples(st.integers(0, 7), st.sampled_from(["\n", "\r", "x", "\ufeff", "\"", "{"])), max_size=3),
    st.booleans(),
    st.sampled_from([None, 40, 400]),
)
def test_lines_by_the_scanner_are_the_texts_of_each_line_parsed_alone(tmp_path_factory, records, edits, bom, max_bytes):
    """line_utf8 (the usual lines by one call of the compiled scanner) gives, for every place,
    the UTF-8 of what member_text gives of that line alone, after edits in place that put a
    newline, a BOM or broken JSON where a member's line was (then the lines no longer match
    their places, and none may be taken from a neighbour's)."""
    folder = tmp_path_factory.mktemp("lines")
    text = ("\ufeff" if bom else "") + "".join(_line(t, a, k) + "\n" for t, a, k in records)
    raw = bytearray(text.encode("utf-8", "surrogatepass"))
    places, at = [], 0
    for line in raw.split(b"\n")[:-1]:
        places.append((at, len(line)))
        at += len(line) + 1
    for i, char in edits:  # an edit in place: same length, another byte
        if raw:
            raw[min(i * 13, len(raw) - 1)] = char.encode("utf-8")[0]
    path = folder / "f.jsonl"
    path.write_bytes(bytes(raw))
    offsets = np.array([p[0] for p in places], dtype=np.int64)
    lengths = np.array([p[1] for p in places], dtype=np.int64)
    got = jsonl_at.line_utf8(str(path), offsets, lengths, "text", max_bytes)
    want = [None if t is None else t.encode("utf-8", "surrogatepass") for t in jsonl_at.line_texts(str(path), offsets, lengths, "text", max_bytes)]
    assert got == want
