"""A zstd file cut short, told from a whole one.

zstandard's stream reader ends quietly where its input ends, inside a frame
or not: a ``.zst`` file cut short read as a shorter text (a JSON Lines
file's lines up to the cut, a plain file's first part as its whole text),
where a cut ``.gz``, ``.bz2`` or ``.xz`` file raises EOFError and is skipped
with a warning. :class:`ZstdReader` follows the frames' own lengths (RFC 8878
§3.1: frame headers, block headers, checksums, skippable frames) over the
raw bytes as the reader takes them, without decompressing anything again,
and raises that EOFError when the data ends inside a frame.
"""

from __future__ import annotations

_FRAME_MAGIC = 0xFD2FB528
_SKIPPABLE = range(0x184D2A50, 0x184D2A60)
_DICT_ID_BYTES = (0, 1, 2, 4)
_CONTENT_SIZE_BYTES = (0, 2, 4, 8)  # by Frame_Content_Size_flag (flag 0: 1 byte when Single_Segment)
CUT = "Compressed file ended before the end-of-stream marker was reached"  # as gzip, bz2 and lzma say it


class FrameWalk:
    """Where the frames of a zstd stream end, followed over its raw bytes (:meth:`feed`)."""

    def __init__(self) -> None:
        self.state = "magic"  # magic | skippable | descriptor | block | other (not zstd: the decoder says so)
        self.head = b""  # bytes of the header being read
        self.skip = 0  # bytes to pass before the next header (a block, a checksum, a skippable frame)
        self.checksum = False  # the current frame ends in a 4-byte checksum

    def _want(self) -> int:
        return {"magic": 4, "skippable": 4, "descriptor": 1, "block": 3}[self.state]

    def feed(self, data: bytes) -> None:
        i, n = 0, len(data)
        while i < n and self.state != "other":
            if self.skip:
                step = min(self.skip, n - i)
                self.skip -= step
                i += step
                continue
            take = min(self._want() - len(self.head), n - i)
            self.head += data[i : i + take]
            i += take
            if len(self.head) == self._want():
                head, self.head = self.head, b""
                self._header(int.from_bytes(head, "little"))

    def _header(self, value: int) -> None:
        if self.state == "magic":
            self.state = "descriptor" if value == _FRAME_MAGIC else "skippable" if value in _SKIPPABLE else "other"
        elif self.state == "skippable":
            self.skip, self.state = value, "magic"
        elif self.state == "descriptor":
            single = (value >> 5) & 1
            size_flag = value >> 6
            self.checksum = bool((value >> 2) & 1)
            size_bytes = _CONTENT_SIZE_BYTES[size_flag] or single
            self.skip = (0 if single else 1) + _DICT_ID_BYTES[value & 3] + size_bytes
            self.state = "block"
        else:  # a block header: Last_Block, Block_Type, Block_Size
            kind, size = (value >> 1) & 3, value >> 3
            if kind == 3:  # reserved: no zstd data (the decoder raises)
                self.state = "other"
                return
            self.skip = 1 if kind == 1 else size  # an RLE block stores its one byte
            if value & 1:
                self.skip += 4 if self.checksum else 0
                self.state = "magic"

    def whole(self) -> bool:
        """Whether the bytes fed end between two frames (or are no zstd data the walk can follow)."""
        return self.state == "other" or (self.state == "magic" and not self.head and not self.skip)


class _Source:
    """The raw file, each byte read from it shown to the walk."""

    def __init__(self, fileobj, walk: FrameWalk) -> None:
        self.fileobj = fileobj
        self.walk = walk

    def read(self, n: int = -1) -> bytes:
        chunk = self.fileobj.read(n)
        self.walk.feed(chunk)
        return chunk

    def close(self) -> None:
        self.fileobj.close()


class ZstdReader:
    """zstandard's stream reader (read across frames, as ``zstd -d`` does), raising EOFError at the
    end of data cut inside a frame."""

    def __init__(self, fileobj) -> None:
        import zstandard

        self.walk = FrameWalk()
        self.source = _Source(fileobj, self.walk)
        self.reader = zstandard.ZstdDecompressor().stream_reader(self.source)

    def read(self, n: int = -1) -> bytes:
        chunk = self.reader.read(n)
        if not chunk and n != 0:
            # The decoder may stop before the file's end (trailing bytes it never asked for):
            # the walk judges the file's bytes, all of them.
            while self.source.read(1 << 16):
                pass
            if not self.walk.whole():
                raise EOFError(CUT)
        return chunk

    def close(self) -> None:
        self.reader.close()
