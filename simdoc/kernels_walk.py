"""A folder's entries stat-ed in a compiled loop (numba calling the C library's ``statx``).

:func:`simdoc.corpus.folders.lstat_names` stats each name of a folder with
``os.lstat`` relative to the folder's descriptor: a system call, and an
``os.stat_result`` of some twenty Python objects made and read again, a file.
:func:`stat_names` makes the same system call in a loop that writes the row
the walk keeps straight into an int64 array: the kernel's ~1.5 us a file
stays, the Python around it (~1.5 us) goes. Only a walk of many files uses
it (:data:`simdoc.corpus.folders.COMPILED_AFTER`): numba's import costs more
than it saves on a walk of 10^5 files that signs nothing.

``struct statx`` has one layout on every Linux architecture (read here as
little-endian words); ``st_dev`` is glibc's ``makedev(major, minor)``, as
``os.lstat`` gives it. An entry whose ``statx`` fails, or does not fill a
field the row needs, is marked (mode -1) and stat-ed again by ``os.lstat``,
which says why (tests/test_walk_columns.py compares both on random trees).
"""

from __future__ import annotations

import sys

import numpy as np

from simdoc.jit import CACHE, ENABLED

AT_SYMLINK_NOFOLLOW = 0x100
# STATX_TYPE | STATX_MODE | STATX_MTIME | STATX_CTIME | STATX_INO | STATX_SIZE: what a row needs.
NEEDED = 0x1 | 0x2 | 0x40 | 0x80 | 0x100 | 0x200
FAILED = -1  # the mode of an entry stat_names could not stat

# The compiled loop: Linux (statx, glibc 2.28 or later, resolved when first called), little-endian.
AVAILABLE = ENABLED and sys.platform.startswith("linux") and sys.byteorder == "little"

if AVAILABLE:
    from llvmlite import ir
    from numba import njit, types
    from numba.core import cgutils
    from numba.extending import intrinsic

    @intrinsic
    def _statx(typingctx, dirfd, path, flags, mask, buf):
        """``statx(dirfd, path, flags, mask, buf)``, the C library's, by its name (so the
        compiled code can be cached: a ctypes pointer cannot)."""
        sig = types.int32(types.int32, types.uintp, types.int32, types.uint32, types.uintp)

        def codegen(context, builder, signature, args):
            i8p = ir.IntType(8).as_pointer()
            fnty = ir.FunctionType(ir.IntType(32), [ir.IntType(32), i8p, ir.IntType(32), ir.IntType(32), i8p])
            fn = cgutils.get_or_insert_function(builder.module, fnty, "statx")
            dirfd_, path_, flags_, mask_, buf_ = args
            return builder.call(fn, [dirfd_, builder.inttoptr(path_, i8p), flags_, mask_, builder.inttoptr(buf_, i8p)])

        return sig, codegen

    @njit(cache=CACHE, nogil=True)
    def _stat_names(fd, names, out, buf):
        b32 = buf.view(np.uint32)
        at = 0
        failed = 0
        for i in range(out.shape[0]):
            r = _statx(np.int32(fd), names.ctypes.data + at, np.int32(AT_SYMLINK_NOFOLLOW), np.uint32(NEEDED), buf.ctypes.data)
            while names[at] != 0:
                at += 1
            at += 1
            if r != 0 or (b32[0] & NEEDED) != NEEDED:
                out[i, 5] = FAILED
                failed += 1
                continue
            # struct statx: stx_mask u32 @0, stx_mode u16 @28, stx_ino u64 @32, stx_size u64 @40,
            # stx_ctime @96 and stx_mtime @112 (i64 seconds, u32 nanoseconds), stx_dev_major/minor u32 @136/@140.
            out[i, 0] = np.int64(buf[5])
            out[i, 1] = np.int64(buf[14]) * 1_000_000_000 + np.int64(b32[30])
            out[i, 2] = np.int64(buf[12]) * 1_000_000_000 + np.int64(b32[26])
            out[i, 3] = np.int64(buf[4])
            major, minor = np.uint64(b32[34]), np.uint64(b32[35])
            dev = ((major & np.uint64(0xFFFFF000)) << np.uint64(32)) | ((major & np.uint64(0xFFF)) << np.uint64(8))
            dev |= ((minor & np.uint64(0xFFFFFF00)) << np.uint64(12)) | (minor & np.uint64(0xFF))
            out[i, 4] = np.int64(dev)
            out[i, 5] = np.int64(b32[7] & 0xFFFF)
        return failed


def stat_names(fd: int, names: list[str]) -> tuple[np.ndarray, int]:
    """The rows (:data:`simdoc.corpus.folders.FIELDS`) of ``names`` stat-ed relative to the folder
    ``fd`` without following links, and how many failed (mode :data:`FAILED`: stat them again).

    ``names`` are str as ``os.listdir`` gives them (UTF-8, undecodable bytes as surrogates)."""
    blob = np.frombuffer(("\0".join(names) + "\0").encode("utf-8", "surrogateescape"), dtype=np.uint8)
    out = np.empty((len(names), 6), dtype=np.int64)
    failed = _stat_names(fd, blob, out, np.zeros(32, dtype=np.uint64)) if names else 0
    return out, int(failed)
