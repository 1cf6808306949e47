"""Verification reads a JSON Lines member where the docs table says it is (offset, length), not by
parsing the whole file again (issue 29); a member edited in place since it was indexed is caught."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from unittest import mock

import simdoc
from simdoc.corpus import read

BASE = "harbour tide table mountain goats climb steep paths at dawn far from any river"


def corpus(folder: Path, name: str = "a.jsonl") -> Path:
    folder.mkdir()
    rows = [json.dumps({"text": f"{BASE} {i}"}) for i in range(5)] + [json.dumps({"text": "other words entirely, nothing alike"})]
    body = ("\ufeff" + "\n".join(rows) + "\n").encode()
    (folder / name).write_bytes(gzip.compress(body) if name.endswith(".gz") else body)
    return folder / name


def pairs(index: Path):
    return [(p.doc_a, p.doc_b, p.jaccard) for p in simdoc.find_pairs(None, index, threshold=0.5)]


def test_members_are_read_at_their_location_not_by_parsing_the_file(tmp_path):
    corpus(tmp_path / "c")
    simdoc.find_pairs(tmp_path / "c", tmp_path / "i", threshold=0.5, verify=False)
    with mock.patch.object(read, "read_file", side_effect=AssertionError("the whole file parsed again")):
        got = pairs(tmp_path / "i")
    assert len(got) == 10 and all(j is not None and j > 0.9 for _, _, j in got)


def test_a_member_edited_in_place_is_detected(tmp_path):
    f = corpus(tmp_path / "c")
    simdoc.find_pairs(tmp_path / "c", tmp_path / "i", threshold=0.5, verify=False)
    f.write_bytes(f.read_bytes().replace(f"{BASE} 2".encode(), f"{BASE} 2".replace("harbour", "harpoon").encode()))
    result = simdoc.find_pairs(None, tmp_path / "i", threshold=0.5)
    assert {p.doc_a for p in result} | {p.doc_b for p in result} == {"a.jsonl/#1", "a.jsonl/#2", "a.jsonl/#4", "a.jsonl/#5"}
    assert any("a.jsonl/#3: changed since it was indexed" in w for s in result.stages for w in s.warnings)


def test_a_compressed_file_is_still_read_in_one_pass(tmp_path):
    corpus(tmp_path / "c", "a.jsonl.gz")
    simdoc.find_pairs(tmp_path / "c", tmp_path / "i", threshold=0.5, verify=False)
    with mock.patch.object(read, "read_file", wraps=read.read_file) as whole:
        got = pairs(tmp_path / "i")
    assert len(got) == 10 and whole.call_count >= 1


def test_a_member_that_moved_is_still_found_by_its_id(tmp_path):
    f = corpus(tmp_path / "c")
    rows = [json.dumps({"id": f"k{i}", "text": f"{BASE} {i}"}) for i in range(5)]
    f.write_text("\n".join(rows) + "\n")
    simdoc.find_pairs(tmp_path / "c", tmp_path / "i", threshold=0.5, verify=False, id_field="id")
    f.write_text(json.dumps({"id": "new", "text": "a line put before all the others"}) + "\n" + f.read_text())
    got = pairs(tmp_path / "i")
    assert len(got) == 10 and all(j is not None and j > 0.9 for _, _, j in got)
