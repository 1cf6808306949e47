"""Index format 5: a member's id is stored as its file plus its key, the file's name once (issue 29.4),
and an index of format 4 (every row's id and source) is read as it is and upgraded by its next update."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import simdoc.store.docnames as docnames
from simdoc.cli import cli
from simdoc.store.directory import FORMAT_VERSION, IndexStore
from simdoc.store.docnames import Names, encode
from simdoc.store.doctable import FORMAT_4_NAMES, NAME_ROLES
from simdoc.store.loaded import open_index
from simdoc.store.manifest import dump
from simdoc.store.npyfiles import crc32_file, data_offset


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def as_format_4(index: Path) -> None:
    """Rewrite a format-5 index as format 4 stored it: every row's id and source, in full."""
    manifest = json.loads((index / "manifest.json").read_text())
    shingle = manifest["stages"]["shingle"]
    docs = open_index(index).docs()
    full = {"id": docs.blob("id"), "source": docs.blob("source")}
    for role in NAME_ROLES:
        name = shingle["roles"].pop(role)
        shingle["files"].pop(name)
        (index / name).unlink()
    for column, (blob, offsets) in full.items():
        for role, arr in ((f"docs.{column}", blob), (f"docs.{column}.offsets", offsets)):
            name = f"{role}.{shingle['build_id']}.npy"
            np.save(index / name, arr)
            path = index / name
            shingle["roles"][role] = name
            shingle["files"][name] = {
                "bytes": path.stat().st_size, "crc32": crc32_file(path, data_offset(path)), "dtype": arr.dtype.str,
                "shape": list(arr.shape),
            }
    manifest["format_version"] = 4
    (index / "manifest.json").write_bytes(dump(manifest))


