"""store.npyfiles: CRC-32 maths of the checked .npy files."""

import random


def test_crc32_combine_matches_zlib():
    import zlib

    from simdoc.store.npyfiles import crc32_combine

    rng = random.Random(3)
    for la, lb in [(0, 5), (7, 0), (1, 1), (1000, 12345), (3, 1 << 20), (rng.randrange(10**5), rng.randrange(10**6))]:
        a, b = rng.randbytes(la), rng.randbytes(lb)
        assert crc32_combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)


def test_fast_crc32_is_zlibs():
    # Indexes record zlib's CRC-32; the SIMD one that computes them must agree, chained too.
    import zlib

    import numpy as np

    from simdoc.store.npyfiles import crc32

    rng = random.Random(5)
    for n in (0, 1, 15, 16, 17, 63, 64, 65, 4095, 1 << 20, rng.randrange(10**6)):
        data = rng.randbytes(n)
        assert crc32(data) == zlib.crc32(data)
        cut = rng.randrange(n + 1)
        assert crc32(data[cut:], crc32(data[:cut])) == zlib.crc32(data)
        arr = np.frombuffer(data[: n - n % 4], dtype=np.uint32)  # as the workers pass arrays
        assert crc32(arr.data) == zlib.crc32(arr.tobytes())


def test_an_array_written_in_pieces_by_others_is_the_array_saved_whole(tmp_path):
    """PieceWriter: pieces written in any order, some through the path as a worker does, give
    the file and CRC-32 that writing the array at once gives; it loads as a checked array."""
    import numpy as np
    import pytest

    from simdoc.store.directory import IndexStore
    from simdoc.store.npyfiles import PieceWriter, write_piece

    rng = np.random.default_rng(8)
    arr = rng.integers(0, 2**32, size=(37, 5), dtype=np.uint32)
    store = IndexStore(tmp_path / "idx")
    whole = store.save_array("signatures.0000000000000000.npy", arr)
    writer = PieceWriter(store.path, "signatures.1111111111111111.npy", np.uint32, arr.shape)
    flat = arr.reshape(-1)
    cuts = [0, 5, 6, 60, 100, 185]
    pieces = list(zip(cuts[:-1], cuts[1:]))
    rng.shuffle(pieces)
    for i, (a, b) in enumerate(pieces):
        if i % 2:
            writer.write(a, flat[a:b])
        else:
            writer.written(a, b - a, write_piece(str(writer.tmp), a, flat[a:b]))
    info = writer.finish()
    assert info == whole
    assert (store.path / "signatures.1111111111111111.npy").read_bytes() == (store.path / "signatures.0000000000000000.npy").read_bytes()
    assert np.array_equal(store.load_array("signatures.1111111111111111.npy", info, force=True), arr)

    for missing in ([(0, 5), (6, 185)], [(0, 100), (90, 185)]):  # a hole, an overlap
        writer = PieceWriter(store.path, "signatures.2222222222222222.npy", np.uint32, arr.shape)
        for a, b in missing:
            writer.write(a, flat[a:b])
        with pytest.raises(RuntimeError, match="pieces cover"):
            writer.finish()
        writer.abort()
        assert not writer.tmp.exists() and not (store.path / "signatures.2222222222222222.npy").exists()


def test_a_files_crc32_is_zlibs_of_its_bytes_past_the_offset_at_any_chunk(tmp_path, monkeypatch):
    import zlib

    import simdoc.store.npyfiles as npyfiles

    rng = random.Random(7)
    for size, chunk, offset in [(0, 4, 0), (5, 4, 0), (8, 4, 3), (9, 4, 9), (100, 7, 13), (1 << 16, 1000, 128), (12345, 1 << 20, 0)]:
        data = rng.randbytes(size)
        path = tmp_path / f"f{size}-{chunk}-{offset}"
        path.write_bytes(data)
        monkeypatch.setattr(npyfiles, "_CRC_CHUNK", chunk)
        assert npyfiles.crc32_file(path, offset) == zlib.crc32(data[offset:])


def test_a_file_is_checked_through_one_buffer_not_a_new_chunk_each_read(tmp_path, monkeypatch):
    # A new chunk a read is fresh memory the kernel maps and zeroes first: ~0.03 CPU-s of every run
    # that loads an index of 10^5 documents (issue 29). The same buffer is read into, over and over.
    import simdoc.store.npyfiles as npyfiles

    path = tmp_path / "f"
    path.write_bytes(random.Random(1).randbytes(10_000))
    monkeypatch.setattr(npyfiles, "_CRC_CHUNK", 1000)
    real, buffers = npyfiles.crc32, []

    def noted(data, crc=0):
        buffers.append(data.obj if isinstance(data, memoryview) else data)  # held: no id is reused
        return real(data, crc)

    monkeypatch.setattr(npyfiles, "crc32", noted)
    npyfiles.crc32_file(path)
    assert len(buffers) == 10 and all(b is buffers[0] for b in buffers)


def test_a_streamed_array_asks_for_writeback_every_so_many_bytes_and_is_the_same_array(tmp_path, monkeypatch):
    import numpy as np

    from simdoc.store import npyfiles

    hints = []
    real = npyfiles.start_writeback
    monkeypatch.setattr(npyfiles, "WRITEBACK_BYTES", 1000)
    monkeypatch.setattr(npyfiles, "start_writeback", lambda fd: hints.append(fd) or real(fd))  # the real call too: it must not fail
    rows = np.arange(3000, dtype=np.uint32).reshape(-1, 10)  # 12,000 bytes
    writer = npyfiles.NpyWriter(tmp_path, "a.npy", np.uint32, (10,))
    for a in range(0, 300, 7):
        writer.append(rows[a : a + 7])  # 280 bytes a time: a hint after every fourth append
    writer.finish()
    assert len(hints) == 12000 // 1120
    assert np.load(tmp_path / "a.npy").tolist() == rows.tolist()
    pieces = npyfiles.PieceWriter(tmp_path, "b.npy", np.uint32, rows.shape)
    for a in range(0, 3000, 500):
        pieces.write(a, rows.reshape(-1)[a : a + 500])  # 2,000 bytes a piece: a hint each
    pieces.finish()
    assert len(hints) == 12000 // 1120 + 6
    assert np.load(tmp_path / "b.npy").tolist() == rows.tolist()
