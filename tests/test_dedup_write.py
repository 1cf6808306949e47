"""`simdoc dedup CORPUS --write DIR` (issue 30 item 8): the deduplicated corpus in its own formats."""

from __future__ import annotations

import gzip
import json
import os

import pytest
from click.testing import CliRunner

import simdoc
from simdoc.cli import cli
from conftest import numbered_page as page

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")




def record(uri: str, body: str, rid: int, kind: str = "response") -> bytes:
    block = (f"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n{body}" if kind == "response" else body).encode()
    ctype = "application/http; msgtype=response" if kind == "response" else "application/warc-fields"
    head = (
        f"WARC/1.0\r\nWARC-Type: {kind}\r\nWARC-Record-ID: <urn:uuid:00000000-0000-0000-0000-{rid:012d}>\r\n"
        + (f"WARC-Target-URI: {uri}\r\n" if uri else "")
        + f"WARC-Date: 2024-01-01T00:00:00Z\r\nContent-Type: {ctype}\r\nContent-Length: {len(block)}\r\n\r\n"
    ).encode()
    return head + block + b"\r\n\r\n"


THRESHOLD = 0.5


def expected_drops(texts: dict[str, str]) -> set[str]:
    """The documents `dedup --keep first` drops, from the exact Jaccards computed here."""
    ids = sorted(texts)
    sets = simdoc.shingle_texts([texts[i] for i in ids])
    parent = list(range(len(ids)))

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    for i in range(len(ids)):
        for j in range(i + 1, len(ids)):
            if simdoc.jaccard(sets.row(i), sets.row(j)) >= THRESHOLD:
                parent[max(root(i), root(j))] = min(root(i), root(j))
    groups: dict[int, list[str]] = {}
    for i, doc in enumerate(ids):
        groups.setdefault(root(i), []).append(doc)
    return {doc for members in groups.values() for doc in members[1:]}


def mixed(tmp_path):
    """A corpus of plain files, a .jsonl.gz, a Parquet file and two WARC files; the texts of its documents."""
    c = tmp_path / "c"
    (c / "sub").mkdir(parents=True)
    texts: dict[str, str] = {}
    (c / "a.txt").write_text(page(0))
    (c / "sub" / "z.txt").write_text(page(5))
    texts.update({"a.txt": page(0), "sub/z.txt": page(5)})
    lines = [json.dumps({"text": page(0, 1), "id": "j1"}), "not json", json.dumps({"text": page(6), "id": "j3", "extra": [1]}), ""]
    (c / "data.jsonl.gz").write_bytes(gzip.compress("\n".join(lines).encode()))
    texts.update({"data.jsonl.gz/#j1": page(0, 1), "data.jsonl.gz/#j3": page(6)})
    table = pa.table({"text": pa.array([page(0, 2), page(7), None, page(6, 1)]), "id": pa.array(["p1", "p2", "p3", "p4"]),
                      "lang": pa.array(["en", "fr", "de", "en"])})
    pq.write_table(table, c / "data.parquet", row_group_size=2)
    texts.update({"data.parquet/#p1": page(0, 2), "data.parquet/#p2": page(7), "data.parquet/#p4": page(6, 1)})
    records = [record("", "software: test\r\n", 1, "warcinfo"), record("http://e.org/0", page(0, 3), 2),
               record("http://e.org/5", page(5, 1), 3), record("http://e.org/8", page(8), 4)]
    members = [gzip.compress(r) for r in records]  # one gzip member per record, as crawlers write
    (c / "crawl.warc.gz").write_bytes(b"".join(members))
    texts.update({"crawl.warc.gz/#http://e.org/0": page(0, 3), "crawl.warc.gz/#http://e.org/5": page(5, 1),
                  "crawl.warc.gz/#http://e.org/8": page(8)})
    single = [record("http://f.org/5", page(5, 2), 5), record("http://f.org/9", page(9), 6)]
    (c / "single.warc.gz").write_bytes(gzip.compress(b"".join(single)))  # one gzip member for the whole file
    texts.update({"single.warc.gz/#http://f.org/5": page(5, 2), "single.warc.gz/#http://f.org/9": page(9)})
    return c, texts, lines, table, records, members, single


