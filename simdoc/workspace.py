"""Scratch arrays reused from batch to batch, one set per thread: the shingling kernels' workspace.

Shingling a batch needs large temporaries (tokens, window hashes, sort
buffers: ~100 MB for 4 MB of text). Fresh memory is slow to come by on some
machines, so they are kept and reused; but only up to :data:`KEEP_BYTES`
each, so that one very long document does not leave its buffers behind for
the rest of the run (issue: memory bounded whatever a document holds).
"""

from __future__ import annotations

import threading

import numpy as np

# A scratch array is kept for reuse only up to this size: a batch of BATCH_BYTES of text needs
# ~16 MB a kind; a larger one (a long document shingled whole) is freed after its call.
KEEP_BYTES = 64 << 20


class Workspace:
    """Grow-only scratch arrays reused from batch to batch (one per worker process).

    Fresh memory is slow to come by on some machines (a page fault per 4 KiB,
    measured at ~0.4 GB/s on the benchmark VM), and a batch of 4 MB of text
    needs ~100 MB of temporaries; reusing them saves most of that.
    """

    def __init__(self) -> None:
        self._arrays: dict[str, np.ndarray] = {}

    def get(self, name: str, n: int, dtype) -> np.ndarray:
        arr = self._arrays.get(name)
        if arr is None or len(arr) < n or arr.dtype != dtype:
            size = max(n, 1, int(len(arr) * 1.25) if arr is not None else 0)
            if size * np.dtype(dtype).itemsize > KEEP_BYTES:
                # Larger than a batch needs (one huge document): used once, not kept for good.
                return np.empty(max(n, 1), dtype=dtype)[:n]
            arr = np.empty(size, dtype=dtype)
            self._arrays[name] = arr
        return arr[:n]

    def nbytes(self) -> int:
        return sum(a.nbytes for a in self._arrays.values())


_LOCAL = threading.local()


def workspace() -> Workspace:
    """This thread's scratch space: verification shingles documents on several threads at once,
    and one shared buffer would let one thread's tokens overwrite another's."""
    ws = getattr(_LOCAL, "workspace", None)
    if ws is None:
        ws = _LOCAL.workspace = Workspace()
    return ws
