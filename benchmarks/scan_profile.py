"""Where the scan stage's time goes per document: read, digest, normalise, hash, sign.

Runs each step of the shingle stage's reading task on its own over the first
N files of a corpus (in this process, warm page cache) and prints CPU
seconds, microseconds a document and MB/s; then the whole task
(``simdoc.stages.scan._scan``) as the stage runs it. CPU time, not wall
time: the machine is shared.

    PYTHONPATH=$PWD python benchmarks/scan_profile.py /work/benchdata/c100k [N]

Measured (issue 32, 20,000 files of c100k, 74.7 MB, all ASCII, mean 3.7 KB,
one core of the shared 2-core VM, before the fused kernel):

    open+fstat+read+close   11.1 us/doc   336 MB/s
    blake2b-128 digest       5.0 us/doc   742 MB/s
    isascii + NUL sniff      0.7 us/doc
    bytes.join of a batch    2.7 us/doc
    collapse_whitespace     11.9 us/doc   313 MB/s   (lowercase + whitespace, bytes -> uint32)
    shingle_csr (stream)     6.5 us/doc   576 MB/s   (premix + MurmurHash3 of 5-windows)
    oph_csr                 12.6 us/doc   298 MB/s   (one-permutation MinHash + densify)
    whole task (_scan)      ~65 us/doc     57 MB/s   (the rest: per-file Python, ~15 us)

No Python str is made for an ASCII file (read_document keeps its bytes); the
compiled steps took half the time, each a pass over a batch-sized array.

After (simdoc.bytesign: one compiled pass a document, its code points and
window hashes in cache-resident scratch; same files, same machine, measured
back to back with the code before):

    sign_texts (fused)      17.5 us/doc   213 MB/s   (kernel alone 15.9; was 31.1 for the three above)
      of which decode + lowercase + whitespace 6.1, windows ~3.6, one-permutation MinHash ~6
    whole task (_scan)      ~54 us/doc     69 MB/s   (before: ~71 us/doc, 53 MB/s)

The rest of the task is the file's syscalls (12), blake2b (5) and per-file Python.

After the plain-file way (corpus.files.read_plain; each file's way decided by a cached look-up
of its name's end; same files, back to back with the code before, load average ~7):

    whole task (_scan)      39.6 us/doc   94 MB/s   (before: 53.6 us/doc, 70 MB/s)

That is within ~3 us/doc of its parts' sum (syscalls 11.2 + blake2b 5.1 + sniff 0.7 + join 2.6 +
sign_texts 17.1 = 36.7): 150 MB/s (24.9 us/doc) needs a faster kernel or digest, not less Python.

After a task's small files are read in one compiled loop (simdoc.kernels_read, the same system
calls with no Python between them, ASCII and NUL told there), signed from that buffer without a
join, and a task of nothing else made at once (simdoc.stages.scan_plain); same files, load ~1.3:

    read_files (compiled)    6.8 us/doc   549 MB/s   (the Python calls: 11.0)
    whole task (_scan)      30.7 us/doc   122 MB/s   (before: 34.6 us/doc, 108 MB/s)

Its parts: read 6.8 + blake2b 5.0 + the signing kernel 12.4 = 24.2; ~6.5 us/doc of Python is left
(outcomes, the docs columns, the paths' bytes). The digest and the kernel are ~17 of the 24.9
that 150 MB/s allows.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time

import numpy as np

from simdoc import kernels
from simdoc.corpus.walk import discover
from simdoc.minhash import MinHasher
from simdoc.params import ShingleParams, SignatureParams
from simdoc.shingling import ShingleSpec, _space_table
from simdoc.stages.scan import _scan, scan_tasks


def cpu(func, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        c0 = time.process_time()
        func()
        best = min(best, time.process_time() - c0)
    return best


def main(corpus: str, n: int) -> None:
    kernels.warm_up()
    entries = discover(corpus)[0][:n]
    n = len(entries)
    paths = [e.path for e in entries]

    def read_all() -> list[bytes]:
        out = []
        for p in paths:
            fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
            st = os.fstat(fd)
            out.append(os.read(fd, st.st_size + 1))
            os.fstat(fd)
            os.close(fd)
        return out

    bufs = read_all()
    nb = sum(map(len, bufs))
    print(f"{n} files, {nb / 1e6:.1f} MB, mean {nb / n:.0f} B, ASCII: {sum(b.isascii() for b in bufs)}")

    def report(name: str, t: float) -> None:
        print(f"{name:26s} {t:6.3f} CPU-s {t / n * 1e6:6.1f} us/doc {nb / 1e6 / t:6.0f} MB/s")

    report("open+fstat+read+close", cpu(read_all))
    try:
        from simdoc import kernels_read
        from simdoc.corpus.files import NOFOLLOW, PLAIN_OPEN
    except ImportError:  # an older simdoc, measured side by side
        kernels_read = None
    if kernels_read is not None and kernels_read.AVAILABLE:
        sizes = np.array([len(b) for b in bufs], dtype=np.int64)
        into = np.empty(int(sizes.sum()) + 1, np.uint8)

        def read_together() -> None:
            for a in range(0, n, 1000):
                kernels_read.read_files(paths[a : a + 1000], sizes[a : a + 1000], PLAIN_OPEN | NOFOLLOW, 8192, into)

        read_together()
        report("read_files (compiled)", cpu(read_together))
    report("blake2b-128", cpu(lambda: [hashlib.blake2b(b, digest_size=16).digest() for b in bufs]))
    report("isascii + NUL sniff", cpu(lambda: [(b.isascii(), b"\x00" in b[:8192]) for b in bufs]))
    report("bytes.join", cpu(lambda: b"".join(bufs)))
    raw = np.frombuffer(b"".join(bufs), np.uint8)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum([len(b) for b in bufs], out=offsets[1:])
    tokens = np.empty(len(raw), np.uint32)
    new = np.empty_like(offsets)
    space = _space_table()
    report("collapse_whitespace", cpu(lambda: kernels.collapse_whitespace(raw, offsets, space, tokens, new, True)))
    total = kernels.collapse_whitespace(raw, offsets, space, tokens, new, True)
    longest = int(np.diff(new).max())
    data = np.empty(total, np.uint32)
    sizes = np.empty(n, np.int64)
    args = (
        tokens[:total], new, 5, 0, np.zeros(1, np.uint8), False, data, data, sizes, np.empty(total, np.uint32),
        np.empty(longest, np.uint32), np.empty(longest, np.uint32), np.empty(longest, np.int64), False,
    )
    report("shingle_csr (stream)", cpu(lambda: kernels.shingle_csr(*args)))
    nnz = kernels.shingle_csr(*args)
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(sizes, out=indptr[1:])
    hasher = MinHasher(128)
    out = np.empty((n, 128), np.uint32)
    report("oph_csr", cpu(lambda: kernels.oph_csr(indptr, data[:nnz], hasher.oph_key, hasher.probe_key, out)))
    try:
        from simdoc import bytesign, kernels_bytes
    except ImportError:  # an older simdoc, measured side by side
        bytesign = None
    if bytesign is not None:
        kernels_bytes.warm_up()
        spec = ShingleSpec()
        batches = [bufs[i : i + 1000] for i in range(0, n, 1000)]
        rows = np.empty((1000, 128), np.uint32)
        report("sign_texts (fused)", cpu(lambda: [bytesign.sign_texts(b, spec, hasher, rows[: len(b)]) for b in batches]))
    tasks = list(scan_tasks([(e, None, False) for e in entries], ShingleParams().resolved(), SignatureParams(128).resolved()))
    _scan(tasks[0])
    report("whole task (_scan)", cpu(lambda: [_scan(t) for t in tasks], repeat=1))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 20000)