def _corpus(c: Path, n: int = 30) -> None:
    c.mkdir(parents=True)
    text = "the tide came in over the flats where the herons stood and waited for the fish"
    lines = [json.dumps({"text": f"{text} record {i % 7}"}) for i in range(n)]
    (c / "crawl.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (c / "notes").mkdir()
    (c / "notes" / "a.txt").write_text(text + " record 1")
    (c / "z.txt").write_text(text + " record 2")


def _stored(index: Path) -> dict[str, bytes]:
    shingle = IndexStore(index).read_manifest()["stages"]["shingle"]
    return {role: (index / name).read_bytes() for role, name in shingle["roles"].items()}


def test_a_member_is_stored_as_its_file_and_its_key(tmp_path):
    _corpus(tmp_path / "c", 300)
    run("pairs", tmp_path / "c", "--index", tmp_path / "i")
    stored = _stored(tmp_path / "i")
    docs = open_index(tmp_path / "i").docs()
    ids = list(docs.ids)
    assert ids[:3] == ["crawl.jsonl/#1", "crawl.jsonl/#10", "crawl.jsonl/#100"] and ids[-2:] == ["notes/a.txt", "z.txt"]
    assert list(docs.sources) == ["crawl.jsonl"] * 300 + ["", ""]
    # The file's name once (a run of its 300 members), then one run of the two files; the keys alone.
    files = np.load(tmp_path / "i" / IndexStore(tmp_path / "i").read_manifest()["stages"]["shingle"]["roles"]["docs.files"])
    assert files.tobytes() == b"crawl.jsonl"
    keys = np.load(tmp_path / "i" / IndexStore(tmp_path / "i").read_manifest()["stages"]["shingle"]["roles"]["docs.key"])
    assert b"crawl" not in keys.tobytes() and keys.tobytes().startswith(b"110100")
    assert not any(role in stored for role in FORMAT_4_NAMES)
    assert IndexStore(tmp_path / "i").read_manifest()["format_version"] == FORMAT_VERSION


def test_a_format_4_index_is_read_as_it_is_and_its_next_update_writes_format_5(tmp_path):
    c, i = tmp_path / "c", tmp_path / "i"
    _corpus(c)
    first = run("pairs", c, "--index", i, "-t", "0.5")
    assert first.exit_code == 0 and first.stdout.count("\n") > 3, first.output
    ids = list(open_index(i).docs().ids)
    as_format_4(i)
    assert IndexStore(i).read_manifest()["format_version"] == 4
    assert list(open_index(i).docs().ids) == ids and list(open_index(i, lazy_ids=True).docs().ids) == ids
    assert run("check", "--index", i).exit_code == 0
    assert run("pairs", "--index", i, "-t", "0.5").stdout == first.stdout  # read, not written
    assert IndexStore(i).read_manifest()["format_version"] == 4
    again = run("pairs", c, "--index", i, "-t", "0.5", "-v")  # nothing changed: every row kept, written as format 5's arrays
    assert again.exit_code == 0 and again.stdout == first.stdout and "0 new or changed" in again.stderr, again.output
    assert IndexStore(i).read_manifest()["format_version"] == FORMAT_VERSION
    run("pairs", c, "--index", tmp_path / "fresh", "-t", "0.5")
    upgraded, fresh = _stored(i), _stored(tmp_path / "fresh")
    assert upgraded.keys() == fresh.keys()
    for role in upgraded:
        assert role == "docs.added" or upgraded[role] == fresh[role], role


def test_a_format_4_row_whose_id_is_not_source_and_key_is_refused(tmp_path):
    c, i = tmp_path / "c", tmp_path / "i"
    _corpus(c, 3)
    run("pairs", c, "--index", i)
    as_format_4(i)
    manifest = json.loads((i / "manifest.json").read_text())
    shingle = manifest["stages"]["shingle"]
    path = i / shingle["roles"]["docs.id"]
    blob = np.load(path)
    blob[: len("crawl.jsonl/#")] = np.frombuffer(b"crawl.jsonX/#", np.uint8)  # same length, another file
    np.save(path, blob)
    shingle["files"][path.name]["crc32"] = crc32_file(path, data_offset(path))
    (i / "manifest.json").write_bytes(dump(manifest))
    r = run("pairs", "--index", i)
    assert r.exit_code == 4 and "not SOURCE/#KEY" in r.stderr, r.output


row_names = st.text(st.sampled_from(list("ab/#.é\udcff0")), max_size=5)
rows = st.lists(st.tuples(st.sampled_from(["", "f.jsonl", "d/é.warc", "f.jsonl/#x"]), row_names), max_size=40)


@settings(max_examples=150, deadline=None)
@given(rows, st.integers(1, 5), st.data())
def test_names_give_back_every_id_and_source_whatever_the_chunks(monkeypatch_rows, step, data):
    """Rows cut into runs (compared a few rows at a time): the ids, sources, any rows taken and
    the full columns are those of the rows; each run is a change of source."""
    sources = [s for s, _ in monkeypatch_rows]
    ids = [s + "/#" + k if s else k for s, k in monkeypatch_rows]
    old, docnames._ROWS = docnames._ROWS, step
    try:
        names = Names.of(ids, sources)
        full_id, full_source = names.full("id"), names.full("source")
    finally:
        docnames._ROWS = old
    n = len(ids)
    assert len(names) == n and list(names.column("id")) == ids and list(names.column("source")) == sources
    assert [names.column("id")[i] for i in range(-n, n)] == ids + ids
    starts = [i for i in range(n) if i == 0 or sources[i] != sources[i - 1]]
    assert np.asarray(names.rows).tolist() == [*starts, n]
    assert [tuple(np.asarray(a).tolist()) for a in full_id] == [tuple(np.asarray(a).tolist()) for a in encode(ids)]
    assert [tuple(np.asarray(a).tolist()) for a in full_source] == [tuple(np.asarray(a).tolist()) for a in encode(sources)]
    picked = data.draw(st.lists(st.integers(0, max(n - 1, 0)), max_size=10)) if n else []
    assert names.column("id").take(picked) == [ids[i] for i in picked]
    assert names.column("source").take(picked) == [sources[i] for i in picked]


@settings(max_examples=150, deadline=None)
@given(rows, st.integers(1, 5), st.lists(row_names, max_size=5))
def test_an_id_is_found_at_its_row_and_one_that_is_none_is_not_found(monkeypatch_rows, step, others):
    """Names.find (and the ids column's index and `in`, which `simdoc show` asks): the row of an
    id is found in the arrays, for files, members and ids holding "/#" themselves, whatever the
    chunks its keys are compared in."""
    sources = [s for s, _ in monkeypatch_rows]
    ids = [s + "/#" + k if s else k for s, k in monkeypatch_rows]
    names = Names.of(ids, sources)
    column = names.column("id")
    old, docnames._ROWS = docnames._ROWS, step
    try:
        for doc_id in ids:
            found = names.find(doc_id)
            assert found is not None and ids[found] == doc_id and doc_id in column
            assert column.index(doc_id) == found
        for other in [*others, *(i + "/#" for i in ids), *("x" + i for i in ids)]:
            assert (names.find(other) is None) == (other not in ids) == (other not in column)
    finally:
        docnames._ROWS = old


def test_show_finds_a_member_of_a_million_without_a_string_a_row(monkeypatch):
    ids = [f"shard.jsonl/#{i}" for i in range(10**6)]
    names = Names.of(ids, ["shard.jsonl"] * len(ids))
    made = []
    real = docnames.decode
    monkeypatch.setattr(docnames, "decode", lambda *a: made.append(1) or real(*a))
    assert names.column("id").index("shard.jsonl/#999999") == 999_999 and not made


# ---------------------------------------------------------------- strings gathered (issue 29: an update's cost)


def _gathered(blob: bytes, starts: list[int], lengths: list[int]) -> bytes:
    return b"".join(blob[a : a + n] for a, n in zip(starts, lengths))


def test_strings_that_follow_each_other_are_copied_as_slices_not_a_byte_at_a_time(monkeypatch):
    # A table's rows kept by an update come in a few long runs: their keys are copied run by run.
    strings = [f"d{i:03d}/doc{i:07d}.txt".encode() for i in range(5000)]
    blob = b"".join(strings)
    offsets = np.zeros(len(strings) + 1, np.int64)
    np.cumsum([len(s) for s in strings], out=offsets[1:])
    rows = np.concatenate([np.arange(0, 2000), np.arange(2001, 4000), np.arange(4500, 5000)])
    arr = np.frombuffer(blob, np.uint8)

    def byte_by_byte(*args, **kwargs):
        raise AssertionError("each byte's position made (np.repeat over the strings)")

    monkeypatch.setattr(np, "repeat", byte_by_byte)
    out, out_offsets = docnames.take_strings(arr, offsets, rows)
    monkeypatch.undo()
    assert np.asarray(out).tobytes() == b"".join(strings[i] for i in rows.tolist())
    assert out_offsets.tolist() == [0, *np.cumsum([len(strings[i]) for i in rows.tolist()]).tolist()]


@settings(max_examples=200, deadline=None)
@given(
    st.binary(min_size=0, max_size=60),
    st.lists(st.tuples(st.integers(0, 60), st.integers(0, 12), st.integers(1, 6)), max_size=12),
)
def test_gathered_strings_are_the_bytes_asked_for_in_runs_or_one_by_one(blob, pieces):
    # Each piece: a run of `count` strings of `length` bytes from `start`, one after the other in the blob.
    starts, lengths = [], []
    for start, length, count in pieces:
        for k in range(count):
            a = min(start + k * length, len(blob))
            starts.append(a)
            lengths.append(min(length, len(blob) - a))
    arr = np.frombuffer(blob, np.uint8)
    out, offsets = docnames.gather_bytes(arr, np.array(starts, np.int64), np.array(lengths, np.int64))
    assert out.tobytes() == _gathered(blob, starts, lengths)
    assert offsets.tolist() == [0, *np.cumsum(lengths).tolist()]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.binary(max_size=8), st.text(st.sampled_from(list("ab/.0")), max_size=8).map(str.encode)), max_size=20))