def dedup(*args):
    return CliRunner().invoke(cli, ["dedup", *map(str, args), "--threshold", str(THRESHOLD), "-j", "1"])


def test_a_mixed_corpus_is_written_without_exactly_the_documents_dedup_lists(tmp_path):
    c, texts, lines, table, records, members, single = mixed(tmp_path)
    drops = expected_drops(texts)
    assert drops == {"data.jsonl.gz/#j1", "data.parquet/#p1", "crawl.warc.gz/#http://e.org/0", "data.parquet/#p4",
                     "single.warc.gz/#http://f.org/5", "sub/z.txt"}  # the texts make these clusters
    before = {p: p.read_bytes() for p in c.rglob("*") if p.is_file()}
    r = dedup(c, "--index", tmp_path / "i", "--write", tmp_path / "out", "--id-field", "id")
    assert r.exit_code == 0, (r.stderr, r.exception)
    assert set(r.stdout.splitlines()) == drops
    assert {p: p.read_bytes() for p in c.rglob("*") if p.is_file()} == before  # the corpus untouched
    out = tmp_path / "out"
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        "a.txt", "crawl.warc.gz", "data.jsonl.gz", "data.parquet", "single.warc.gz"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary folder left
    # Byte for byte what stays.
    assert (out / "a.txt").read_bytes() == before[c / "a.txt"]
    assert gzip.decompress((out / "data.jsonl.gz").read_bytes()) == "\n".join(lines[1:]).encode()
    assert (out / "crawl.warc.gz").read_bytes() == members[0] + members[2] + members[3]  # members copied as they are
    assert gzip.decompress((out / "single.warc.gz").read_bytes()) == single[1]
    got = pq.read_table(out / "data.parquet")
    assert got.schema == table.schema and got.to_pylist() == [table.to_pylist()[i] for i in (1, 2)]
    # The documents of DIR are the corpus's minus the dedup list (named by their id fields: line
    # and row numbers would count again in the files written).
    r = CliRunner().invoke(cli, ["pairs", str(out), "--index", str(tmp_path / "i2"), "-j", "1", "--id-field", "id"])
    assert r.exit_code == 0, r.stderr
    from simdoc.store.loaded import open_index

    assert set(open_index(tmp_path / "i2").docs().ids) == set(texts) - drops
    assert set(open_index(tmp_path / "i").docs().ids) == set(texts)


def test_link_hard_links_the_plain_files_that_stay(tmp_path):
    c, *_ = mixed(tmp_path)
    r = dedup(c, "--index", tmp_path / "i", "--write", tmp_path / "out", "--link")
    assert r.exit_code == 0, r.stderr
    assert os.path.samefile(tmp_path / "out" / "a.txt", c / "a.txt")
    assert not os.path.samefile(tmp_path / "out" / "data.jsonl.gz", c / "data.jsonl.gz")


def test_a_folder_that_is_not_empty_or_inside_the_corpus_is_refused(tmp_path):
    c, *_ = mixed(tmp_path)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    r = dedup(c, "--index", tmp_path / "i", "--write", tmp_path / "full")
    assert r.exit_code == 2 and "not empty" in r.stderr and not (tmp_path / "i").exists(), r.stderr
    r = dedup(c, "--index", tmp_path / "i", "--write", c / "out")
    assert r.exit_code == 2 and "inside the corpus" in r.stderr and not (c / "out").exists(), r.stderr
    (tmp_path / "empty").mkdir()
    r = dedup(c, "--index", tmp_path / "i", "--write", tmp_path / "empty")
    assert r.exit_code == 0 and (tmp_path / "empty" / "a.txt").exists(), r.stderr


