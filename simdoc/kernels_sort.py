"""Compiled sorting of shingle hashes (numba): radix sorts of 32- and 64-bit values, repeats folded; a band's keys ordered.

Each document's window hashes are sorted and their repeats counted before
they become a set (:func:`simdoc.kernels.shingle_csr`, 32 bits) or
verification's 64-bit set (:func:`simdoc.kernels_bytes.sets64_utf8`,
:func:`simdoc.kernels.unique_rows`). LSD radix sorts instead of a comparison
sort: the rows are a few thousand values, and np.sort on each would cost a
call per document. The 64-bit sort is most of the time of verification's
shingling (34 of 57 us a c100k document before it took two 11-bit passes
instead of four 8-bit ones, 21 after; two passes of 9 or 10 bits with 32-bit
counters, the last check of order done by the fold, cut sort and fold of
c100k's 43,833 verified rows from 10.4 to 6.9 ns a value, and the whole
kernel from 10.6 to 9.4 ns a byte). Tests check them against np.sort and np.unique
(tests/test_kernels_sort.py).

:func:`argsort64` is the LSH index's stable argsort of a band's keys (one per
document, 13 bands a build): a counting sort on the keys' top bits, then each
small bucket by insertion; 10^6 keys in ~10 ms where numpy's argsort and the
fix-up of its ties take ~70 (tests/test_band_order.py checks it against
``np.argsort(kind="stable")``).
"""

from __future__ import annotations

import numpy as np

from simdoc.jit import CACHE, ENABLED

