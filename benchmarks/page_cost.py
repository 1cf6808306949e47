"""What a page of memory costs the first time it is touched, on this machine.

On some virtual machines the host takes back memory the guest has freed (or
not touched for a while) within seconds, and supplies it afresh, page by
page, when the guest touches it again. Every new page-cache page of an index
then costs as much as that supply. This script shows whether the machine
does that: it fills a buffer, frees it, fills one of the same size again at
once, then again after sleeping.

    python benchmarks/page_cost.py [GiB] [sleep seconds]

A large gap between the first and the second fill, and a third fill as slow
as the first, mean freed memory goes back to the host quickly.
"""

from __future__ import annotations

import sys
import time

import numpy as np


def fill(gib: float) -> float:
    t = time.perf_counter()
    buf = np.ones(int(gib * 2**30) // 8)
    seconds = time.perf_counter() - t
    del buf
    return seconds


def main() -> None:
    gib = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0
    idle = float(sys.argv[2]) if len(sys.argv) > 2 else 10.0
    pages = gib * 2**30 / 4096
    for label, pause in (("first fill", 0.0), ("again at once", 0.0), (f"again after {idle:g} s idle", idle)):
        time.sleep(pause)
        s = fill(gib)
        print(f"{label:28s} {gib:g} GiB in {s:6.2f} s  {gib / s:5.2f} GiB/s  {s / pages * 1e6:5.2f} us/page")


if __name__ == "__main__":
    main()
