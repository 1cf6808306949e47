"""Compiled sorting of shingle hashes (numba): radix sorts of 32- and 64-bit values, repeats folded.

Each document's window hashes are sorted and their repeats counted before
they become a set (:func:`simdoc.kernels.shingle_csr`, 32 bits) or
verification's 64-bit set (:func:`simdoc.kernels_bytes.sets64_utf8`,
:func:`simdoc.kernels.unique_rows`). LSD radix sorts instead of a comparison
sort: the rows are a few thousand values, and np.sort on each would cost a
call per document. The 64-bit sort is most of the time of verification's
shingling (34 of 57 us a c100k document before it took two 11-bit passes
instead of four 8-bit ones, 21 after). Tests check them against np.sort
and np.unique.
"""

from __future__ import annotations

import numpy as np

from simdoc.jit import CACHE, ENABLED

# sort64 radix-sorts on 22 bits rows of SHORT_ROW to LONG_ROW values, on 32 bits the others.
SHORT_ROW = 1 << 11
LONG_ROW = 1 << 16

if ENABLED:
    from numba import njit, uint64

    @njit(cache=CACHE, nogil=True)
    def _starts(cnt):
        """Turn each row of byte counts into the start of each byte's run (exclusive prefix sums)."""
        for p in range(cnt.shape[0]):
            total = 0
            for c in range(cnt.shape[1]):
                t = cnt[p, c]
                cnt[p, c] = total
                total += t

    @njit(cache=CACHE, nogil=True)
    def fold_repeats(row, out_data, out_counts, pos):
        """Sorted ``row`` from ``out_data[pos]`` on, each value once, repeats in ``out_counts``.

        Without a branch on whether a value repeats (templated text repeats often enough
        for the predictor to miss): each value is written where its run's slot is, with
        the run's count so far; the last write of a run leaves its count (9% of
        verification's shingling, measured on c100k).
        """
        n = row.shape[0]
        if n == 0:
            return 0
        m = 0
        c = 1
        prev = row[0]
        out_data[pos] = prev
        out_counts[pos] = 1
        for w in range(1, n):
            v = row[w]
            new = v != prev
            m += new
            c = 1 if new else c + 1
            out_data[pos + m] = v
            out_counts[pos + m] = c
            prev = v
        return m + 1

    @njit(cache=CACHE, nogil=True)
    def radix_sort(a, tmp):
        """LSD radix sort of uint32 in 4 byte passes; the result ends in ``a``.

        The four passes' histograms are counted in one read of ``a`` (8% less
        time than counting before each pass, measured on 69 M values).
        """
        n = a.shape[0]
        cnt = np.zeros((4, 256), np.int64)
        for i in range(n):
            v = a[i]
            cnt[0, v & 255] += 1
            cnt[1, (v >> 8) & 255] += 1
            cnt[2, (v >> 16) & 255] += 1
            cnt[3, v >> 24] += 1
        _starts(cnt)
        src = a
        dst = tmp
        for p in range(4):
            shift = 8 * p
            start = cnt[p]
            for i in range(n):
                v = src[i]
                b = (v >> shift) & 255
                dst[start[b]] = v
                start[b] += 1
            src, dst = dst, src

    @njit(cache=CACHE, nogil=True)
    def sort64(a, tmp):
        """Sort uint64 ``a`` in place (``tmp``: scratch as long as ``a``).

        A row of a few thousand values: two LSD radix passes of 11 bits on the top
        22 bits, then insertion for the values they leave out of order. The values
        are shingle hashes, uniform over 64 bits: in a row of 4,000 about four pairs
        share their top 22 bits, so the insertion pass almost never moves a value
        and its branch is predicted. Values that are not uniform (a crafted text)
        cannot make it quadratic: past 4 moves a value on average, the rest is
        sorted by :func:`sort64_radix`. Short rows (the histograms would cost more
        than the values) and long ones (many would share 22 bits) go there directly.
        """
        n = a.shape[0]
        if n < SHORT_ROW or n > LONG_ROW:
            sort64_radix(a, tmp)
            return
        cnt = np.zeros((2, 2048), np.int64)
        for i in range(n):
            v = a[i]
            cnt[0, (v >> uint64(42)) & uint64(2047)] += 1
            cnt[1, v >> uint64(53)] += 1
        _starts(cnt)
        low = cnt[0]
        for i in range(n):
            v = a[i]
            b = (v >> uint64(42)) & uint64(2047)
            tmp[low[b]] = v
            low[b] += 1
        high = cnt[1]
        for i in range(n):
            v = tmp[i]
            b = v >> uint64(53)
            a[high[b]] = v
            high[b] += 1
        moves = 0
        for i in range(1, n):
            v = a[i]
            j = i - 1
            while j >= 0 and a[j] > v:
                a[j + 1] = a[j]
                j -= 1
            moves += i - 1 - j
            a[j + 1] = v
            if moves > 4 * n:
                sort64_radix(a, tmp)
                return

    @njit(cache=CACHE, nogil=True)
    def sort64_radix(a, tmp):
        """Sort uint64 ``a`` in place: LSD radix passes on the high 32 bits, then the rare
        runs of equal high halves put in order by insertion.

        The values are 64-bit shingle hashes whose two halves are independent
        32-bit hashes: a high half shared by different values is about as rare
        as a 32-bit collision, so the last step costs one comparison a value.
        Four byte passes (as ``radix_sort``) instead of a comparison sort:
        ~9x faster on rows of a few thousand values.
        """
        n = a.shape[0]
        cnt = np.zeros((4, 256), np.int64)
        for i in range(n):
            v = a[i] >> uint64(32)
            cnt[0, v & uint64(255)] += 1
            cnt[1, (v >> uint64(8)) & uint64(255)] += 1
            cnt[2, (v >> uint64(16)) & uint64(255)] += 1
            cnt[3, v >> uint64(24)] += 1
        _starts(cnt)
        src = a
        dst = tmp
        for p in range(4):
            shift = uint64(32 + 8 * p)
            start = cnt[p]
            for i in range(n):
                v = src[i]
                b = (v >> shift) & uint64(255)
                dst[start[b]] = v
                start[b] += 1
            src, dst = dst, src
        # After an even number of passes the result is back in ``a``.
        for i in range(1, n):
            v = a[i]
            j = i - 1
            while j >= 0 and (a[j] >> uint64(32)) == (v >> uint64(32)) and a[j] > v:
                a[j + 1] = a[j]
                j -= 1
            a[j + 1] = v
