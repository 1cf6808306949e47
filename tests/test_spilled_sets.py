"""`simdoc shingle` builds a long document's stored set on disk, in bounded memory (issue 28 item 7).

The stored arrays must be the bytes of shingling every document whole; the
sizes here are small and the run size lowered, so that every long document
is summed into many runs and merged a few items at a time.
"""

from __future__ import annotations

import base64
import json
import random
from unittest import mock

import numpy as np
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from simdoc.cli import cli
from simdoc.corpus import streaming
from simdoc.shingling import shingle_texts
from simdoc.stages import spilled
from simdoc.stages.reread import reader_of
from simdoc.store.loaded import open_index


@settings(max_examples=60, deadline=None)
@given(
    pieces=st.lists(st.lists(st.integers(0, 300), max_size=40), max_size=12),
    run=st.integers(1, 50),
    block=st.integers(1, 20),
)
def test_runs_merge_to_the_sorted_set_with_summed_counts(tmp_path_factory, pieces, run, block):
    folder = tmp_path_factory.mktemp("runs")
    runs = spilled.SetRuns(str(folder))
    every: list[int] = []
    with mock.patch.object(spilled, "RUN_ITEMS", run), mock.patch.object(spilled, "MERGE_BLOCK", block):
        for p in pieces:
            data, counts = np.unique(np.asarray(p, np.uint32), return_counts=True)
            runs.add(data, counts.astype(np.uint32))
            every.extend(p)
        on_disk = runs.finish()
    want_data, want_counts = np.unique(np.asarray(every, np.uint32), return_counts=True)
    got = list(on_disk.chunks(7))
    data = np.concatenate([d for d, _ in got]) if got else np.zeros(0, np.uint32)
    counts = np.concatenate([c for _, c in got]) if got else np.zeros(0, np.uint32)
    assert data.tobytes() == want_data.astype(np.uint32).tobytes()
    assert counts.tobytes() == want_counts.astype(np.uint32).tobytes()
    assert runs.n_windows == len(every)
    on_disk.remove()
    assert list(folder.iterdir()) == []  # the runs, then the set, are removed


def _corpus(root) -> dict[str, str]:
    """Short and long documents, streamed and read whole, a long JSON Lines member: their texts."""
    rng = random.Random(7)
    root.mkdir()
    long = base64.encodebytes(rng.randbytes(90_000)).decode()  # ~121 KB of few repeats
    words = " ".join(rng.choice(["amber", "basil", "Cedar", "délta", "the", "of"]) for _ in range(20_000))
    texts = {"a.txt": long, "b.txt": long[:60_000] + "EDIT" + long[60_000:], "w.txt": words, "s.txt": "a short one"}
    for name, text in texts.items():
        (root / name).write_text(text)
    (root / "m.jsonl").write_text(json.dumps({"text": "tiny"}) + "\n" + json.dumps({"text": long[:80_000]}) + "\n")
    texts.update({"m.jsonl/#1": "tiny", "m.jsonl/#2": long[:80_000]})
    (root / "z.txt").write_bytes(b"\x00" + b"x" * 200_000)  # streamed, binary: skipped
    return texts


def _build(corpus, index, spill: bool, jobs: int = 1) -> dict[str, bytes]:
    small = {"STREAM_BYTES": 100_000, "LARGE_CHARS": 50_000, "PIECE_CHARS": 4000} if spill else {"STREAM_BYTES": streaming.STREAM_BYTES}
    runs = {"RUN_ITEMS": 5000, "MERGE_BLOCK": 64} if spill else {"RUN_ITEMS": spilled.RUN_ITEMS}
    merged: list[int] = []
    merge = spilled._merge

    def counted(sets):
        merged.append(len(sets))
        return merge(sets)

    with mock.patch.multiple(streaming, **small), mock.patch.multiple(spilled, **runs, _merge=counted):
        r = CliRunner().invoke(cli, ["shingle", str(corpus), "--index", str(index), "-j", str(jobs), "-q"])
    if spill and jobs == 1:  # a.txt and b.txt streamed, m.jsonl/#2 read whole: each merged from runs
        assert len(merged) == 3 and min(merged) > 3, merged  # (w.txt, of few distinct shingles, is one run)
    assert r.exit_code == 0, (r.stderr, r.exception)
    assert not [p.name for p in index.iterdir() if p.name.startswith(".")]  # no set left on disk
    return {p.name.split(".")[1]: p.read_bytes() for p in sorted(index.glob("shingles.*.npy"))}


def test_stored_sets_built_on_disk_are_the_bytes_of_shingling_whole(tmp_path):
    texts = _corpus(tmp_path / "c")
    spilled_files = _build(tmp_path / "c", tmp_path / "i1", spill=True)
    whole_files = _build(tmp_path / "c", tmp_path / "i2", spill=False)
    assert spilled_files == whole_files and set(whole_files) == {"indptr", "data", "counts"}
    assert _build(tmp_path / "c", tmp_path / "i3", spill=True, jobs=2) == whole_files  # from forked workers
    # And they are the sets of the texts, shingled whole here, in the docs table's order.
    loaded = open_index(tmp_path / "i1")
    ids = list(loaded.docs().ids)
    assert sorted(ids) == sorted(texts)
    want = shingle_texts([texts[i] for i in ids], reader_of(loaded).spec)
    got = loaded.shingle_sets()
    assert np.asarray(got.indptr).tobytes() == want.indptr.astype(np.int64).tobytes()
    assert np.asarray(got.data).tobytes() == want.data.astype(np.uint32).tobytes()
    assert np.asarray(got.counts).tobytes() == want.counts.astype(np.uint32).tobytes()
    # The window counts are those of the whole texts too.
    windows = shingle_texts([texts[i] for i in ids], reader_of(loaded).spec, form="stream")
    assert list(loaded.docs().columns["n_shingles"]) == np.diff(windows.indptr).tolist()
