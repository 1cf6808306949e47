"""Freed arrays leave the process (simdoc.memory.return_freed_blocks): the main process builds the
docs table from many arrays of a few MB, and glibc would keep their holes resident."""

from __future__ import annotations

import subprocess
import sys

import pytest

SCRIPT = """
import numpy as np, sys
from simdoc.memory import return_freed_blocks
if sys.argv[1] == "fixed":
    return_freed_blocks()
def rss():
    return int([l for l in open("/proc/self/status") if l.startswith("VmRSS")][0].split()[1]) * 1024
big = np.ones(16 << 20, np.uint8); del big  # glibc raises its threshold to this block's size
arrays = [np.ones(1 << 20, np.uint8) for _ in range(200)]
before = rss()
del arrays[::2]  # holes in the heap, unless each array was mapped apart
arrays.append(np.ones(1 << 12, np.uint8))  # something after the holes
print((before - rss()) / (100 << 20))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc and /proc")
def test_half_the_arrays_freed_give_back_half_their_memory():
    out = subprocess.run([sys.executable, "-c", SCRIPT, "fixed"], capture_output=True, text=True, check=True)
    assert float(out.stdout) > 0.8
