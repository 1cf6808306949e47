"""Whether documents' files are still the ones indexed, by their stat (simdoc.stages.reread): asked
once a file, however many of its members are asked for (issue 29: 10^6 records of one JSON Lines
file were 10^6 lstat calls of one path when a run took its pairs from the verified-pairs table)."""

from __future__ import annotations

import json
import os
from collections import Counter
from unittest import mock

import numpy as np

import simdoc
import simdoc.stages.reread as reread
from simdoc.stages.reread import reader_of
from simdoc.store.loaded import open_index


def _corpus(root):
    (root / "c").mkdir()
    lines = [json.dumps({"text": f"record {i} about the harbour and the tide"}) for i in range(40)]
    (root / "c" / "a.jsonl").write_text("\n".join(lines) + "\n")
    (root / "c" / "b.jsonl").write_text("\n".join(lines[:10]) + "\n")
    for i in range(5):
        (root / "c" / f"f{i}.txt").write_text(f"plain file {i} about the harbour")
    return root / "c"


def _one_at_a_time(reader, docs) -> list[bool]:
    """The rule, a document at a time: its file regular, inside the corpus, with the stat recorded."""
    out = []
    c = reader.table.columns
    for d in docs:
        place = reader.table.places(np.array([d]))[0]
        path = os.path.join(reader.root, place)
        try:
            st = os.lstat(path)
        except OSError:
            out.append(False)
            continue
        now = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)
        rec = [int(c[name][d]) for name in ("file_size", "mtime_ns", "ctime_ns", "ino", "dev")]
        out.append(os.path.isfile(path) and not os.path.islink(path) and tuple(rec) == now)
    return out


def test_each_file_is_asked_once_and_the_answers_are_the_rule_of_one_document(tmp_path):
    c = _corpus(tmp_path)
    simdoc.find_pairs(c, tmp_path / "idx", jobs=1, threshold=0.5)
    loaded = open_index(tmp_path / "idx")
    n = len(loaded.docs())
    assert n == 55
    docs = np.arange(n, dtype=np.int64)

    calls = []
    real = os.lstat

    def counting(path, *args, **kwargs):
        calls.append(os.fspath(path))
        return real(path, *args, **kwargs)

    reader = reader_of(loaded)
    with mock.patch.object(reread.os, "lstat", counting):
        got = reader.unchanged_docs(docs)
    files = Counter(p for p in calls if not os.path.isdir(p))
    assert set(files) == {os.path.join(reader.root, p) for p in reader.table.places(docs)}  # the 7 files
    assert max(files.values()) <= 2  # checked inside the corpus, then its stat: not once a member (40 of a.jsonl)
    assert got.all() and got.tolist() == _one_at_a_time(reader, docs)

    # One file of members edited, one plain file gone, one made a link: only their documents change.
    (c / "b.jsonl").write_text((c / "b.jsonl").read_text() + "\n")
    (c / "f1.txt").unlink()
    (c / "f2.txt").unlink()
    (c / "f2.txt").symlink_to(c / "f3.txt")
    reader = reader_of(open_index(tmp_path / "idx"))
    shuffled = np.random.default_rng(0).permutation(docs)
    got = reader.unchanged_docs(shuffled)
    assert got.tolist() == _one_at_a_time(reader, shuffled)
    places = reader.table.places(shuffled)
    assert [p for p, ok in zip(places, got) if not ok].count("b.jsonl") == 10
    assert sorted({p for p, ok in zip(places, got) if not ok}) == ["b.jsonl", "f1.txt", "f2.txt"]
    assert [reader.unchanged(int(d)) for d in shuffled] == got.tolist()
    assert reader.unchanged_docs(np.zeros(0, dtype=np.int64)).tolist() == []
