"""`simdoc check`'s look at the docs table, made column by column.

Each document's identity is the BLAKE2b-128 of its digest and how it was read
(and, for a file, the compression its name says). ``check`` once made it a
document at a time, with the id as a string: 30 s at 10^6 records. Now it is
made by way of reading (:func:`simdoc.corpus.read.identities`), and the ids'
order is checked a block at a time. These tests hold both to what the
per-document reference says, and show that each check still finds what it is
there to find.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from simdoc import kernel_choice
from simdoc.cli import cli
from simdoc.corpus.read import identities, identity
from simdoc.reports import check
from simdoc.store.doctable import HOW
from simdoc.store.loaded import open_index

TEXT = "the quick brown fox jumps over the lazy dog near the river bank {}"


@pytest.fixture
def index(tmp_path: Path) -> Path:
    """An index of plain files, a gzipped file and the members of a JSON Lines file."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(3):
        (corpus / f"plain{i}.txt").write_text(TEXT.format(i))
    (corpus / "packed.txt.gz").write_bytes(gzip.compress(TEXT.format(0).encode()))
    (corpus / "records.jsonl").write_text("".join(json.dumps({"text": TEXT.format(i)}) + "\n" for i in range(5)))
    idx = tmp_path / "idx"
    got = CliRunner().invoke(cli, ["pairs", str(corpus), "--index", str(idx), "-t", "0.5", "-q"])
    assert got.exit_code == 0, got.output
    return idx


@pytest.mark.parametrize("block", [1 << 16, 1, 2])
def test_identities_by_column_are_the_reference(index: Path, block: int) -> None:
    docs = open_index(index).docs()
    ways = {HOW[int(h)] for h in np.asarray(docs.how)}
    assert {"whole", "jsonl"} <= ways  # members and files both
    reference = np.array(
        [list(identity(bytes(docs.digest[i]), HOW[int(docs.how[i])], docs.ids[i])) for i in range(len(docs))], dtype=np.uint8
    )
    asked: list[int] = []
    sizes: list[list[int]] = []

    def file_ids(rows: np.ndarray) -> list[str]:
        asked.extend(rows.tolist())
        sizes.append(rows.tolist())
        return docs.ids.take(rows)

    with kernel_choice.reads(0):  # hashlib (the kernel gives the same bytes: tests/test_kernels_blake.py)
        got = identities(np.asarray(docs.digest), np.asarray(docs.how), HOW, file_ids, block)
    assert np.array_equal(got, reference)
    assert max(map(len, sizes)) <= block  # the files' ids asked a block at a time
    assert np.array_equal(got, np.asarray(docs.identities()))
    members = np.flatnonzero(np.asarray(docs.offset) >= 0)
    assert len(members) == 5 and not set(asked) & set(members.tolist())  # no member's id made


def test_a_sound_index_checks_sound(index: Path) -> None:
    got = CliRunner().invoke(cli, ["check", "--index", str(index)])
    assert got.exit_code == 0, got.output


class _Loaded:
    """A loaded index whose docs table is the one given."""

    def __init__(self, docs) -> None:
        self._docs = docs

    def docs(self):
        return self._docs


def _problems(docs) -> list[str]:
    problems: list[str] = []
    check._check_docs(_Loaded(docs), len(docs), problems)
    return problems


def test_a_wrong_identity_is_found(index: Path) -> None:
    docs = open_index(index).docs()
    assert _problems(docs) == []
    for row in (0, len(docs) - 1):
        wrong = np.array(docs.identities())
        wrong[row, 3] ^= 1
        damaged = dataclasses.replace(docs, columns={**docs.columns, "identity": wrong})
        assert _problems(damaged) == ["1 documents' identities do not follow from their digests"]


def test_a_member_without_its_place_is_found(index: Path) -> None:
    docs = open_index(index).docs()
    offset = np.array(docs.offset)
    offset[np.flatnonzero(offset < 0)[0]] = 0  # a file said to be a member
    damaged = dataclasses.replace(docs, columns={**docs.columns, "offset": offset})
    assert any("must have a source file" in p for p in _problems(damaged))


class _Ids:
    def __init__(self, ids: list[str]) -> None:
        self.ids = ids

    def take(self, rows: np.ndarray) -> list[str]:
        return [self.ids[i] for i in rows.tolist()]


@pytest.mark.parametrize("block", [1, 2, 3, 64])
def test_ids_out_of_order_are_found_across_blocks(block: int) -> None:
    ids = [f"d{i:03d}" for i in range(10)]
    assert check._ids_sorted(_Ids(ids), len(ids), block)
    assert check._ids_sorted(_Ids(ids[:1]), 1, block) and check._ids_sorted(_Ids([]), 0, block)
    for at in range(1, len(ids)):
        same = ids[:at] + [ids[at - 1]] + ids[at + 1 :]  # a repeat, at every place (each block boundary too)
        assert not check._ids_sorted(_Ids(same), len(same), block)
        swapped = list(ids)
        swapped[at - 1], swapped[at] = swapped[at], swapped[at - 1]
        assert not check._ids_sorted(_Ids(swapped), len(swapped), block)