def test_names_decoded_at_once_are_each_decoded_alone(strings):
    # An ASCII blob is decoded once and sliced (an update's join decodes 10^5 names), any other name by name.
    offsets = np.zeros(len(strings) + 1, np.int64)
    np.cumsum([len(s) for s in strings], out=offsets[1:])
    blob = np.frombuffer(b"".join(strings), np.uint8)
    assert docnames.decode(blob, offsets) == [s.decode("utf-8", "surrogateescape") for s in strings]


@settings(max_examples=200, deadline=None)
@given(
    strings=st.lists(st.sampled_from([b"", b"a", b"b", b"ab", b"ba", b"records.jsonl", b"records.jsonM", b"x/\xff.jsonl"]), max_size=40),
    same=st.booleans(),
    before=st.none() | st.sampled_from([b"", b"a", b"records.jsonl"]),
    rows=st.sampled_from([1, 2, 3, 7, 1 << 16]),
)
def test_run_starts_says_where_each_string_differs_from_the_one_before(strings, same, before, rows):
    """Runs of rows sharing a source, found by comparing each string with the one before it:
    strings of one length (a shard's name on each member) a row at a time, others byte by
    byte; chunks of any size (``_ROWS``) give the same answer as comparing Python bytes."""
    if same:  # one length throughout, the common case: the name of one shard, or two of one length
        strings = [s for s in strings if len(s) == len(b"records.jsonl")] or [b"records.jsonl"] * 3
    blob = np.frombuffer(b"".join(strings), dtype=np.uint8)
    offsets = np.zeros(len(strings) + 1, dtype=np.int64)
    np.cumsum([len(s) for s in strings], out=offsets[1:])
    old, docnames._ROWS = docnames._ROWS, rows
    try:
        got = docnames.run_starts(blob, offsets, before)
    finally:
        docnames._ROWS = old
    want = [(i > 0 and s != strings[i - 1]) or (i == 0 and (before is None or s != before)) for i, s in enumerate(strings)]
    assert got.tolist() == want
