"""A damaged gzip member of a crawl written one member per record costs that record, not every
record after it: reading goes on at the next member that starts a record
(:class:`simdoc.corpus.rawstream.Gunzip`), and the member passed over is listed
(``simdoc stats --skipped``). Reading used to end at the first damaged member."""

from __future__ import annotations

import gzip
import random
import zlib

from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_warc_crawls import record

from simdoc.cli import cli
from simdoc.corpus.warc import read_warc


def _body(i: int, big: bool) -> str:
    rng = random.Random(i)
    # A big one is several zlib feeds of 32 KiB compressed: part of it comes out before the damage.
    return " ".join("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(7)) for _ in range(12_000 if big else 60))


def _decodes_to(member: bytes, plain: bytes) -> bool:
    dec = zlib.decompressobj(31)
    try:
        return dec.decompress(member) == plain and dec.eof and not dec.unused_data
    except zlib.error:
        return False


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    n=st.integers(2, 8),
    big=st.sets(st.integers(0, 7), max_size=3),
    victim=st.integers(0, 7),
    where=st.floats(0, 1),
    width=st.integers(1, 8),
    flip=st.integers(1, 255),
)
def test_only_the_damaged_members_record_is_lost_and_it_is_listed(tmp_path, n, big, victim, where, width, flip):
    victim %= n
    plains = [record(f"http://e.org/{i}", _body(i, i in big), i + 1) for i in range(n)]
    parts = [gzip.compress(p, mtime=0) for p in plains]
    hit = bytearray(parts[victim])
    at = int(where * (len(hit) - 1))
    for j in range(at, min(at + width, len(hit))):
        hit[j] ^= flip
    parts[victim] = bytes(hit)
    path = tmp_path / "w.warc.gz"
    path.write_bytes(b"".join(parts))
    got = read_warc(str(path), "w.warc.gz")
    whole = [i for i in range(n) if _decodes_to(parts[i], plains[i])]
    assert [d[0] for d in got.docs] == sorted(f"w.warc.gz/#http://e.org/{i}" for i in whole)
    if victim not in whole:  # its record is listed (broken, or inside the member skipped) ...
        member = sum(map(len, parts[:victim]))
        listed = [k for k, _ in got.left_out]
        # ... or, the last member, where reading ends is said
        last = victim == n - 1 and any(w.endswith("the records before it are indexed") for w in got.warnings)
        assert f"w.warc.gz/#http://e.org/{victim}" in listed or f"w.warc.gz/#@{member}" in listed or last


def test_stats_lists_the_member_skipped_and_the_records_after_it_are_indexed(tmp_path):
    c = tmp_path / "c"
    c.mkdir()
    parts = [gzip.compress(record(f"http://e.org/{i}", _body(i, False), i + 1), mtime=0) for i in range(5)]
    hit = bytearray(parts[1])
    hit[-6] ^= 0xFF  # its CRC
    parts[1] = bytes(hit)
    (c / "w.warc.gz").write_bytes(b"".join(parts))
    r = CliRunner().invoke(cli, ["pairs", str(c), "--index", str(tmp_path / "i"), "-j", "1"])
    assert r.exit_code == 0, r.stderr
    assert f"the gzip member at byte {len(parts[0]):,} is skipped with its records, reading on at byte {len(parts[0]) + len(parts[1]):,}" in r.stderr
    assert "4 documents" in r.stderr
    r = CliRunner().invoke(cli, ["stats", "--index", str(tmp_path / "i"), "--skipped"])
    assert r.exit_code == 0, r.stderr
    assert r.stdout.startswith(f"w.warc.gz/#@{len(parts[0])}\tgzip member at byte {len(parts[0]):,}: damaged gzip data")
