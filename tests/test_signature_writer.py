"""The fused stage's new signature rows are gathered and written by a thread of their own while the
main thread writes the documents' columns (simdoc.stages.signature.SignatureRows.add_slices): the
arrays are those of a build that wrote them in turn, in document order, and an error of the thread
(a full disk) is the run's one `Error:` line, with nothing left behind."""

from __future__ import annotations

import errno
import json
import os
import threading
from pathlib import Path
from unittest import mock

from click.testing import CliRunner

import simdoc
from simdoc.cli import cli
from simdoc.corpus import jsonl_ranges
from simdoc.stages import signature
from simdoc.store.npyfiles import NpyWriter

WORDS = "harbour tide table mountain goats climb steep paths dawn far from any river stone bridge".split()


def corpus(root: Path, n: int) -> Path:
    c = root / "c"
    (c / "sub").mkdir(parents=True)
    rows = [json.dumps({"text": " ".join(WORDS[(i * k) % len(WORDS)] for k in range(1, 9)) + f" {i % 7}"}) for i in range(n)]
    (c / "big.jsonl").write_text("\n".join(rows) + "\n")
    for i in range(30):  # plain files around it: runs of kept and new rows on either side
        (c / "sub" / f"f{i:02d}.txt").write_text(" ".join(WORDS[(i + k) % len(WORDS)] for k in range(10)))
    (c / "a.txt").write_text("river stone bridge far from any harbour tide table")
    return c


def build(c: Path, index: Path, range_bytes: int = 1 << 40) -> tuple[list, dict[str, bytes]]:
    with mock.patch.object(jsonl_ranges, "RANGE_BYTES", range_bytes):
        pairs = [(p.doc_a, p.doc_b, p.estimated, p.jaccard) for p in simdoc.find_pairs(c, index, jobs=1, threshold=0.5)]
    return pairs, {p.name: p.read_bytes() for p in sorted(index.glob("*.npy"))}


def test_new_rows_are_written_by_the_thread_in_document_order(tmp_path):
    c = corpus(tmp_path, 300)
    writers = []
    append = NpyWriter.append

    def spy(self, arr):
        if self.name.startswith("signatures"):
            writers.append(threading.current_thread().name)
        return append(self, arr)

    with mock.patch.object(NpyWriter, "append", spy):
        got = build(c, tmp_path / "i1", 700)
    assert any(w.startswith("simdoc-signatures") for w in writers)

    def in_turn(self, slices):  # the rows written by the calling thread, as before
        for rows in slices:
            self.add(rows)

    with mock.patch.object(signature.SignatureRows, "add_slices", in_turn):
        want = build(c, tmp_path / "i2", 700)
    assert got == want
    # An update: kept rows, then new rows, then kept rows again, in document order.
    (c / "sub" / "f05.txt").write_text("a changed file, far from any river")
    with open(c / "big.jsonl", "a") as f:
        f.write(json.dumps({"text": "steep paths at dawn, far from any river"}) + "\n")
    got = build(c, tmp_path / "i1", 700)
    with mock.patch.object(signature.SignatureRows, "add_slices", in_turn):
        want = build(c, tmp_path / "i2", 700)
    assert got == want


def test_no_room_for_the_threads_rows_is_one_error_line(tmp_path):
    c = corpus(tmp_path, 300)
    idx = tmp_path / "idx"
    assert CliRunner().invoke(cli, ["pairs", str(c), "--index", str(idx), "-q", "-j", "1"]).exit_code == 0
    with open(c / "big.jsonl", "a") as f:
        f.write(json.dumps({"text": "steep paths at dawn, far from any river"}) + "\n")
    pwrite = os.pwrite

    def full_in_the_thread(fd, data, pos):
        if threading.current_thread().name.startswith("simdoc-signatures"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return pwrite(fd, data, pos)

    with mock.patch.object(os, "pwrite", full_in_the_thread), mock.patch.object(jsonl_ranges, "RANGE_BYTES", 700):
        r = CliRunner().invoke(cli, ["pairs", str(c), "--index", str(idx), "-q", "-j", "1"])
    assert r.exit_code == 6, (r.exit_code, r.output, r.exception)
    errors = [line for line in r.stderr.splitlines() if line.startswith("Error:")]
    assert errors == [f"Error: cannot write the index at {idx}: No space left on device; it stays as its last completed stage left it"]
    assert "Traceback" not in r.output and r.stdout == ""
    assert [p.name for p in idx.iterdir() if p.name.endswith(".tmp")] == []
    assert [t.name for t in threading.enumerate() if t.name.startswith("simdoc-signatures")] == []
    again = CliRunner().invoke(cli, ["pairs", str(c), "--index", str(idx), "-q", "-j", "1"])
    fresh = CliRunner().invoke(cli, ["pairs", str(c), "--index", str(tmp_path / "fresh"), "-q", "-j", "1"])
    assert again.exit_code == 0 and again.stdout == fresh.stdout
