"""A damaged single-stream .warc.gz (`gzip crawl.warc`: one gzip member for the whole crawl) keeps
every record that ends before the damage. zlib raises in the middle of a feed of compressed
bytes; what that feed had decompressed before the damage was lost with it, up to ~32 KiB of
compressed records, while the warning said "the records before it are indexed"."""

from __future__ import annotations

import gzip
import itertools
import random
import zlib

import pytest
from click.testing import CliRunner
from test_warc_crawls import record

from simdoc.cli import cli
from simdoc.corpus import rawstream
from simdoc.store.loaded import open_index


def _good_prefix(data: bytes) -> tuple[int, int]:
    """(bytes zlib decompresses before it finds the damage, where in ``data`` it finds it)."""
    dec, out = zlib.decompressobj(31), 0
    for at in range(len(data)):  # a byte at a time: exactly up to the damage
        try:
            out += len(dec.decompress(data[at : at + 1]))
        except zlib.error:
            return out, at
    return out, len(data)


def _damaged(data: bytes) -> tuple[bytes, int, int]:
    """``data`` with 64 bytes overwritten where zlib finds the damage at once (most damage is
    only found by the CRC at the end), and _good_prefix of it."""
    for fraction in (0.5, 0.55, 0.6, 0.45, 0.65, 0.4, 0.7):
        for fill in (b"\xff", b"\x00", b"\xaa"):
            out = bytearray(data)
            at = int(len(out) * fraction)
            out[at : at + 64] = fill * 64
            good, where = _good_prefix(bytes(out))
            if where < len(out) - 8:
                return bytes(out), good, where
    raise AssertionError("no damage found mid-stream")


def test_every_record_before_the_damage_is_indexed_and_the_warning_says_where(tmp_path, monkeypatch):
    # A member counts as large past 64 KiB here (1 MiB in use): a small corpus, which the numpy
    # reference signs, no kernel compiled for it.
    monkeypatch.setattr(rawstream, "SALVAGE_AFTER", 1 << 16)
    rng = random.Random(7)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9))) for _ in range(5000)]
    records = [record(f"http://e.org/{i}", " ".join(rng.choice(words) for _ in range(100)), i + 1) for i in range(500)]
    data, good, where = _damaged(gzip.compress(b"".join(records), mtime=0))
    assert good > 1 << 17  # the damage is past the first 128 KiB of records
    ends = itertools.accumulate(map(len, records))
    whole = sum(1 for e in ends if e <= good)
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "crawl.warc.gz").write_bytes(data)
    r = CliRunner().invoke(cli, ["pairs", str(tmp_path / "c"), "--index", str(tmp_path / "i"), "-j", "1"])
    assert r.exit_code == 0, r.stderr
    assert len(open_index(tmp_path / "i").docs()) == whole
    assert f"damaged gzip data near byte {where}:" in r.stderr
    assert f"record {whole + 1} (http://e.org/{whole})" in r.stderr  # the one the damage cuts: broken, listed


@pytest.mark.parametrize("damaged", [3, 5], ids=["a-middle-member", "the-last-member"])
def test_records_lost_to_a_crc_failure_are_listed_by_stats_skipped_on_every_run(tmp_path, damaged):
    # One gzip member per record, a byte of one member flipped: zlib finds it only by the
    # member's CRC. The records lost were only in that run's warning (which -q, the crontab's
    # way, hides): stats --skipped named none of them, so a night's log said nothing of them.
    # A middle member is skipped alone (reading goes on at the next member); after the last
    # there is none, and the reading of the file stops there.
    members = [gzip.compress(record(f"http://e.org/{i}", f"page {i} " + "text of a page " * 40, i + 1), mtime=0) for i in range(6)]
    data = bytearray(b"".join(members))
    data[sum(map(len, members[:damaged])) + len(members[damaged]) // 2] ^= 0xFF
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "crawl.warc.gz").write_bytes(bytes(data))
    (tmp_path / "c" / "other.txt").write_text("something else entirely, about lighthouses and their keepers")
    args = ["pairs", str(tmp_path / "c"), "--index", str(tmp_path / "i"), "-j", "1", "-q"]
    for run in range(2):
        if run:
            (tmp_path / "c" / "other.txt").write_text("something else again, about harbours")
        r = CliRunner().invoke(cli, args)
        assert r.exit_code == 0, r.stderr
        assert len(open_index(tmp_path / "i").docs()) == 5 + 1
        s = CliRunner().invoke(cli, ["stats", "--index", str(tmp_path / "i"), "--skipped"])
        lost = [line for line in s.stdout.splitlines() if line.startswith("crawl.warc.gz/#@")]
        assert len(lost) == 1, s.stdout
        if damaged == 5:
            assert "incorrect data check; the records from here on are not read" in lost[0]
        else:
            at = sum(map(len, members[:damaged]))
            assert lost[0].startswith(f"crawl.warc.gz/#@{at}\tgzip member at byte {at:,}: damaged gzip data") and "incorrect data check; skipped" in lost[0]
