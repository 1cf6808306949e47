"""Compiled kernels or their numpy reference, chosen by how much a run reads.

The compiled kernels (numba: :mod:`simdoc.jit`) cost something before they
do anything: importing numba and loading the cached machine code take
~0.7 s of each process that uses them, and the very first run on a
machine compiles them, which takes one or two minutes. Their numpy
reference gives byte-identical signatures, digests and Jaccards (the tests
hold both to it), and signs and verifies a MB or two in less time than that. So a stage
that reads less than :data:`SMALL_BYTES` (the sample corpus, a course's
submissions, a nightly update that changed a few hundred files) runs the
reference and never imports numba; a larger one runs the kernels.

:func:`reads` is the stage's say (how many bytes it will read, for the time
it runs); :func:`wanted` is what every caller of a kernel asks first. Once
numba is loaded in a process (a larger stage before, a test), it is used:
it costs nothing more. Forked workers inherit the choice of the process
that forked them; a Dask worker uses the kernels. Where the CLI shows
progress, the first process to want the kernels while their cache holds
none says on stderr that it is compiling them (:func:`announce`).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

# Below this many bytes read, the numpy reference. Measured on this project's 2-core VM (CPU-s of
# a whole `simdoc pairs --new` update, numba's import and load included, cached kernels):
# 10^4 files with 0.54 MB edited, reference 0.57-0.69 against kernels 1.30-1.35; 3.8 MB edited,
# 1.46-1.66 against 1.70-1.78; 10^5 files with 3 MB edited (and ~3 MB verified), 2.94-2.96
# against 2.45-3.01. They meet at 3-4 MB a stage; a run has two such stages (sign, verify), so
# the bound is half that. A first run's compile (one or two minutes) is not counted.
SMALL_BYTES = 2 << 20

_SMALL = [False]  # inside reads(n) with n < SMALL_BYTES
_NOTE = [False, False]  # [say when the kernels are first compiled (announce), said already]


@contextlib.contextmanager
def reads(nbytes: int) -> Iterator[None]:
    """Within: a stage that reads ``nbytes`` of documents; below :data:`SMALL_BYTES`, kernels
    are not loaded for it (:func:`wanted`)."""
    before = _SMALL[0]
    _SMALL[0] = nbytes < SMALL_BYTES
    try:
        yield
    finally:
        _SMALL[0] = before


def small() -> bool:
    """Whether the current stage reads too little to load the kernels for (:func:`reads`)."""
    return _SMALL[0] and "numba" not in sys.modules


def wanted() -> bool:
    """Whether to call the compiled kernels now (else the numpy reference): numba is enabled
    (:data:`simdoc.jit.ENABLED`), and loaded already or worth loading. Asked before a kernel
    module is imported, since that imports numba."""
    if small():
        return False
    from simdoc import jit

    if jit.ENABLED and jit.CACHE:
        _note_compiling(jit.cache_dir())
    return jit.ENABLED


def announce(enabled: bool) -> None:
    """Whether to say on stderr, once, that the kernels are being compiled (their cache is empty).

    The CLI turns it on where it shows progress (stderr a terminal, no ``--quiet``): a
    first run over a corpus otherwise sits silent for the minute or two of the compile,
    its progress bar at zero, and looks hung."""
    _NOTE[0] = enabled


def _note_compiling(folder: str) -> None:
    if not _NOTE[0] or _NOTE[1]:
        return
    _NOTE[1] = True
    # numba keeps an index file (.nbi) per compiled function, in a subfolder per source folder.
    if not any(name.endswith(".nbi") for _, _, names in os.walk(folder) for name in names):
        sys.stderr.write(
            "simdoc: compiling its kernels for this machine, once (a minute or two); "
            f"later runs load them from {folder}\n"
        )
        sys.stderr.flush()
