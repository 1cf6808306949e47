"""numba is imported only by the kernel modules themselves, and they only where a kernel is called.

A run that finds nothing changed (a nightly cron job) signs nothing, and numba's import and
the load of cached kernels cost it ~0.5 s: more than the rest of the run at 10^5 files. So no
module but the kernels' (``simdoc.jit``, ``simdoc.kernels*``) may import one at its top: the
others import them inside the function that calls a kernel. (A merge once put a kernel import
at the top of a JSON Lines reader, and every run of the CLI paid for numba.)
"""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import simdoc

_KERNELS = ("simdoc.jit", "simdoc.kernels")  # these and simdoc.kernels_*: numba is their job


def test_no_module_but_the_kernels_imports_numba_at_its_top():
    modules = [m.name for m in pkgutil.walk_packages(simdoc.__path__, "simdoc.") if not m.name.startswith(_KERNELS)]
    # One interpreter, each module imported and checked in turn: the first that brings numba in is named.
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "    if 'numba' in sys.modules:\n"
        "        print(name)\n"
        "        break\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"importing {out} imports numba: import the kernel inside the function that calls it"


def test_a_run_that_finds_nothing_changed_does_not_load_numba(tmp_path):
    """The CLI run a cron job makes every night, with nothing changed since the last one."""
    corpus = tmp_path / "c"
    corpus.mkdir()
    for i in range(5):
        (corpus / f"d{i}.txt").write_text(f"the quick brown fox {i} jumps over the lazy dog " * 5)
    (corpus / "r.jsonl").write_text('{"text": "a record of some words"}\n' * 3)
    index = tmp_path / "idx"
    cmd = [sys.executable, "-m", "simdoc", "pairs", str(corpus), "--index", str(index), "--new", "-q"]
    subprocess.run(cmd, capture_output=True, text=True, check=True)
    done = _run_noting_numba(cmd[3:])
    assert "NUMBA False" in done.stderr, done.stderr


def test_signing_a_few_stored_shingle_sets_again_does_not_load_numba(tmp_path):
    """`simdoc shingle` as a stage of its own, then `pairs --index`: the signature stage signs the
    stored sets again. It loaded numba for two documents (4 s; a fresh machine's compile, 60 s)."""
    corpus = tmp_path / "c"
    corpus.mkdir()
    for i in range(2):
        (corpus / f"d{i}.txt").write_text("the quick brown fox jumps over the lazy dog " * 5)
    index = tmp_path / "idx"
    for args in (["pairs", str(corpus)], ["shingle", str(corpus)]):
        subprocess.run([sys.executable, "-m", "simdoc", *args, "--index", str(index), "-q", "-j", "1"], capture_output=True, check=True)
    done = _run_noting_numba(["pairs", "--index", str(index), "-q", "-j", "1"])
    assert "d0.txt\td1.txt" in done.stdout
    assert "NUMBA False" in done.stderr, done.stderr


def _run_noting_numba(args: list[str]) -> subprocess.CompletedProcess:
    """``simdoc ARGS`` in a new interpreter that says on stderr, as it exits, whether numba was imported."""
    probe = (
        "import runpy, sys, atexit\n"
        "atexit.register(lambda: sys.stderr.write('NUMBA ' + str('numba' in sys.modules) + '\\n'))\n"
        f"sys.argv = {['simdoc', *args]!r}\n"
        "runpy.run_module('simdoc', run_name='__main__')\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done