def test_a_file_changed_since_it_was_indexed_stops_the_writing(tmp_path):
    c, *_ = mixed(tmp_path)
    r = CliRunner().invoke(cli, ["pairs", str(c), "--index", str(tmp_path / "i"), "--threshold", str(THRESHOLD), "-j", "1"])
    assert r.exit_code == 0, r.stderr
    from simdoc.reports.write import write_corpus
    from simdoc.stages.reread import reader_of
    from simdoc.store.loaded import open_index

    reader = reader_of(open_index(tmp_path / "i"))
    lines = gzip.decompress((c / "data.jsonl.gz").read_bytes()).replace(b"not json", b"not JSON")
    (c / "data.jsonl.gz").write_bytes(gzip.compress(lines))
    from simdoc.errors import CorpusError

    with pytest.raises(CorpusError, match="data.jsonl.gz: changed or gone since it was indexed"):
        write_corpus(reader, set(), tmp_path / "out")
    assert not (tmp_path / "out").exists() and [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_oldest_indexed_keeps_what_the_index_held_first(tmp_path):
    c = tmp_path / "c"
    c.mkdir()
    (c / "b.txt").write_text(page(0))
    (c / "x.txt").write_text(page(3))
    assert dedup(c, "--index", tmp_path / "i").exit_code == 0
    (c / "a.txt").write_text(page(0, 1))  # new data, a near-duplicate with a smaller id
    (c / "y.txt").write_text(page(3, 1))
    assert simdoc.jaccard(*(lambda s: (s.row(0), s.row(1)))(simdoc.shingle_texts([page(0), page(0, 1)]))) >= THRESHOLD
    first = dedup(c, "--index", tmp_path / "i")
    assert first.exit_code == 0 and first.stdout.splitlines() == ["b.txt", "y.txt"], first.stderr
    old = dedup(c, "--index", tmp_path / "i", "--keep", "oldest-indexed", "--write", tmp_path / "out")
    assert old.exit_code == 0 and old.stdout.splitlines() == ["a.txt", "y.txt"], old.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["b.txt", "x.txt"]


COMPRESS = {"": lambda b: b, ".gz": gzip.compress, ".xz": __import__("lzma").compress, ".bz2": __import__("bz2").compress}
DECOMPRESS = {"": lambda b: b, ".gz": gzip.decompress, ".xz": __import__("lzma").decompress, ".bz2": __import__("bz2").decompress}


@pytest.mark.parametrize("ext", list(COMPRESS))
def test_json_lines_and_warc_in_each_compression_keep_their_other_lines_and_records(tmp_path, ext):
    c = tmp_path / "c"
    c.mkdir()
    lines = [json.dumps({"text": page(0)}), json.dumps({"text": page(0, 1)}), json.dumps({"text": page(2)})]
    (c / f"d.jsonl{ext}").write_bytes(COMPRESS[ext](("\n".join(lines) + "\n").encode()))
    records = [record("http://e.org/1", page(3), 1), record("http://e.org/2", page(3, 1), 2), record("http://e.org/3", page(4), 3)]
    (c / f"w.warc{ext}").write_bytes(COMPRESS[ext](b"".join(records)))
    r = dedup(c, "--index", tmp_path / "i", "--write", tmp_path / "out")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.splitlines() == [f"d.jsonl{ext}/#2", f"w.warc{ext}/#http://e.org/2"]
    assert DECOMPRESS[ext]((tmp_path / "out" / f"d.jsonl{ext}").read_bytes()) == (lines[0] + "\n" + lines[2] + "\n").encode()
    assert DECOMPRESS[ext]((tmp_path / "out" / f"w.warc{ext}").read_bytes()) == records[0] + records[2]


def test_link_needs_write(tmp_path):
    c, *_ = mixed(tmp_path)
    r = dedup(c, "--index", tmp_path / "i", "--link")
    assert r.exit_code == 2 and "--link needs --write" in r.stderr, r.stderr


def test_the_library_writes_what_dedup_lists(tmp_path):
    c, texts, *_ = mixed(tmp_path)
    plan = simdoc.dedup(str(c), index=str(tmp_path / "i"), threshold=THRESHOLD, id_field="id")
    got = plan.write(tmp_path / "out")
    assert (got.files, got.documents, got.dropped) == (5, len(texts) - len(plan.paths()), len(plan.paths()))
    assert set(plan.paths()) == expected_drops(texts)


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200), st.lists(st.tuples(st.integers(0, 220), st.integers(0, 40)), max_size=6),
       st.lists(st.integers(1, 30), min_size=1, max_size=10))
