"""Compiled inner loops (numba) for the two hot spots: shingle hashing and MinHash.

The numpy code in :mod:`simdoc.shingling` and :mod:`simdoc.minhash` is the
reference definition; these kernels compute exactly the same arrays, only
fused into one pass per document, without the large temporaries numpy
needs. Measured on the benchmark machine (one core): MinHash 128 permutations
~21 M shingles/s against ~4.7 M/s for the numpy version; hashing + per-document
sort/unique of character 5-shingles several times faster than numpy (see
benchmarks/RESULTS.md). Tests check both paths give identical output.

Numba promotes uint32 arithmetic to 64 bits, so every product is cast back
with ``uint32(...)``: that is the modulo-2**32 wrap the reference relies on.

The numba set-up (whether it is used, where compiled code is cached) is
:mod:`simdoc.jit`; the sorts of each row's hashes are :mod:`simdoc.kernels_sort`.
:func:`murmur_windows` is the one loop of MurmurHash3 over a document's
windows, shared with the bytes kernel (:mod:`simdoc.kernels_bytes`).
"""

from __future__ import annotations

import numpy as np

from simdoc.jit import CACHE, ENABLED

if ENABLED:
    from numba import njit, uint32, uint64

    from simdoc.kernels_sort import fold_repeats, radix_sort, sort64

    @njit(cache=CACHE, nogil=True, inline="always")
    def _rotl(x, r):
        return uint32((x << uint32(r)) | (x >> uint32(32 - r)))

    @njit(cache=CACHE, nogil=True, inline="always")
    def _fmix(h):
        h ^= h >> uint32(16)
        h = uint32(h * uint32(0x85EBCA6B))
        h ^= h >> uint32(13)
        h = uint32(h * uint32(0xC2B2AE35))
        h ^= h >> uint32(16)
        return h

    @njit(cache=CACHE, nogil=True, inline="always")
    def premix(c):
        """A 4-byte block (a token or code point) as MurmurHash3 mixes it before its round."""
        return uint32(_rotl(uint32(uint32(c) * uint32(0xCC9E2D51)), 15) * uint32(0x1B873593))

    @njit(cache=CACHE, nogil=True, inline="always")
    def _round(h, block):
        """One MurmurHash3_x86_32 round: the running hash ``h`` takes one premixed ``block``."""
        h ^= block
        h = _rotl(h, 13)
        return uint32(h * uint32(5) + uint32(0xE6546B64))

    @njit(cache=CACHE, nogil=True, inline="always")
    def _finish(view, kk):
        """The end of MurmurHash3_x86_32 for each hash of ``view``, after ``kk`` blocks of 4 bytes."""
        tail = uint32(4 * kk)
        for w in range(view.shape[0]):
            view[w] = _fmix(view[w] ^ tail)

    @njit(cache=CACHE, nogil=True, inline="always")
    def murmur_windows(blocks, length, k, seed, hashes):
        """MurmurHash3_x86_32 (``seed``) of every k-window of the premixed ``blocks[:length]``
        (one window of all of them if fewer than k) into ``hashes``; returns how many.

        The rounds run across all windows at once (the loop over windows is the
        inner one) so that the compiler vectorises them; slices indexed by the
        loop variable alone let numba drop its negative-index checks (~4x faster).
        """
        kk = k if length >= k else length
        nw = length - kk + 1
        view = hashes[:nw]
        for w in range(nw):
            view[w] = uint32(seed)
        for j in range(kk):
            column = blocks[j : j + nw]
            for w in range(nw):
                view[w] = _round(view[w], column[w])
        _finish(view, kk)
        return nw

    @njit(cache=CACHE, nogil=True, inline="always")
    def murmur_windows64(blocks, length, k, seed_low, seed_high, low, high, wide):
        """Verification's 64-bit hash of every k-window of the premixed ``blocks[:length]``
        into ``wide``: MurmurHash3_x86_32 under ``seed_high`` above it under ``seed_low``
        (:func:`murmur_windows` of each seed, joined); returns how many. ``low``/``high``:
        uint32 scratch for the two running hashes.

        Both seeds in one pass: each block is loaded once for two independent rounds,
        and the two halves are joined as they are finished, with no pass of their own.
        """
        kk = k if length >= k else length
        nw = length - kk + 1
        lo = low[:nw]
        hi = high[:nw]
        for w in range(nw):
            lo[w] = uint32(seed_low)
            hi[w] = uint32(seed_high)
        for j in range(kk):
            column = blocks[j : j + nw]
            for w in range(nw):
                block = column[w]
                lo[w] = _round(lo[w], block)
                hi[w] = _round(hi[w], block)
        tail = uint32(4 * kk)
        out = wide[:nw]
        for w in range(nw):
            out[w] = (uint64(_fmix(hi[w] ^ tail)) << uint64(32)) | uint64(_fmix(lo[w] ^ tail))
        return nw

    @njit(cache=CACHE, nogil=True)
    def shingle_csr(tokens, offsets, k, seed, anchors, use_anchors, out_data, out_counts, out_sizes, blocks, buf, tmp, starts, dedupe):
        """Hash each document's k-token windows (MurmurHash3_x86_32), sort, count repeats.

        With ``dedupe`` False the window hashes are written as they come, in text
        order and with repeats (``out_counts`` untouched): what MinHash needs, as a
        minimum does not care about order or repeats, without the sort.

        Writes the unique sorted hashes of document d after those of d-1 into
        ``out_data`` (with multiplicities in ``out_counts``) and their number
        into ``out_sizes[d]``; returns the total written. The Murmur rounds run
        across all windows of a document at once (the loop over windows is the
        inner one) so that the compiler can vectorise it. ``blocks`` (as long
        as ``tokens``), ``buf``, ``tmp`` and ``starts`` (as long as the longest
        document) are scratch space, passed in so that a worker can reuse it:
        fresh pages cost more than the hashing on some machines.
        """
        n = offsets.shape[0] - 1
        n_tok = tokens.shape[0]
        for i in range(n_tok):
            blocks[i] = premix(tokens[i])
        pos = 0
        for d in range(n):
            s = offsets[d]
            length = offsets[d + 1] - s
            out_sizes[d] = 0
            if length == 0:
                continue
            kk = k if length >= k else length
            nw = length - kk + 1
            gather = use_anchors and length >= k
            if gather:
                m = 0
                for w in range(nw):
                    if anchors[s + w]:
                        starts[m] = s + w
                        m += 1
                nw = m
                if nw == 0:
                    continue
                view = buf[:nw]
                for w in range(nw):
                    view[w] = uint32(seed)
                for j in range(kk):
                    for w in range(nw):
                        view[w] = _round(view[w], blocks[starts[w] + j])
                _finish(view, kk)
            else:
                nw = murmur_windows(blocks[s : s + length], length, k, seed, buf)
                view = buf[:nw]
            if not dedupe:
                dest = out_data[pos : pos + nw]
                for w in range(nw):
                    dest[w] = view[w]
                out_sizes[d] = nw
                pos += nw
                continue
            radix_sort(view, tmp[:nw])
            m = fold_repeats(view, out_data, out_counts, pos)
            out_sizes[d] = m
            pos += m
        return pos

    @njit(cache=CACHE, nogil=True)
    def minhash_csr(indptr, data, a, b, out):
        """out[d, p] = min over shingles x of row d of fmix32(a[p]*x + b[p]); empty rows all 0xFFFFFFFF.

        Four shingles per pass over the permutations: the four hash chains
        are independent, which roughly doubles throughput over one at a time.
        """
        n = indptr.shape[0] - 1
        num_perm = a.shape[0]
        acc = np.empty(num_perm, np.uint32)
        for d in range(n):
            acc[:] = uint32(0xFFFFFFFF)
            j = indptr[d]
            end = indptr[d + 1]
            while j + 4 <= end:
                x0 = data[j]
                x1 = data[j + 1]
                x2 = data[j + 2]
                x3 = data[j + 3]
                for p in range(num_perm):
                    h0 = _fmix(uint32(a[p] * x0 + b[p]))
                    h1 = _fmix(uint32(a[p] * x1 + b[p]))
                    h2 = _fmix(uint32(a[p] * x2 + b[p]))
                    h3 = _fmix(uint32(a[p] * x3 + b[p]))
                    acc[p] = min(min(acc[p], min(h0, h1)), min(h2, h3))
                j += 4
            while j < end:
                x = data[j]
                for p in range(num_perm):
                    acc[p] = min(acc[p], _fmix(uint32(a[p] * x + b[p])))
                j += 1
            out[d, :] = acc

    @njit(cache=CACHE, nogil=True, inline="always")
    def _mix64(z):
        z = (z ^ (z >> uint64(30))) * uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> uint64(27))) * uint64(0x94D049BB133111EB)
        return z ^ (z >> uint64(31))

    @njit(cache=CACHE, nogil=True)
    def oph_csr(indptr, data, key, probe_key, out):
        """One-permutation hashing with optimal densification (see simdoc.minhash)."""
        n = indptr.shape[0] - 1
        num_perm = out.shape[1]
        sig = np.empty(num_perm, np.uint32)
        filled = np.empty(num_perm, np.bool_)
        for d in range(n):
            sig[:] = uint32(0xFFFFFFFF)
            filled[:] = False
            start = indptr[d]
            end = indptr[d + 1]
            oph_bins(data[start:end], key, sig, filled)
            if end == start:
                out[d, :] = sig
                continue
            n_filled, one = 0, 0
            for i in range(num_perm):
                if filled[i]:
                    n_filled += 1
                    one = i
            if n_filled == 1:
                # Every empty bin's probe sequence can end only at the one filled bin (as
                # simdoc.minhash.oph_densify says): num_perm**2 / 1 attempts otherwise (a text of
                # one shingle at --num-perm 65536: ~12 s).
                out[d, :] = sig[one]
                continue
            for i in range(num_perm):
                if filled[i]:
                    out[d, i] = sig[i]
                    continue
                attempt = uint64(0)
                while True:
                    z = _mix64(probe_key + (uint64(i) << uint64(32)) + attempt)
                    src = ((z >> uint64(32)) * uint64(num_perm)) >> uint64(32)
                    if filled[src]:
                        out[d, i] = sig[src]
                        break
                    attempt += uint64(1)

    @njit(cache=CACHE, nogil=True)
    def oph_bins(data, key, sig, filled):
        """oph_csr's bin minima of one document, before densification, folded into sig/filled
        (a document given in pieces: the minimum of minima is the minimum)."""
        num_perm = sig.shape[0]
        for j in range(data.shape[0]):
            h = _mix64(uint64(data[j]) + key)
            b = ((h >> uint64(32)) * uint64(num_perm)) >> uint64(32)
            v = uint32(h & uint64(0xFFFFFFFF))
            if v < sig[b]:
                sig[b] = v
            filled[b] = True

    @njit(cache=CACHE, nogil=True)
    def band_keys_rows(signatures, rows, seeds, golden, mix1, mix2, out):
        """lsh.band_keys one document at a time: out[t, d] = key of band t of row d.

        The numpy reference walks the matrix a column at a time, 512 bytes
        apart; at 10^6 documents that reads every cache line 16 times.
        """
        n = signatures.shape[0]
        bands = seeds.shape[0]
        for d in range(n):
            row = signatures[d]
            for t in range(bands):
                h = seeds[t]
                for c in range(t * rows, (t + 1) * rows):
                    h ^= uint64(row[c])
                    h *= golden
                    h ^= h >> uint64(29)
                h ^= h >> uint64(30)
                h *= mix1
                h ^= h >> uint64(27)
                h *= mix2
                h ^= h >> uint64(31)
                out[t, d] = h

    @njit(cache=CACHE, nogil=True)
    def collapse_whitespace(cps, offsets, is_space, out, out_offsets, lower_ascii):
        """Per document: drop leading/trailing whitespace, turn each inner run into one blank.

        ``is_space[c]`` says whether code point c is whitespace (as str.split
        sees it); code points past the table are not. With ``lower_ascii``,
        A-Z become a-z (what bytes.lower() does; text lowered by str.lower()
        has none left). ``cps`` may be uint8 (ASCII bytes as they were read)
        or uint32 code points. Returns the total length.
        """
        n = offsets.shape[0] - 1
        limit = is_space.shape[0]
        pos = 0
        for d in range(n):
            out_offsets[d] = pos
            started = False
            pending = False
            for i in range(offsets[d], offsets[d + 1]):
                c = cps[i]
                if c < limit and is_space[c]:
                    if started:
                        pending = True
                else:
                    if pending:
                        out[pos] = 32
                        pos += 1
                        pending = False
                    if lower_ascii and c >= 65 and c <= 90:
                        c += 32
                    out[pos] = c
                    pos += 1
                    started = True
        out_offsets[n] = pos
        return pos

    @njit(cache=CACHE, nogil=True)
    def unique_rows(indptr, data, out_data, out_counts, out_sizes, tmp):
        """Sort each CSR row of 64-bit ``data`` and fold repeats: unique values and their counts.

        Row d's unique values are written after row d-1's, its count of them to
        ``out_sizes[d]``; returns the total. ``tmp`` is scratch as long as the
        longest row. (Verification's 64-bit shingles.)
        """
        pos = 0
        for d in range(indptr.shape[0] - 1):
            row = data[indptr[d] : indptr[d + 1]].copy()
            sort64(row, tmp[: row.shape[0]])
            m = fold_repeats(row, out_data, out_counts, pos)
            out_sizes[d] = m
            pos += m
        return pos

    @njit(cache=CACHE, nogil=True)
    def pair_sums(indptr, data, counts, rows_a, rows_b, out):
        """What the Jaccards of pairs of rows of one CSR of sorted sets with counts are made of.

        For pair p, rows ``rows_a[p]`` and ``rows_b[p]``: out[p] = (distinct values
        of a, of b, values in both, the sum over those of the smaller count, the
        sum of all counts of both), in one merge of the two rows. Rows stay where
        they are: a row shared by many pairs is merged in place each time.

        Two pairs are merged at once, in one loop: a merge's next step waits for the loads
        of its last, and the other merge's step fills that wait (1.25x faster on c100k's
        candidates, measured).
        """
        n = rows_a.shape[0]
        for p in range(0, n - 1, 2):
            q = p + 1
            a0, a1 = indptr[rows_a[p]], indptr[rows_a[p] + 1]
            b0, b1 = indptr[rows_b[p]], indptr[rows_b[p] + 1]
            c0, c1 = indptr[rows_a[q]], indptr[rows_a[q] + 1]
            d0, d1 = indptr[rows_b[q]], indptr[rows_b[q] + 1]
            i, j, k, m = a0, b0, c0, d0
            common_p = common_bag_p = common_q = common_bag_q = 0
            # Without branches: which side moves is a coin toss for the CPU's predictor.
            while i < a1 and j < b1 and k < c1 and m < d1:
                x = data[i]
                y = data[j]
                u = data[k]
                v = data[m]
                same_p = x == y
                same_q = u == v
                common_p += same_p
                common_bag_p += min(counts[i], counts[j]) * same_p
                common_q += same_q
                common_bag_q += min(counts[k], counts[m]) * same_q
                i += x <= y
                j += y <= x
                k += u <= v
                m += v <= u
            _merge_rest(data, counts, i, a1, j, b1, a0, b0, common_p, common_bag_p, out[p])
            _merge_rest(data, counts, k, c1, m, d1, c0, d0, common_q, common_bag_q, out[q])
        if n % 2:
            p = n - 1
            a0, a1 = indptr[rows_a[p]], indptr[rows_a[p] + 1]
            b0, b1 = indptr[rows_b[p]], indptr[rows_b[p] + 1]
            _merge_rest(data, counts, a0, a1, b0, b1, a0, b0, 0, 0, out[p])

    @njit(cache=CACHE, nogil=True, inline="always")
    def _merge_rest(data, counts, i, a1, j, b1, a0, b0, common, common_bag, row):
        """The rest of one merge from rows' positions i and j (what came before counted in
        ``common``/``common_bag``), and the row of pair_sums it gives."""
        while i < a1 and j < b1:
            x = data[i]
            y = data[j]
            same = x == y
            common += same
            common_bag += min(counts[i], counts[j]) * same
            i += x <= y
            j += y <= x
        total = 0
        for t in range(a0, a1):
            total += counts[t]
        for t in range(b0, b1):
            total += counts[t]
        row[0] = a1 - a0
        row[1] = b1 - b0
        row[2] = common
        row[3] = common_bag
        row[4] = total


