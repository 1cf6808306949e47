"""A large write of an index array is made by two threads, one half each (simdoc.store.npyfiles):
the file and its CRC-32 are those of one write, and a failure of either half is the write's."""

from __future__ import annotations

import errno
import os
import threading
import zlib
from unittest import mock

import numpy as np
import pytest

from simdoc.store import npyfiles


def test_a_large_append_is_written_by_two_threads_and_reads_back(tmp_path):
    rows = np.random.default_rng(1).integers(0, 2**32, size=(3 * (1 << 15) + 7, 128), dtype=np.uint32)  # ~48 MB
    writers = []
    pwrite = os.pwrite

    def spy(fd, data, pos):
        writers.append((threading.current_thread().name, pos))
        return pwrite(fd, data, pos)

    w = npyfiles.NpyWriter(tmp_path, "signatures.0123456789abcdef.npy", np.uint32, (128,))
    with mock.patch.object(os, "pwrite", spy):
        w.append(rows[:5])  # small: one thread
        w.append(rows[5:])
    info = w.finish()
    assert np.array_equal(np.load(tmp_path / "signatures.0123456789abcdef.npy"), rows)
    assert info["crc32"] == zlib.crc32(rows.tobytes())
    names = {n.split("_")[0] for n, _ in writers}
    assert "simdoc-pwrite" in names and len(names) == 2


@pytest.mark.parametrize("half", ["first", "second"])
def test_no_room_for_either_half_is_the_writes_error(tmp_path, half):
    rows = np.ones((1 << 15, 128), np.uint32)  # 16 MB
    pwrite = os.pwrite

    def full(fd, data, pos):
        helper = threading.current_thread().name.startswith("simdoc-pwrite")
        if helper == (half == "second"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return pwrite(fd, data, pos)

    w = npyfiles.NpyWriter(tmp_path, "signatures.0123456789abcdef.npy", np.uint32, (128,))
    with mock.patch.object(os, "pwrite", full), pytest.raises(OSError) as exc:
        w.append(rows)
    assert exc.value.errno == errno.ENOSPC
    w.abort()
    assert list(tmp_path.iterdir()) == []