def test_filter_leaves_out_exactly_the_spans_whatever_the_chunks(data, raw_spans, sizes):
    import hashlib

    from simdoc.reports import write

    spans, last = [], 0  # sorted and apart, as the writer makes them
    for start, n in sorted(raw_spans):
        start = max(start, last)
        spans.append((start, start + n))
        last = start + n
    keep = bytes(b for i, b in enumerate(data) if not any(s <= i < e for s, e in spans))
    pos, out = [0], []

    def read(n: int) -> bytes:  # chunks of random sizes instead of 1 MiB
        size = sizes[len(out) % len(sizes)]
        chunk = data[pos[0] : pos[0] + size]
        pos[0] += len(chunk)
        out.append(None)
        return chunk

    written: list[bytes] = []
    digest = hashlib.blake2b(digest_size=16)
    write._filter(read, written.append, spans, digest)
    assert b"".join(written) == keep
    assert digest.hexdigest() == hashlib.blake2b(data, digest_size=16).hexdigest()


@pytest.mark.parametrize("codec", ["zstd", "none"])
def test_a_parquet_file_keeps_its_schema_metadata_and_compression(tmp_path, codec):
    c = tmp_path / "c"
    c.mkdir()
    table = pa.table({"text": [page(0), page(0, 1), page(2)], "n": pa.array([1, 2, 3], pa.int16())})
    table = table.replace_schema_metadata({"origin": "test"})
    pq.write_table(table, c / "d.parquet", compression=codec, row_group_size=2)
    r = dedup(c, "--index", tmp_path / "i", "--write", tmp_path / "out")
    assert r.exit_code == 0 and r.stdout.splitlines() == ["d.parquet/#2"], r.stderr
    got = pq.ParquetFile(tmp_path / "out" / "d.parquet")
    assert got.schema_arrow == table.schema and got.schema_arrow.metadata[b"origin"] == b"test"
    assert got.read().to_pylist() == [table.to_pylist()[0], table.to_pylist()[2]]
    assert got.metadata.row_group(0).column(0).compression == ("ZSTD" if codec == "zstd" else "UNCOMPRESSED")


@pytest.mark.parametrize("members", [True, False], ids=["gzip-per-record", "gzip-one-stream"])
def test_a_warc_file_cut_short_is_written_with_the_records_before_the_cut(tmp_path, members):
    # A crawl file cut short (a download or a crawler stopped mid-record) is indexed with the
    # records before the cut; --write used to stop with "Aborted!" (exit 1) at the cut.
    c = tmp_path / "c"
    c.mkdir()
    records = [record("http://e.org/1", page(3), 1), record("http://e.org/2", page(3, 1), 2), record("http://e.org/3", page(4), 3),
               record("http://e.org/4", page(5), 4)]
    if members:
        parts = [gzip.compress(r) for r in records]
        data = b"".join(parts)[:-40]  # the last member cut short
    else:
        data = gzip.compress(b"".join(records))[:-40]
    (c / "w.warc.gz").write_bytes(data)
    r = dedup(c, "--index", tmp_path / "i", "--write", tmp_path / "out")
    assert r.exit_code == 0, (r.stderr, r.exception)
    assert r.stdout.splitlines() == ["w.warc.gz/#http://e.org/2"]
    assert "cut short" in r.stderr
    got = (tmp_path / "out" / "w.warc.gz").read_bytes()
    if members:
        assert got == parts[0] + parts[2] + data[len(parts[0]) + len(parts[1]) + len(parts[2]):]  # the cut member as it was
    else:
        kept = gzip.GzipFile(fileobj=__import__("io").BytesIO(got)).read()
        assert kept.startswith(records[0] + records[2]) and records[3].startswith(kept[len(records[0] + records[2]):])
    r = CliRunner().invoke(cli, ["pairs", str(tmp_path / "out"), "--index", str(tmp_path / "i2"), "-j", "1"])
    assert r.exit_code == 0, r.stderr
    from simdoc.store.loaded import open_index

    assert list(open_index(tmp_path / "i2").docs().ids) == ["w.warc.gz/#http://e.org/1", "w.warc.gz/#http://e.org/3"]


