"""A batch of small plain files read into one buffer in a compiled loop (numba calling the C library).

The shingle stage's reading of a small file in Python (:func:`simdoc.corpus.files.read_plain`)
is an ``os.open``, ``os.fstat``, ``os.read``, ``os.fstat`` and ``os.close``: 11 us a file of
3.7 KB, of which the kernel's own work is ~6 (c100k, measured in C). :func:`read_files` makes
the same calls with the same flags for a batch, each file's bytes straight into one buffer, one
after another, as the compiled signing pass takes them (:func:`simdoc.bytesign.sign_joined`),
and tells which bytes are ASCII and which hold a NUL among the first ``sniff``.

It takes only the plain case, where ``read_plain`` would make exactly these calls and get a
whole, unchanged file: a regular file (``statx`` of the open descriptor), of the size the walk
saw and less than 16 MiB, whose one read gives exactly that size, and whose size and
modification time are the same after the read. Any other file (it cannot be opened, is no
longer regular, changed size, or changed while read) is marked :data:`AGAIN` and left for
``read_plain``, which reads it again from the start and says what it found.
"""

from __future__ import annotations

import sys

import numpy as np

from simdoc.jit import CACHE, ENABLED

AT_EMPTY_PATH = 0x1000
# STATX_TYPE | STATX_MODE | STATX_MTIME | STATX_SIZE: what the check needs.
NEEDED = 0x1 | 0x2 | 0x40 | 0x200
S_IFMT, S_IFREG = 0o170000, 0o100000
READ, AGAIN = 1, 0  # a file's state: read into the buffer, or left for read_plain
ASCII, NUL = 2, 4  # and, once read: all its bytes are ASCII; a NUL among its first ``sniff`` bytes
UTF8 = 8  # not ASCII, strict UTF-8 (what bytes.decode("utf-8") takes), and no byte-order mark first

AVAILABLE = ENABLED and sys.platform.startswith("linux") and sys.byteorder == "little"

