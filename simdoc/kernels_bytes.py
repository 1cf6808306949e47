"""One compiled pass from a batch's UTF-8 bytes to MinHash signatures (issue 32).

:func:`sign_utf8` takes the documents of a batch as one ``uint8`` array and
their offsets, and for each document decodes UTF-8, maps every code point
through a table (lowercase and Unicode normalisation folded in, whitespace
marked), collapses whitespace runs as ``" ".join(text.split())`` does, hashes
every character k-window with MurmurHash3 (:func:`simdoc.kernels.murmur_windows`,
the loop :func:`simdoc.kernels.shingle_csr` runs) and folds the window hashes into the
signature (one-permutation hashing as :func:`simdoc.kernels.oph_csr`, or the
classic scheme as :func:`simdoc.kernels.minhash_csr`). The document's code
points and window hashes live only in scratch arrays as long as the longest
document, reused for every document, so they stay in the CPU's cache.
:func:`sets64_utf8` decodes the same way and makes verification's 64-bit
shingle sets (two MurmurHash3 seeds a window in one pass,
:func:`simdoc.kernels.murmur_windows64`, sorted, with counts,
:func:`simdoc.kernels_sort.sort64_fold`); :func:`pair_sums_utf8` compares two documents that
way with no set made, their window hashes counted in one hash table.

It is exact or it declines: a document holding a byte sequence that is not
strict UTF-8 (Python's decoder would replace it), a code point past the
table (the table holds only what is safe to map one code point at a time,
see :func:`simdoc.bytesign.code_point_table`), or one whose table entry is
:data:`UNSAFE` is reported not handled, and the caller signs it the
reference way. The table is the whole of the normalisation semantics: this
kernel only applies it.
"""

from __future__ import annotations

import numpy as np

from simdoc.jit import CACHE, ENABLED

UNSAFE = 0xFFFFFFFF  # a table entry: this code point needs the reference path
SPACE = 32  # a table entry: whitespace, as str.split() sees it once normalised
# pair_sums_utf8's longest probe of its table (at most half full, of uniform hashes: a run this
# long is astronomically rare); past it the pair is left to the sorted way, so that hashes
# crafted to collide cannot make a probe walk the table.
PROBE_LIMIT = 256