# sort64 sorts rows shorter than SHORT_ROW by insertion alone, longer than LONG_ROW by sort64_lsd.
SHORT_ROW = 32
LONG_ROW = 1 << 30  # the radix passes' counters are 32-bit
# argsort64 sorts a bucket of more keys than this by a merge sort, not by insertion.
BUCKET_LONG = 64

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
            m, c = _fold_next(v, prev, m, c, out_data, out_counts, pos)
            prev = v
        return m + 1

    @njit(cache=CACHE, nogil=True, inline="always")
    def _fold_next(v, prev, m, c, out_data, out_counts, pos):
        """The fold's step for a value ``v`` not below ``prev``: (m, c) after it (the last run's
        slot ``pos + m``, its count ``c``), ``v`` written in that slot with the count so far."""
        new = v != prev
        m += new
        c = 1 if new else c + 1
        out_data[pos + m] = v
        out_counts[pos + m] = c
        return m, c

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

        Two LSD radix passes on the top bits (:func:`_top_passes`), then insertion
        for the values they leave out of order. The values are shingle hashes,
        uniform over 64 bits, so the insertion pass almost never moves a value and
        its branch is predicted. Values that are not uniform (a crafted text, small
        numbers) cannot make it quadratic: past 4 moves a value on average, the row
        is sorted by :func:`sort64_lsd`.
        """
        n = a.shape[0]
        if n < SHORT_ROW:
            _insertion(a)
            return
        if n > LONG_ROW:
            sort64_lsd(a, tmp)
            return
        _top_passes(a, tmp)
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
                sort64_lsd(a, tmp)
                return

    @njit(cache=CACHE, nogil=True)
    def sort64_fold(a, tmp, out_data, out_counts, pos):
        """:func:`sort64` then :func:`fold_repeats` (same arguments, same result), the
        insertion pass done by the fold: one pass over the row fewer (verification's rows).

        ``a`` is left in the order of the radix passes, not sorted.
        """
        n = a.shape[0]
        if n < SHORT_ROW or n > LONG_ROW:
            sort64(a, tmp)
            return fold_repeats(a, out_data, out_counts, pos)
        _top_passes(a, tmp)
        m = _fold_nearly_sorted(a, out_data, out_counts, pos)
        if m < 0:
            sort64_lsd(a, tmp)
            m = fold_repeats(a, out_data, out_counts, pos)
        return m

    @njit(cache=CACHE, nogil=True)
    def _fold_nearly_sorted(a, out_data, out_counts, pos):
        """:func:`fold_repeats` of a row that a few values leave out of order: such a value
        is put in its place among those already written (their counts as well); -1 if that
        took more than 4 moves a value on average (the caller sorts the row and folds it)."""
        n = a.shape[0]
        m = 0
        c = 1
        prev = a[0]
        out_data[pos] = prev
        out_counts[pos] = 1
        moves = 0
        for w in range(1, n):
            v = a[w]
            if v < prev:  # rare: a branch the predictor gets right
                j = pos + m
                while j >= pos and out_data[j] > v:
                    j -= 1
                moves += pos + m - j
                if moves > 4 * n:
                    return -1
                if j >= pos and out_data[j] == v:
                    out_counts[j] += 1
                    continue
                for t in range(pos + m, j, -1):
                    out_data[t + 1] = out_data[t]
                    out_counts[t + 1] = out_counts[t]
                out_data[j + 1] = v
                out_counts[j + 1] = 1
                m += 1  # the last run (prev's, count c) moved up one
                continue
            m, c = _fold_next(v, prev, m, c, out_data, out_counts, pos)
            prev = v
        return m + 1

    @njit(cache=CACHE, nogil=True)
    def _top_passes(a, tmp):
        """Two LSD radix passes of d bits each on the top 2d bits of ``a`` (result in ``a``),
        d chosen so that 2**(2d) is 64 to 128 times the row's length: about one value in
        128 then shares its top bits with a larger one that came first.

        Counters of 32 bits and digits of 9 or 10 bits for a row of a few thousand values
        (two 11-bit passes with 64-bit counters: 15% slower, measured on rows of 3,800).
        """
        n = a.shape[0]
        bits = 1
        while (1 << bits) < n:
            bits += 1
        d = min((bits + 7) // 2, 16)
        mask = uint64((1 << d) - 1)
        s1 = uint64(64 - d)
        s0 = uint64(64 - 2 * d)
        cnt = np.zeros((2, 1 << d), np.int32)
        for i in range(n):
            v = a[i]
            cnt[0, (v >> s0) & mask] += 1
            cnt[1, v >> s1] += 1
        _starts(cnt)
        low = cnt[0]
        for i in range(n):
            v = a[i]
            b = (v >> s0) & mask
            tmp[low[b]] = v
            low[b] += 1
        high = cnt[1]
        for i in range(n):
            v = tmp[i]
            b = v >> s1
            a[high[b]] = v
            high[b] += 1

    @njit(cache=CACHE, nogil=True)
    def _insertion(a):
        """Insertion sort of a short row."""
        for i in range(1, a.shape[0]):
            v = a[i]
            j = i - 1
            while j >= 0 and a[j] > v:
                a[j + 1] = a[j]
                j -= 1
            a[j + 1] = v

    @njit(cache=CACHE, nogil=True)
    def sort64_lsd(a, tmp):
        """Sort uint64 ``a`` in place: LSD radix on all 64 bits, 8 byte passes, each
        pass whose byte is the same in every value skipped. Linear whatever the values;
        :func:`sort64`'s way out for rows its top-bits passes leave far out of order.
        """
        n = a.shape[0]
        if n < 2:
            return
        cnt = np.zeros((8, 256), np.int64)
        for i in range(n):
            v = a[i]
            for p in range(8):
                cnt[p, (v >> uint64(8 * p)) & uint64(255)] += 1
        first = a[0]
        src = a
        dst = tmp
        for p in range(8):
            shift = uint64(8 * p)
            if cnt[p, (first >> shift) & uint64(255)] == n:
                continue  # every value has this byte: the pass would move nothing
            start = cnt[p]
            total = 0
            for c in range(256):
                t = start[c]
                start[c] = total
                total += t
            for i in range(n):
                v = src[i]
                b = (v >> shift) & uint64(255)
                dst[start[b]] = v
                start[b] += 1
            src, dst = dst, src
        if src is not a:
            a[:] = src

    @njit(cache=CACHE, nogil=True)
    def argsort64(keys, order, ordered, cnt):
        """``np.argsort(keys, kind="stable")`` into ``order`` (int64) and the keys in that order
        into ``ordered`` (uint64), for a band's keys (:func:`simdoc.lsh.stable_order`): hashes,
        about uniform. A counting sort on their top bits (stable) puts each key in its bucket, then
        each bucket is sorted by insertion (stable: a key moves only past larger ones), or, longer
        than :data:`BUCKET_LONG`, by a merge sort (stable too): keys crowded into a few buckets
        cost n log n, never n^2. ``cnt`` (int64): 2^bits + 1 zeros, 1 <= bits <= 32.
        """
        n = keys.shape[0]
        nb = cnt.shape[0] - 1
        bits = 0
        while (1 << bits) < nb:
            bits += 1
        shift = uint64(64 - bits)
        for i in range(n):
            cnt[(keys[i] >> shift) + uint64(1)] += 1
        for b in range(nb):
            cnt[b + 1] += cnt[b]
        for i in range(n):  # cnt[b]: where bucket b's next key goes, its end once all are in
            b = keys[i] >> shift
            p = cnt[b]
            cnt[b] = p + 1
            ordered[p] = keys[i]
            order[p] = i
        start = 0
        for b in range(nb):
            end = cnt[b]
            if end - start > BUCKET_LONG:
                sub = np.argsort(ordered[start:end], kind="mergesort")
                ordered[start:end] = ordered[start:end][sub]
                order[start:end] = order[start:end][sub]
            else:
                for i in range(start + 1, end):
                    v = ordered[i]
                    o = order[i]
                    j = i - 1
                    while j >= start and ordered[j] > v:
                        ordered[j + 1] = ordered[j]
                        order[j + 1] = order[j]
                        j -= 1
                    ordered[j + 1] = v
                    order[j + 1] = o
            start = end