if AVAILABLE:
    from llvmlite import ir
    from numba import njit, types
    from numba.core import cgutils
    from numba.extending import intrinsic

    # The C library's functions by their names, so that the compiled code can be cached (a ctypes
    # pointer cannot); ``open`` is variadic in C and declared so.

    @intrinsic
    def _open(typingctx, path, flags):
        sig = types.int32(types.uintp, types.int32)

        def codegen(context, builder, signature, args):
            i8p = ir.IntType(8).as_pointer()
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(32), [i8p, ir.IntType(32)], var_arg=True), "open")
            return builder.call(fn, [builder.inttoptr(args[0], i8p), args[1]])

        return sig, codegen

    @intrinsic
    def _read(typingctx, fd, buf, n):
        sig = types.int64(types.int32, types.uintp, types.int64)

        def codegen(context, builder, signature, args):
            i8p = ir.IntType(8).as_pointer()
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(64), [ir.IntType(32), i8p, ir.IntType(64)]), "read")
            return builder.call(fn, [args[0], builder.inttoptr(args[1], i8p), args[2]])

        return sig, codegen

    @intrinsic
    def _close(typingctx, fd):
        sig = types.int32(types.int32)

        def codegen(context, builder, signature, args):
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(32), [ir.IntType(32)]), "close")
            return builder.call(fn, [args[0]])

        return sig, codegen

    @intrinsic
    def _fstatx(typingctx, fd, empty, buf):
        """``statx(fd, "", AT_EMPTY_PATH, NEEDED, buf)``: the open file's own stat."""
        sig = types.int32(types.int32, types.uintp, types.uintp)

        def codegen(context, builder, signature, args):
            i8p = ir.IntType(8).as_pointer()
            i32 = ir.IntType(32)
            fnty = ir.FunctionType(i32, [i32, i8p, i32, i32, i8p])
            fn = cgutils.get_or_insert_function(builder.module, fnty, "statx")
            fd_, empty_, buf_ = args
            return builder.call(fn, [fd_, builder.inttoptr(empty_, i8p), i32(AT_EMPTY_PATH), i32(NEEDED), builder.inttoptr(buf_, i8p)])

        return sig, codegen

    @njit(cache=CACHE, nogil=True)
    def _stat_ok(buf):
        # struct statx: stx_mask u32 @0, stx_mode u16 @28, stx_size u64 @40, stx_mtime @112.
        b32 = buf.view(np.uint32)
        return (b32[0] & NEEDED) == NEEDED and (b32[7] & S_IFMT) == S_IFREG

    LOW, HIGH = np.uint64(0x0101010101010101), np.uint64(0x8080808080808080)

    @njit(cache=CACHE, nogil=True)
    def _high_bits(out, words, a, b):
        """The OR of out[a:b] folded into the high bit of each byte lane: not 0 iff a byte is 0x80 or more."""
        first, last = min((a + 7) // 8 * 8, b), max(b // 8 * 8, a)
        acc = np.uint64(0)
        for j in range(a, first):
            acc |= np.uint64(out[j])
        for k in range(first // 8, last // 8):  # no early exit: the loop vectorises
            acc |= words[k]
        for j in range(max(last, first), b):
            acc |= np.uint64(out[j])
        return acc & HIGH

    @njit(cache=CACHE, nogil=True)
    def _zero_bytes(out, words, a, b):
        """Not 0 iff out[a:b] holds a 0 byte ((w - 0x01..) & ~w & 0x80.. marks a word's 0 bytes)."""
        first, last = min((a + 7) // 8 * 8, b), max(b // 8 * 8, a)
        hits = np.uint64(0)
        for j in range(a, first):
            hits |= np.uint64(out[j] == 0)
        for k in range(first // 8, last // 8):
            w = words[k]
            hits |= (w - LOW) & ~w & HIGH
        for j in range(max(last, first), b):
            hits |= np.uint64(out[j] == 0)
        return hits

    @njit(cache=CACHE, nogil=True)
    def _strict_utf8(out, a, b):
        """Whether out[a:b] is UTF-8 as RFC 3629 (and Python's decoder) has it: no overlong form,
        no surrogate (ED A0..BF), nothing past U+10FFFF (F4 90..)."""
        j = a
        while j < b:
            c = out[j]
            if c < 0x80:
                j += 1
                continue
            if 0xC2 <= c <= 0xDF:
                n, lo, hi = 1, 0x80, 0xBF
            elif 0xE0 <= c <= 0xEF:
                n = 2
                lo = 0xA0 if c == 0xE0 else 0x80
                hi = 0x9F if c == 0xED else 0xBF
            elif 0xF0 <= c <= 0xF4:
                n = 3
                lo = 0x90 if c == 0xF0 else 0x80
                hi = 0x8F if c == 0xF4 else 0xBF
            else:
                return False
            if j + n >= b:  # its continuation bytes run past the end
                return False
            if not (lo <= out[j + 1] <= hi):
                return False
            for q in range(j + 2, j + n + 1):
                if not (0x80 <= out[q] <= 0xBF):
                    return False
            j += n + 1
        return True

    @njit(cache=CACHE, nogil=True)
    def _read_files(paths, sizes, flags, sniff, out, starts, state, sb, empty, recheck):
        at = 0  # in paths
        pos = 0  # in out
        words = out[: out.shape[0] // 8 * 8].view(np.uint64)
        for i in range(sizes.shape[0]):
            path = paths.ctypes.data + at
            while paths[at] != 0:
                at += 1
            at += 1
            starts[i] = pos
            state[i] = AGAIN
            size = sizes[i]
            fd = _open(path, np.int32(flags))
            if fd < 0:
                continue
            ok = _fstatx(fd, empty.ctypes.data, sb.ctypes.data) == 0 and _stat_ok(sb) and np.int64(sb[5]) == size
            if ok:
                seconds, nanos = sb[14], sb.view(np.uint32)[30]
                ok = _read(fd, out.ctypes.data + pos, size + 1) == size  # one byte more: one that grew is told
                if recheck:  # (a caller that checks the bytes' digest needs no second statx: the digest decides)
                    ok = ok and _fstatx(fd, empty.ctypes.data, sb.ctypes.data) == 0 and _stat_ok(sb)
                    ok = ok and np.int64(sb[5]) == size and sb[14] == seconds and sb.view(np.uint32)[30] == nanos
            _close(fd)
            if not ok:
                continue
            state[i] = READ
            if _high_bits(out, words, pos, pos + size) == 0:
                state[i] |= ASCII
            if _zero_bytes(out, words, pos, pos + min(size, sniff)) != 0:
                state[i] |= NUL
            bom = size >= 3 and out[pos] == 0xEF and out[pos + 1] == 0xBB and out[pos + 2] == 0xBF
            if not state[i] & ASCII and not bom and _strict_utf8(out, pos, pos + size):
                state[i] |= UTF8
            pos += size
        starts[sizes.shape[0]] = pos


def read_files(
    paths: list[str], sizes: np.ndarray, flags: int, sniff: int, out: np.ndarray | None = None, recheck: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Read each file of ``paths`` (opened with ``flags``) that has ``sizes[i]`` bytes: (buffer,
    starts, state). File i's bytes are ``buffer[starts[i]:starts[i + 1]]``, empty where its
    state is :data:`AGAIN`; its state has :data:`READ`, and :data:`ASCII`, :data:`UTF8` and
    :data:`NUL` as its bytes are. ``sizes`` are the walk's; each must be less than 16 MiB. ``out`` (uint8, at
    least ``sizes.sum() + 1`` long) is the buffer to read into, if the caller keeps one.

    ``recheck`` False: no ``statx`` after the read (a file that changed while it was read is
    READ all the same): for a caller that compares the bytes read with their indexed digest,
    which decides whatever the file did (verification, :func:`simdoc.corpus.plain.read_again_into`;
    one system call fewer of five a file: 44,000 at c100k's verification)."""
    sizes = np.ascontiguousarray(sizes, dtype=np.int64)
    joined = "\0".join(paths)  # encoded once, not a path at a time (the encoding maps each character alone)
    if joined.count("\0") != max(len(paths) - 1, 0):
        raise ValueError("a path holds a NUL character")  # (it would end that path early, and shift the rest)
    blob = np.frombuffer(joined.encode(sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()) + b"\0", dtype=np.uint8)
    need = int(sizes.sum()) + 1
    out = np.empty(need, dtype=np.uint8) if out is None or len(out) < need else out
    starts = np.empty(len(paths) + 1, dtype=np.int64)
    state = np.empty(len(paths), dtype=np.uint8)
    if paths:
        _read_files(blob, sizes, flags, sniff, out, starts, state, np.zeros(32, dtype=np.uint64), np.zeros(1, dtype=np.uint8), bool(recheck))
    else:
        starts[0] = 0
    return out, starts, state

