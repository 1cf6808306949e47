"""Memory does not grow with a document's length, even on text with few repeats (issue 28 item 7).

Base64 of random bytes has a distinct shingle at almost every position: a
32 MiB file and an edited copy took 2.4 GB to index and verify (~36 bytes
an input byte). Now a file is signed as it is read, and a pair is verified
in passes of one hash range each (:data:`simdoc.similarity.PAIR_BYTES`),
so the peak is the same for a document twice as long. The sizes here are
small, for speed: files over 1 MiB are made to be streamed and the pass
budget is lowered to match, as the defaults (64 MiB, 128 MiB) do at scale.
"""

from __future__ import annotations

import base64
import json
import os
import random
import subprocess
import sys
import tempfile

import numpy as np

from test_bounded_memory import _LAUNCHER

MB = 1 << 20

_ENTRY = (
    "import sys, simdoc.corpus.streaming as s, simdoc.stages.verify, simdoc.similarity as v, simdoc.kernel_choice as kc\n"
    "kc.SMALL_BYTES = 0  # the kernels, as for the long documents these few MB stand for (not the numpy reference)\n"
    "s.STREAM_BYTES = 1 << 20\n"
    "v.PAIR_BYTES = 48 << 20\n"
    "if sys.argv[1] == '--large-chars':  # queries and pairs of a few MB, budgets to match\n"
    "    import simdoc.stages.spilled as sp\n"
    "    s.LARGE_CHARS, v.PAIR_BYTES, sp.RUN_ITEMS = 1 << 20, 16 << 20, 1 << 18\n"
    "    del sys.argv[1]\n"
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


def _peak_mb(corpus, index, *args: object) -> tuple[float, subprocess.CompletedProcess]:
    """Peak RSS in MB of ``simdoc pairs CORPUS --index INDEX -j 1`` (or of ``simdoc ARGS``)."""
    env = dict(os.environ)
    env.pop("SIMDOC_INDEX", None)
    args = args or ("pairs", corpus, "--index", index, "-j", "1")
    with tempfile.NamedTemporaryFile("r") as peak:
        r = subprocess.run(
            [sys.executable, "-c", _LAUNCHER, peak.name, sys.executable, "-c", _ENTRY, *map(str, args)],
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


def _query(root) -> str:
    """A query: a.txt of ``root`` with 50 other edits (b.txt is a.txt with 50)."""
    rng = random.Random(len(str(root)))
    text = bytearray((root / "a.txt").read_bytes())
    for _ in range(50):
        at = rng.randrange(len(text) - 5)
        text[at : at + 5] = b"QUERY"
    (root.parent / f"{root.name}.q.txt").write_bytes(text)
    return text.decode()


def test_a_long_query_and_its_candidates_cost_no_more_than_short_ones(tmp_path):
    """`simdoc query` shingled a long query whole and held its candidates' sets whole: 6.05 GB for
    a 32 MiB query of base64 (a 34 MB pair indexed). Now it signs the query a piece at a time and
    compares each pair in passes, as `pairs` verifies."""
    from simdoc.shingling import ShingleSpec, shingle_texts

    peaks = []
    for raw in (MB, 2 * MB):  # 1.4 and 2.7 MB files of base64: queries over LARGE_CHARS (lowered)
        corpus = tmp_path / f"c{raw}"
        _corpus(corpus, raw)
        query = _query(corpus)
        built = subprocess.run(
            [sys.executable, "-m", "simdoc", "pairs", corpus, "--index", tmp_path / f"i{raw}", "-j", "1", "--no-verify", "-q"],
            capture_output=True, text=True,
        )
        assert built.returncode == 0, built.stderr
        peak, r = _peak_mb(None, None, "--large-chars", "query", f"{corpus}.q.txt", "--index", tmp_path / f"i{raw}", "--format", "jsonl")
        assert r.returncode == 0, r.stderr
        got = {m["doc"]: m["jaccard"] for m in map(json.loads, r.stdout.splitlines())}
        # The Jaccards are those of the 64-bit shingle sets of the texts, computed here.
        expected = {}
        a = shingle_texts([query], ShingleSpec(), form="sets64").data
        for name in ("a.txt", "b.txt"):
            b = shingle_texts([(corpus / name).read_text()], ShingleSpec(), form="sets64").data
            common = len(np.intersect1d(a, b, assume_unique=True))
            expected[name] = round(common / (len(a) + len(b) - common), 4)
        assert got == expected and expected["a.txt"] < 1, (got, expected)
        peaks.append(peak)
    # Before: ~190 bytes a byte of query. Python, numpy and numba take ~200 MB, a pass ~16 MB
    # (PAIR_BYTES), the query's text and its lowercased copy ~6 MB.
    assert peaks[1] < peaks[0] + 30, peaks
    assert peaks[1] < 300, peaks


def test_simdoc_shingle_stores_a_long_documents_set_in_bounded_memory(tmp_path):
    """`simdoc shingle` built a long document's set whole: 1.18 GB for a 34 MB pair of base64.
    Now the set is built on disk in sorted runs, merged and stored as a stream."""
    from simdoc.shingling import ShingleSpec, shingle_texts
    from simdoc.store.loaded import open_index

    peaks = []
    for raw in (MB, 2 * MB):
        corpus = tmp_path / f"c{raw}"
        _corpus(corpus, raw)
        # One streamed file, and one long document read whole (a JSON Lines member).
        edited = (corpus / "b.txt").read_text()
        (corpus / "b.txt").unlink()
        (corpus / "b.jsonl").write_text(json.dumps({"text": edited}) + "\n")
        index = tmp_path / f"i{raw}"
        peak, r = _peak_mb(None, None, "--large-chars", "shingle", corpus, "--index", index, "-j", "1", "-q")
        assert r.returncode == 0, r.stderr
        assert not [p.name for p in index.iterdir() if p.name.startswith(".")]  # no run left on disk
        peaks.append(peak)
    # The stored sets are those of the texts, shingled whole here.
    sets = open_index(index).shingle_sets()
    assert list(open_index(index).docs().ids) == ["a.txt", "b.jsonl/#1"]
    for row, text in enumerate(((corpus / "a.txt").read_text(), edited)):
        want = shingle_texts([text], ShingleSpec())
        assert np.asarray(sets.row(row)).tobytes() == want.data.tobytes()
        assert np.asarray(sets.counts[sets.indptr[row] : sets.indptr[row + 1]]).tobytes() == want.counts.tobytes()
    # Before: 0.40 GB for the larger (~70 bytes a byte of the long documents), +0.1 GB from the
    # smaller. Python, numpy and numba take ~200 MB, a run's merge ~8 MB (RUN_ITEMS lowered).
    assert peaks[1] < peaks[0] + 30, peaks
    assert peaks[1] < 300, peaks


def test_show_of_long_documents_costs_no_more_than_short_ones(tmp_path):
    """`simdoc show` compared the two whole 64-bit sets: 0.44 GB for a 2.7 MB pair of base64 (with the
    budgets lowered as here). Now it compares them in passes, as `pairs` verifies a pair."""
    peaks = []
    for raw in (MB, 2 * MB):
        corpus = tmp_path / f"c{raw}"
        _corpus(corpus, raw)
        index = tmp_path / f"i{raw}"
        built = subprocess.run(
            [sys.executable, "-m", "simdoc", "pairs", corpus, "--index", index, "-j", "1", "--no-verify", "-q"],
            capture_output=True, text=True,
        )
        assert built.returncode == 0, built.stderr
        peak, r = _peak_mb(None, None, "--large-chars", "show", corpus, "a.txt", "b.txt", "--index", index, "--format", "json")
        assert r.returncode == 0, r.stderr
        assert 0.99 < json.loads(r.stdout)["set_jaccard"] < 1  # its numbers: test_verify_passes.py
        peaks.append(peak)
    assert peaks[1] < peaks[0] + 30, peaks
    assert peaks[1] < 300, peaks