def warm_up() -> None:
    """Compile (or load from cache) every kernel in this process, so forked workers inherit them."""
    if not ENABLED:
        return
    one = np.zeros(1, np.uint32)
    shingle_csr(
        one, np.array([0, 1], np.int64), 1, 0, np.zeros(1, np.uint8), False, one.copy(), one.copy(),
        np.zeros(1, np.int64), one.copy(), one.copy(), one.copy(), np.zeros(1, np.int64), True,
    )
    minhash_csr(np.array([0, 1], np.int64), one, one | 1, one, np.zeros((1, 1), np.uint32))
    oph_csr(np.array([0, 1], np.int64), one, np.uint64(1), np.uint64(2), np.zeros((1, 2), np.uint32))
    for cps in (one, np.zeros(1, np.uint8)):  # code points, and ASCII bytes as read
        collapse_whitespace(cps, np.array([0, 1], np.int64), np.zeros(1, np.uint8), one.copy(), np.zeros(2, np.int64), True)
    keys = np.zeros((1, 1), np.uint64)
    seeds = np.ones(1, np.uint64)
    for sigs in (np.zeros((1, 1), np.uint32), np.zeros((1, 1), np.uint32)):
        band_keys_rows(sigs, 1, seeds, seeds[0], seeds[0], seeds[0], keys)
        sigs.setflags(write=False)  # signatures mapped read-only from the index get their own build
    pair = np.zeros(1, np.int64)
    pair_sums(np.array([0, 1], np.int64), np.zeros(1, np.uint64), one, pair, pair, np.zeros((1, 5), np.int64))
