"""A stage that reads a few MB runs the numpy reference and never imports numba; a larger one the
kernels (simdoc.kernel_choice). Either way the same pairs, Jaccards and index arrays come out."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from simdoc import kernels, kernel_choice

REPO = Path(__file__).resolve().parent.parent

# Runs the CLI in a fresh interpreter with SMALL_BYTES set, then says whether numba was loaded.
_PROBE = (
    "import atexit, runpy, sys\n"
    "from simdoc import kernel_choice\n"
    "kernel_choice.SMALL_BYTES = int(sys.argv[1])\n"
    "atexit.register(lambda: sys.stderr.write('NUMBA ' + str('numba' in sys.modules) + '\\n'))\n"
    "sys.argv = ['simdoc', *sys.argv[2:]]\n"
    "runpy.run_module('simdoc', run_name='__main__')\n"
)


def _corpus(root: Path) -> Path:
    corpus = root / "c"
    (corpus / "sub").mkdir(parents=True)
    base = "Straße ÉTÉ naïve İstanbul ΣΊΣΥΦΟΣ tab\there\u2003em space, the quick brown fox jumps over the lazy dog. "
    for i in range(12):
        text = base * 3 + f"variant {i % 4} " + "word " * (i % 5)
        (corpus / f"d{i:02}.txt").write_text(text, encoding="utf-8")
    (corpus / "sub" / "bad.txt").write_bytes(base.encode() + b"\xff\xfe broken bytes " + base.encode())
    lines = [json.dumps({"text": base * 2 + f"record {i % 3}"}) for i in range(9)]
    (corpus / "r.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with gzip.open(corpus / "z.jsonl.gz", "wt", encoding="utf-8") as f:
        f.write("\n".join(lines[:4]) + "\n")
    return corpus


def _run(small_bytes: int, args: list[str]) -> tuple[str, bool]:
    done = subprocess.run([sys.executable, "-c", _PROBE, str(small_bytes), *args], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    return done.stdout, "NUMBA True" in done.stderr


def _arrays(index: Path) -> dict[str, bytes]:
    """Every array of the index but the verified-pairs cache, by its name without the build id."""
    out = {}
    for path in sorted(index.glob("*.npy")):
        name = path.name.split(".")
        out[".".join(name[:-2])] = np.load(path, allow_pickle=False).tobytes()
    return out


@pytest.mark.skipif(not kernels.ENABLED, reason="numba disabled by SIMDOC_NO_NUMBA")
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_the_reference_and_the_kernels_give_the_same_output_and_arrays(tmp_path, jobs):
    corpus = _corpus(tmp_path)
    got = {}
    for small_bytes, label in ((1 << 40, "reference"), (0, "kernels")):
        index = tmp_path / label
        args = ["pairs", str(corpus), "--index", str(index), "-t", "0.3", "-j", jobs, "--format", "jsonl"]
        out, numba = _run(small_bytes, args)
        assert numba == (label == "kernels"), label
        got[label] = (out, _arrays(index))
    assert got["reference"][0] == got["kernels"][0]
    assert len(got["kernels"][0].splitlines()) > 10  # pairs of every kind came out
    assert got["kernels"][1] and got["reference"][1] == got["kernels"][1]


def test_a_small_corpus_loads_no_numba_and_the_default_size_decides(tmp_path):
    corpus = _corpus(tmp_path)
    out, numba = _run(kernel_choice.SMALL_BYTES, ["pairs", str(corpus), "--index", str(tmp_path / "i"), "-t", "0.3"])
    assert out.strip() and not numba


@pytest.mark.skipif(not kernels.ENABLED, reason="numba disabled by SIMDOC_NO_NUMBA")
def test_a_query_of_a_few_documents_loads_no_numba_and_matches_as_the_kernels_do(tmp_path):
    corpus = _corpus(tmp_path)
    index = str(tmp_path / "i")
    _run(1 << 40, ["pairs", str(corpus), "--index", index, "-t", "0.3"])
    queries = [str(corpus / "d03.txt"), str(corpus / "sub" / "bad.txt")]
    got = {}
    for small_bytes in (kernel_choice.SMALL_BYTES, 0):
        got[small_bytes] = _run(small_bytes, ["query", "--index", index, "-t", "0.3", "--format", "jsonl", *queries])
    assert got[kernel_choice.SMALL_BYTES][1] is False and got[0][1] is True
    assert got[0][0] == got[kernel_choice.SMALL_BYTES][0] and len(got[0][0].splitlines()) > 5


def test_within_a_small_stage_nothing_is_compiled_and_the_choice_ends_with_it():
    code = (
        "import sys\n"
        "from simdoc import kernel_choice\n"
        "with kernel_choice.reads(kernel_choice.SMALL_BYTES - 1):\n"
        "    inner = kernel_choice.wanted()\n"
        "    with kernel_choice.reads(kernel_choice.SMALL_BYTES):\n"
        "        large = kernel_choice.small()\n"
        "    after = kernel_choice.small()\n"
        "print(inner, large, after, kernel_choice.small(), 'numba' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert done.stdout.split() == ["False", "False", "True", "False", "False"]


@pytest.fixture
def note_state(monkeypatch):
    monkeypatch.setattr(kernel_choice, "_NOTE", [False, False])
    return kernel_choice._NOTE


def test_an_empty_kernel_cache_is_announced_once_where_progress_is_shown(tmp_path, note_state, capsys):
    kernel_choice.announce(True)
    kernel_choice._note_compiling(str(tmp_path))
    kernel_choice._note_compiling(str(tmp_path))
    err = capsys.readouterr().err
    assert err.count("compiling its kernels") == 1 and str(tmp_path) in err


def test_a_cache_holding_compiled_kernels_or_a_quiet_run_says_nothing(tmp_path, note_state, capsys):
    (tmp_path / "simdoc_ab12").mkdir()
    (tmp_path / "simdoc_ab12" / "kernels.sign-10.py311.nbi").write_bytes(b"")
    kernel_choice.announce(True)
    kernel_choice._note_compiling(str(tmp_path))
    note_state[:] = [False, False]
    kernel_choice.announce(False)
    kernel_choice._note_compiling(str(tmp_path / "empty"))
    assert capsys.readouterr().err == ""


def test_the_cli_announces_only_when_it_shows_progress(note_state, monkeypatch):
    from simdoc.cli.options import setup_logging

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    setup_logging(quiet=False, verbose=False)
    assert note_state[0] is True
    setup_logging(quiet=True, verbose=False)
    assert note_state[0] is False
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    setup_logging(quiet=False, verbose=False)
    assert note_state[0] is False
