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


WORKER_SCRIPT = """
import multiprocessing, os, resource
import numpy as np
from simdoc.engines import local
from simdoc.memory import return_freed_blocks
return_freed_blocks()  # as the command line does, before its pools fork

def faults(_):
    np.ones(8 << 20, np.uint8)  # once: the heap grows to hold it
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(20):  # a task's arrays, made anew by each task
        a = np.ones(8 << 20, np.uint8)
        del a
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

# A pool of the local engine's workers (LocalEngine.map would compile the kernels first).
with multiprocessing.get_context("fork").Pool(2, local._start_worker, (os.getpid(), None, (), {})) as pool:
    print(min(pool.map(faults, [0, 1], chunksize=1)))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc and getrusage")
def test_a_worker_reuses_freed_blocks_instead_of_fresh_pages():
    # Mapped apart and unmapped, 20 blocks of 8 MB are 20 x 2,048 fresh pages (or 20 x 4 huge ones).
    out = subprocess.run([sys.executable, "-c", WORKER_SCRIPT], capture_output=True, text=True, check=True)
    assert int(out.stdout) < 20


HEAP_SCRIPT = """
import resource
import numpy as np
from simdoc.memory import heap_reused, return_freed_blocks
return_freed_blocks()
def rss():
    return int([l for l in open("/proc/self/status") if l.startswith("VmRSS")][0].split()[1]) * 1024
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
before = rss()
with heap_reused():
    kept = [np.ones(4 << 20, np.uint8) for _ in range(30)]  # 120 MB in use at once
    del kept
    at = faults()
    for _ in range(20):  # the join's arrays: made and dropped one after another
        a = np.ones(8 << 20, np.uint8)
        del a
    made = faults() - at
print(made, (rss() - before) >> 20)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc, getrusage and /proc")
def test_within_heap_reused_freed_blocks_are_reused_and_after_it_they_leave():
    out = subprocess.run([sys.executable, "-c", HEAP_SCRIPT], capture_output=True, text=True, check=True)
    made, kept_mb = map(int, out.stdout.split())
    assert made < 20  # not 20 x 2,048 fresh pages
    assert kept_mb < 40  # the 120 MB freed inside went back to the system at the end
