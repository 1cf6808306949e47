"""Memory does not grow with a document's length, even on text with few repeats (issue 28 item 7).

Base64 of random bytes has a distinct shingle at almost every position: a
32 MiB file and an edited copy took 2.4 GB to index and verify (~36 bytes
an input byte). Now a file is signed as it is read, and a pair is verified
in passes of one hash range each (:data:`simdoc.stages.verify.PAIR_BYTES`),
so the peak is the same for a document twice as long. The sizes here are
small, for speed: files over 1 MiB are made to be streamed and the pass
budget is lowered to match, as the defaults (64 MiB, 128 MiB) do at scale.
"""

from __future__ import annotations

import base64
import os
import random
import subprocess
import sys
import tempfile

from test_bounded_memory import _LAUNCHER

MB = 1 << 20

_ENTRY = (
    "import sys, simdoc.corpus.streaming as s, simdoc.stages.verify as v\n"
    "s.STREAM_BYTES = 1 << 20\n"
    "v.PAIR_BYTES = 48 << 20\n"
    "from simdoc.__main__ import main\n"
    "main()\n"
)


def _corpus(root, raw_bytes: int) -> None:
    root.mkdir()
    rng = random.Random(raw_bytes)
    text = bytearray(base64.encodebytes(rng.randbytes(raw_bytes)))
    (root / "a.txt").write_bytes(text)
    for _ in range(50):  # a lightly edited copy
        at = rng.randrange(len(text) - 5)
        text[at : at + 5] = b"EDIT!"
    (root / "b.txt").write_bytes(text)


def _peak_mb(corpus, index) -> tuple[float, subprocess.CompletedProcess]:
    env = dict(os.environ)
    env.pop("SIMDOC_INDEX", None)
    with tempfile.NamedTemporaryFile("r") as peak:
        r = subprocess.run(
            [sys.executable, "-c", _LAUNCHER, peak.name, sys.executable, "-c", _ENTRY, "pairs", str(corpus),
             "--index", str(index), "-j", "1"],
            capture_output=True, text=True, env=env,
        )
        return int(peak.read() or 0) / 1024, r


def test_a_long_document_with_few_repeats_costs_no_more_than_a_short_one(tmp_path):
    peaks = []
    for raw in (3 * MB, 6 * MB):  # 4 and 8 MB files of base64
        _corpus(tmp_path / f"c{raw}", raw)
        peak, r = _peak_mb(tmp_path / f"c{raw}", tmp_path / f"i{raw}")
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("a.txt\tb.txt\t"), r.stdout
        peaks.append(peak)
    # Before: ~36 bytes an input byte, +300 MB from the first to the second. Python, numpy
    # and numba take ~200 MB, a pass ~48 MB (PAIR_BYTES), reading ~2 x 8 MiB chunks.
    assert peaks[1] < peaks[0] + 40, peaks
    assert peaks[1] < 400, peaks