def test_the_folder_written_has_the_mode_of_a_new_folder_not_mkdtemps_0700(tmp_path):
    c, *_ = mixed(tmp_path)
    old = os.umask(0o022)
    try:
        r = dedup(c, "--index", tmp_path / "i", "--write", tmp_path / "out", "--id-field", "id")
    finally:
        os.umask(old)
    assert r.exit_code == 0, r.stderr
    assert (tmp_path / "out").stat().st_mode & 0o7777 == 0o755
    (tmp_path / "empty").mkdir(mode=0o750)
    (tmp_path / "empty").chmod(0o750)
    r = dedup(c, "--index", tmp_path / "i", "--write", tmp_path / "empty", "--id-field", "id")
    assert r.exit_code == 0, r.stderr
    assert (tmp_path / "empty").stat().st_mode & 0o7777 == 0o750  # an empty DIR given keeps its mode


def test_a_dropped_record_before_a_damaged_gzip_member_takes_only_its_own_member(tmp_path):
    # A .warc.gz of one member per record whose third member fails its CRC: reading stops there
    # (warned), and the second record, a copy of the first, is dropped. Its range used to run to
    # the next record read, here the end of the file: --write left out the damaged member and the
    # two good records after it, none of them indexed, without a word.
    c = tmp_path / "c"
    c.mkdir()
    texts = [page(3), page(3), page(4), page(5), page(6)]
    parts = [gzip.compress(record(f"http://e.org/{i + 1}", t, i + 1), mtime=0) for i, t in enumerate(texts)]
    damaged = bytearray(parts[2])
    damaged[-6] ^= 0xFF  # its CRC
    parts[2] = bytes(damaged)
    (c / "w.warc.gz").write_bytes(b"".join(parts))
    r = dedup(c, "--index", tmp_path / "i", "--write", tmp_path / "out")
    assert r.exit_code == 0, (r.stderr, r.exception)
    assert r.stdout.splitlines() == ["w.warc.gz/#http://e.org/2"]
    assert "damaged gzip data" in r.stderr
    assert (tmp_path / "out" / "w.warc.gz").read_bytes() == parts[0] + b"".join(parts[2:])


def test_members_end_covers_a_record_written_over_several_members():
    import io
    import random

    from simdoc.corpus.rawstream import members_end

    rng = random.Random(3)
    big = bytes(rng.getrandbits(8) for _ in range(100_000))  # incompressible: several feeds a member
    a, b, c = gzip.compress(b"x" * 10 + big, mtime=0), gzip.compress(b"tail", mtime=0), gzip.compress(b"next", mtime=0)
    f = io.BytesIO(b"pad" + a + b + c)
    assert members_end(f, 3, 10) == 3 + len(a)
    assert members_end(f, 3, len(big) + 11) == 3 + len(a) + len(b)  # the record's last bytes are in the next member
    assert members_end(f, 3, 10**9) == 3 + len(a) + len(b) + len(c)  # the data ends first
    cut = io.BytesIO(b"pad" + a + b[:-3])
    assert members_end(cut, 3, len(big) + 11) == 3 + len(a)  # a member cut short is not the record's