if ENABLED:
    from numba import int64, njit, uint32, uint64

    from simdoc.kernels import _fmix, _mix64, _round, murmur_windows, murmur_windows64, premix
    from simdoc.kernels_sort import sort64_fold

    @njit(cache=CACHE, nogil=True)
    def ascii_tables(table):
        """The first 128 entries of ``table`` as :func:`_decode` reads an ASCII document: each
        one premixed (a MurmurHash3 block), and a flag (1 whitespace, 2 :data:`UNSAFE` or past
        the table, else 0). Made once a batch: the premix and the tests leave the byte loop."""
        pre = np.zeros(128, np.uint32)
        flags = np.full(128, np.uint8(2), np.uint8)
        for c in range(min(128, table.shape[0])):
            m = table[c]
            pre[c] = premix(m)
            flags[c] = np.uint8(2) if m == uint32(UNSAFE) else (np.uint8(1) if m == SPACE else np.uint8(0))
        return pre, flags

    @njit(cache=CACHE, nogil=True)
    def _decode(raw, s, e, table, pre, flags, blocks):
        """Normalised code points of raw[s:e], premixed as MurmurHash3 blocks, into ``blocks``;
        returns how many, or -1 if the document needs the reference path. ``pre``/``flags``:
        :func:`ascii_tables` of ``table``.

        An ASCII document goes byte by byte through ``pre``/``flags``, without a branch (one
        would be mispredicted at every word): a run of whitespace writes one blank and moves
        on only after the first of it; a trailing blank is then dropped. Unsigned counters
        (numba adds no negative-index fix-up to the store) and the premix out of the loop made
        this ~2x faster (c100k's bytes: 600 -> 1200 MB/s a core).
        """
        src = raw[s:e]
        high = src.max() if e > s else 0  # a past-ASCII byte makes it >= 0x80
        if high < 0x80:
            pos = uint64(0)
            gap = uint64(1)  # at the start, or after whitespace: a blank here would be dropped or doubled
            bad = np.uint8(0)
            for i in range(src.shape[0]):
                c = src[i]
                f = flags[c]
                bad |= f
                space = uint64(f & np.uint8(1))
                blocks[pos] = pre[c]
                pos += uint64(1) - (space & gap)
                gap = space
            if bad & np.uint8(2):
                return -1
            if pos > 0 and gap:
                pos -= uint64(1)
            return int64(pos)
        n = _decode_utf8(raw, s, e, table, blocks)
        if n < 0:
            return -1
        # Premixed in a pass of its own: the compiler vectorises it.
        view = blocks[:n]
        for i in range(n):
            view[i] = premix(view[i])
        return n

    @njit(cache=CACHE, nogil=True)
    def _decode_utf8(raw, s, e, table, blocks):
        """_decode's code points of a document with bytes past ASCII (not premixed)."""
        limit = table.shape[0]
        pos = 0
        gap = True
        i = s
        while i < e:
            c = uint32(raw[i])
            i += 1
            if c >= 0x80:
                # Strict UTF-8 as Python decodes it: no overlong forms, no surrogates. Four-byte
                # sequences (past the BMP) are not in the table: the reference path takes them.
                if 0xC2 <= c <= 0xDF and i < e and (raw[i] & 0xC0) == 0x80:
                    c = ((c & uint32(0x1F)) << uint32(6)) | uint32(raw[i] & 0x3F)
                    i += 1
                elif 0xE0 <= c <= 0xEF and i + 1 < e and (raw[i] & 0xC0) == 0x80 and (raw[i + 1] & 0xC0) == 0x80:
                    c = ((c & uint32(0x0F)) << uint32(12)) | (uint32(raw[i] & 0x3F) << uint32(6)) | uint32(raw[i + 1] & 0x3F)
                    i += 2
                    if c < 0x800 or (0xD800 <= c <= 0xDFFF):
                        return -1
                else:
                    return -1
            if c >= limit:
                return -1
            m = table[c]
            if m == SPACE:
                if not gap:
                    blocks[pos] = SPACE
                    pos += 1
                    gap = True
                continue
            if m == UNSAFE:
                return -1
            blocks[pos] = m
            pos += 1
            gap = False
        if pos > 0 and gap:
            pos -= 1  # the trailing blank
        return pos

    @njit(cache=CACHE, nogil=True)
    def sets64_utf8(raw, starts, ends, k, table, seed_low, seed_high, out_data, out_counts, out_sizes, handled, blocks, low, high, wide, tmp):
        """The 64-bit shingle sets of verification (``shingle_texts(form="sets64")``) of each
        document ``raw[starts[d]:ends[d]]``: each window's hash under ``seed_high`` above its
        hash under ``seed_low``, sorted, repeats folded into counts. Row d's values follow row
        d-1's in ``out_data``/``out_counts``, its count in ``out_sizes[d]`` (0 for a document
        not handled); returns the total. ``low``/``high`` (uint32), ``wide``/``tmp`` (uint64):
        scratch as long as the longest document in bytes.
        """
        pos = 0
        pre, flags = ascii_tables(table)
        for d in range(starts.shape[0]):
            out_sizes[d] = 0
            length = _decode(raw, starts[d], ends[d], table, pre, flags, blocks)
            handled[d] = length >= 0
            if length <= 0:
                continue
            nw = murmur_windows64(blocks, length, k, seed_low, seed_high, low, high, wide)
            row = wide[:nw]
            m = sort64_fold(row, tmp[:nw], out_data, out_counts, pos)
            out_sizes[d] = m
            pos += m
        return pos

    @njit(cache=CACHE, nogil=True)
    def pair_sums_utf8(raw, starts, ends, k, table, seed_low, seed_high, out, handled, blocks, low, high, wide, keys, cnt, slots):
        """``simdoc.kernels.pair_sums`` of the 64-bit shingle sets (:func:`sets64_utf8`'s) of
        documents 2p and 2p + 1 (``raw[starts[i]:ends[i]]``), for each pair p, with no set made:
        both documents' window hashes are counted in one open-addressing table (a value's
        count in a and in b), which is then read once. For a pair whose documents no other
        pair needs, the sort of each row and their merge cost ~1.3x this (c100k's lone pairs).

        ``handled[p]`` False: a document the table cannot decode (:func:`_decode`), or a probe
        longer than :data:`PROBE_LIMIT` (hashes crafted to collide): the caller compares that
        pair the sorted way. ``keys``/``cnt`` (uint64, zeroed, a power of two at least twice
        the bytes of the longest pair), ``slots`` (int64, that pair's bytes) and ``blocks``,
        ``low``/``high`` (uint32), ``wide`` (uint64) as long as the longest document: scratch.
        ``cnt`` is left zeroed.
        """
        pre, flags = ascii_tables(table)
        one_a = uint64(1)
        one_b = uint64(1) << uint64(32)
        for p in range(starts.shape[0] // 2):
            a, b = 2 * p, 2 * p + 1
            bits = 4
            while (1 << bits) < 2 * ((ends[a] - starts[a]) + (ends[b] - starts[b])):
                bits += 1
            shift = uint64(64 - bits)
            mask = uint64((1 << bits) - 1)
            used = 0
            total = 0
            fine = True
            for d, one in ((a, one_a), (b, one_b)):
                length = _decode(raw, starts[d], ends[d], table, pre, flags, blocks)
                if length < 0:
                    fine = False
                    break
                if length == 0:
                    continue
                nw = murmur_windows64(blocks, length, k, seed_low, seed_high, low, high, wide)
                total += nw
                used = _count_windows(wide, nw, one, keys, cnt, shift, mask, slots, used)
                if used < 0:
                    used = -used - 1
                    fine = False
                    break
            handled[p] = fine
            only_a = only_b = common = common_bag = 0
            for i in range(used):  # read, and zeroed for the next pair
                s = slots[i]
                c = cnt[s]
                cnt[s] = 0
                ca = c & uint64(0xFFFFFFFF)
                cb = c >> uint64(32)
                only_a += ca > 0
                only_b += cb > 0
                common += (ca > 0) & (cb > 0)
                common_bag += min(ca, cb)
            out[p, 0] = only_a
            out[p, 1] = only_b
            out[p, 2] = common
            out[p, 3] = common_bag
            out[p, 4] = total

    @njit(cache=CACHE, nogil=True, inline="always")
    def _count_windows(wide, nw, one, keys, cnt, shift, mask, slots, used):
        """Add ``one`` to the count of each of ``wide[:nw]`` in the table (a new value's slot is
        put in ``slots``); returns the slots used, or -(slots used) - 1 after a probe longer
        than PROBE_LIMIT. A slot's count 0: empty (a value's own count is never 0)."""
        for w in range(nw):
            v = wide[w]
            s = v >> shift
            probes = 0
            while True:
                c = cnt[s]
                if c == 0:
                    keys[s] = v
                    cnt[s] = one
                    slots[used] = s
                    used += 1
                    break
                if keys[s] == v:
                    cnt[s] = c + one
                    break
                s = (s + uint64(1)) & mask
                probes += 1
                if probes > PROBE_LIMIT:
                    return -used - 1
        return used

    @njit(cache=CACHE, nogil=True)
    def sign_utf8(raw, offsets, k, table, oph, key, probe_key, a, b, out, n_windows, handled, blocks, hashes, wide, sig64):
        """Sign each document raw[offsets[d]:offsets[d+1]]: out[d] its signature, n_windows[d]
        its number of k-windows (the stream's length), handled[d] whether it was done here.

        ``oph``: one-permutation hashing with ``key``/``probe_key``, else the classic
        scheme with ``a``/``b``. ``blocks`` and ``hashes`` (uint32) and ``wide`` (uint64) are
        scratch as long as the longest document in bytes, ``sig64`` (uint64) as long as the
        signature. A document not handled leaves its row of ``out`` untouched.
        """
        n = offsets.shape[0] - 1
        num_perm = out.shape[1]
        pre, flags = ascii_tables(table)
        for d in range(n):
            length = _decode(raw, offsets[d], offsets[d + 1], table, pre, flags, blocks)
            if length < 0:
                handled[d] = False
                continue
            handled[d] = True
            if length == 0:
                n_windows[d] = 0
                for p in range(num_perm):
                    out[d, p] = uint32(0xFFFFFFFF)
                continue
            if k == 5 and length >= 5:
                nw = _murmur_windows5(blocks, length, hashes)
            else:
                nw = murmur_windows(blocks, length, k, uint32(0), hashes)  # SHINGLE_SEED
            n_windows[d] = nw
            view = hashes[:nw]
            if oph:
                _oph_one(view, key, probe_key, wide[:nw], sig64, out[d])
            else:
                _classic_one(view, a, b, out[d])

    @njit(cache=CACHE, nogil=True, inline="always")
    def _murmur_windows5(blocks, length, hashes):
        """murmur_windows(blocks, length, 5, 0, hashes) for length >= 5: the five rounds of a
        window in registers, with no store between them (the default character 5-shingles;
        ~1.4x faster than a pass over the windows a round)."""
        nw = length - 4
        b0 = blocks[0:nw]
        b1 = blocks[1 : nw + 1]
        b2 = blocks[2 : nw + 2]
        b3 = blocks[3 : nw + 3]
        b4 = blocks[4 : nw + 4]
        view = hashes[:nw]
        for w in range(nw):
            h = _round(_round(_round(_round(_round(uint32(0), b0[w]), b1[w]), b2[w]), b3[w]), b4[w])
            view[w] = _fmix(h ^ uint32(20))
        return nw

    @njit(cache=CACHE, nogil=True, inline="always")
    def _oph_one(view, key, probe_key, wide, sig64, row):
        """oph_csr of one non-empty document. A bin holds 2**32 until a shingle falls in it:
        one array for both the minimum and whether the bin was hit. The windows' 64-bit
        hashes are made in a pass of their own (``wide``), which the compiler vectorises."""
        num_perm = row.shape[0]
        empty = uint64(1) << uint64(32)
        for p in range(num_perm):
            sig64[p] = empty
        for w in range(view.shape[0]):
            wide[w] = _mix64(uint64(view[w]) + key)
        if num_perm > 1 and num_perm & (num_perm - 1) == 0:
            # ((h >> 32) * 2**s) >> 32 is h >> (64 - s): one multiply fewer a window.
            bits = 0
            while (1 << bits) < num_perm:
                bits += 1
            shift = uint64(64 - bits)
            for w in range(wide.shape[0]):
                h = wide[w]
                bin_ = h >> shift
                # Stored whether smaller or not: a branch here costs more than the store (measured).
                sig64[bin_] = min(h & uint64(0xFFFFFFFF), sig64[bin_])
        else:
            for w in range(wide.shape[0]):
                h = wide[w]
                bin_ = ((h >> uint64(32)) * uint64(num_perm)) >> uint64(32)
                sig64[bin_] = min(h & uint64(0xFFFFFFFF), sig64[bin_])
        n_filled, one = 0, 0
        for i in range(num_perm):
            if sig64[i] != empty:
                n_filled += 1
                one = i
        if n_filled == 1:  # every empty bin borrows from it (see simdoc.kernels.oph_csr)
            for i in range(num_perm):
                row[i] = uint32(sig64[one])
            return
        for i in range(num_perm):
            if sig64[i] != empty:
                row[i] = uint32(sig64[i])
                continue
            attempt = uint64(0)
            while True:
                z = _mix64(probe_key + (uint64(i) << uint64(32)) + attempt)
                src = ((z >> uint64(32)) * uint64(num_perm)) >> uint64(32)
                if sig64[src] != empty:
                    row[i] = uint32(sig64[src])
                    break
                attempt += uint64(1)

    @njit(cache=CACHE, nogil=True, inline="always")
    def _classic_one(view, a, b, row):
        """minhash_csr of one document."""
        num_perm = row.shape[0]
        for p in range(num_perm):
            acc = uint32(0xFFFFFFFF)
            ap = a[p]
            bp = b[p]
            for w in range(view.shape[0]):
                acc = min(acc, _fmix(uint32(ap * view[w] + bp)))
            row[p] = acc


def warm_up() -> None:
    """Compile (or load from cache) the kernel in this process."""
    if not ENABLED:
        return
    one = np.ones(1, np.uint32)
    raw = np.frombuffer(b"a", np.uint8)  # read-only, as a batch's bytes are: its own build
    for oph in (True, False):
        sign_utf8(
            raw, np.array([0, 1], np.int64), 1, np.zeros(1, np.uint32), oph, np.uint64(1), np.uint64(2),
            one, one, np.zeros((1, 2), np.uint32), np.zeros(1, np.int64), np.zeros(1, np.bool_), one.copy(), one.copy(),
            np.zeros(1, np.uint64), np.zeros(2, np.uint64),
        )
    wide = np.zeros(1, np.uint64)
    pair_sums_utf8(
        raw, np.array([0, 0], np.int64), np.array([1, 1], np.int64), 1, np.zeros(128, np.uint32), np.uint32(0), np.uint32(1),
        np.zeros((1, 5), np.int64), np.zeros(1, np.bool_), one.copy(), one.copy(), one.copy(), wide.copy(),
        np.zeros(16, np.uint64), np.zeros(16, np.uint64), np.zeros(2, np.int64),
    )
    sets64_utf8(
        raw, np.array([0], np.int64), np.array([1], np.int64), 1, np.zeros(128, np.uint32), np.uint32(0), np.uint32(1), wide, one.copy(),
        np.zeros(1, np.int64), np.zeros(1, np.bool_), one.copy(), one.copy(), one.copy(), wide.copy(), wide.copy(),
    )
