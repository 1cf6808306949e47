"""The update plan made by the join on columns equals the one the per-file loop made (issue 29, item 2).

:func:`loop_plan` is the loop simdoc used before (kept here as the reference):
a dict of each file's rows, then file by file the stat compared as tuples,
:func:`simdoc.stages.racy.racy` asked, ``force_read`` looked up. The histories
are random adds, edits, deletes, renames and touches (also ``touch -d``,
setting the modification time back) on two devices, indexed now and then,
with a clock that moves by less than, and more than, the racy window.
"""

from __future__ import annotations

import random

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simdoc.corpus.objects import UNKNOWN
from simdoc.corpus.walk import Entries, FileEntry, Skipped, discover, is_jsonl, is_warc, walk_key
from simdoc.stages.common import build_id
from simdoc.stages.plan import Listing, Scan, join, reading_plan, scan_id_of
from simdoc.stages.racy import RACY_NS, newest_ctimes, racy
from simdoc.store.doctable import STAT_COLUMNS, DocRow, DocsTable


def loop_plan(entries: list[FileEntry], old: DocsTable, old_newest: dict[int, int], reuse: bool, force_read: set[str]):
    """The reference: (entry, digest indexed, keep without reading) of every file, and its rows."""
    old_rows: dict[str, list[int]] = {}
    for j, (doc_id, src) in enumerate(zip(old.ids, old.sources)):
        old_rows.setdefault(src or doc_id, []).append(j)
    plan = []
    for e in entries:
        rows = old_rows.get(e.id) if reuse else None
        if rows is None:
            plan.append((e, None, False))
            continue
        j = rows[0]
        unchanged = (
            tuple(int(old.columns[c][j]) for c in STAT_COLUMNS) == e.stat() and not racy(e, old_newest)
            and e.id not in force_read and not any(old.ids[r] in force_read for r in rows)
        )
        plan.append((e, None if e.id in force_read else bytes(old.file_digest[j]), unchanged))
    return plan, old_rows


class Disk:
    """Files on two devices, with a clock that stamps their change times (the file system's)."""

    def __init__(self) -> None:
        self.files: dict[str, list] = {}  # id -> [size, mtime, ctime, ino, dev, members]
        self.now = 10**18
        self.next_ino = 100

    def tick(self, ns: int) -> None:
        self.now += ns

    def add(self, name: str, size: int, members: int, dev: int) -> None:
        self.next_ino += 1
        self.files[name] = [size, self.now, self.now, self.next_ino, dev, members]

    def listing(self, url: bool = False) -> list[FileEntry]:
        out = []
        for name in sorted(self.files, key=walk_key):
            size, mtime, ctime, ino, dev, _ = self.files[name]
            path = f"s3://bucket/{name}" if url else f"/corpus/{name}"
            out.append(FileEntry(name, path, size, mtime, ctime, ino, dev))
        return out


def _row(doc_id: str, source: str, st: tuple[int, ...], k: int) -> DocRow:
    digest = k.to_bytes(16, "little")
    return DocRow(doc_id, source, -1, -1, st[0], *st, digest, digest, "whole", "ok", 3, 1, digest)


def index(disk: Disk, rng: random.Random, url: bool = False) -> tuple[DocsTable, dict[int, int]]:
    """The docs table an index of the disk as it is now holds (a few files gave no rows)."""
    rows = []
    for k, e in enumerate(disk.listing(url)):
        members = disk.files[e.id][5]
        if rng.random() < 0.1:
            continue  # skipped (binary), or a JSON Lines file with no records
        if members:
            rows += [_row(f"{e.id}/#{m}", e.id, e.stat(), k) for m in range(members)]
        else:
            rows.append(_row(e.id, "", e.stat(), k))
    # The index's own clock, read before the listing: on one of the two devices, or on neither.
    clock = rng.choice([(0, disk.now), (1, disk.now), None])
    return DocsTable.from_rows(rows), newest_ctimes(disk.listing(url), clock)


OPS = st.sampled_from(
    ["add", "edit", "edit_same_size", "delete", "rename", "touch", "touch_back", "other_inode", "other_device", "tick", "index"]
)


@settings(max_examples=300, deadline=None)
@given(
    ops=st.lists(st.tuples(OPS, st.integers(0, 10**6), st.integers(0, 3 * RACY_NS)), min_size=1, max_size=40),
    seed=st.integers(0, 2**32),
    reuse=st.booleans(),
    shuffle=st.booleans(),
)
def test_the_join_makes_the_plan_the_loop_made(ops, seed, reuse, shuffle):
    rng = random.Random(seed)
    disk = Disk()
    for k in range(rng.randint(1, 8)):
        disk.add(f"d{k % 2}/f{k}.jsonl" if k % 3 == 0 else f"d{k % 2}/f{k}.txt", 10 + k, 2 if k % 3 == 0 else 0, k % 2)
        disk.tick(rng.choice([0, RACY_NS // 2, 3 * RACY_NS]))
    old, old_newest = index(disk, rng)
    for op, pick, dt in ops:
        names = sorted(disk.files)
        name = names[pick % len(names)] if names else None
        f = disk.files.get(name)
        if op == "tick":
            disk.tick(dt)
        elif op == "index":
            old, old_newest = index(disk, rng)
        elif op == "add" or f is None:
            disk.add(f"d{pick % 3}/n{pick}.txt", pick % 50, 0, pick % 2)
        elif op == "delete":
            del disk.files[name]
        elif op == "rename":  # the same inode under another id; its change time is set
            del disk.files[name]
            f[2] = disk.now
            disk.files[f"d{pick % 3}/r{pick}.txt"] = f
        elif op in ("edit", "edit_same_size"):
            f[0] += 0 if op == "edit_same_size" else 1 + pick % 5
            f[1] = f[2] = disk.now
        elif op == "touch":
            f[1] = f[2] = disk.now
        elif op == "other_inode":  # replaced by a file of the same size and times (os.replace)
            disk.next_ino += 1
            f[3] = disk.next_ino
        elif op == "other_device":  # the same stat, but on the other file system
            f[4] = 1 - f[4]
        else:  # touch -d: the modification time set back, a new change time
            f[1] -= 10 * RACY_NS
            f[2] = disk.now
        disk.tick(dt // 7)
    entries = disk.listing()
    if shuffle and len(old):  # the join does not rely on the table's order
        order = np.random.default_rng(seed).permutation(len(old))
        old = DocsTable.from_rows([old.row(int(j)) for j in order])
    ids = [e.id for e in entries] + list(old.ids)
    force_read = {x for x in ids if rng.random() < 0.2} if rng.random() < 0.5 else set()
    expected, old_rows = loop_plan(entries, old, old_newest, reuse, force_read)
    scan = Scan(entries, [], "scan", {}, old, old_newest)
    plan = reading_plan(scan, reuse, force_read)
    assert list(plan) == expected
    assert [x for x in expected if not x[2]] == list(plan.to_read()) == plan.to_read()[:]
    assert [(e.path, e.size) for e, _, keep in expected if not keep] == list(plan.to_read().names())
    for i, e in enumerate(entries):
        assert plan.joined.rows(i).tolist() == old_rows.get(e.id, [])
    assert scan.racy() == [e for e in entries if e.id in old_rows and racy(e, old_newest)]
    runs = list(plan.runs())
    assert [k for a, b, k in runs for _ in range(a, b)] == [x[2] for x in expected]
    # Where an update looks up the ids of the documents it reads: the rows of the files read and of
    # the files gone (a kept file's rows cannot share an id with them), from lists or from blobs.
    listed, read = {e.id for e in entries}, {e.id for e, _, keep in expected if not keep}
    files = [src or doc_id for doc_id, src in zip(old.ids, old.sources)]
    want = {doc_id: j for j, (doc_id, f) in enumerate(zip(old.ids, files)) if f in read or f not in listed}
    assert plan.rows_by_id() == want
    lazy = DocsTable.from_arrays(old.arrays(), "test", lazy=True) if len(old) else old
    assert reading_plan(Scan(entries, [], "scan", {}, lazy, old_newest), reuse, force_read).rows_by_id() == want


@settings(max_examples=50, deadline=None)
@given(etags=st.lists(st.sampled_from([UNKNOWN, 1, 2]), min_size=1, max_size=12), seed=st.integers(0, 2**32))
def test_a_buckets_listing_plans_as_the_loop_did(etags, seed):
    """Objects (dev -2): an ETag tells them unchanged whatever the clocks; one without is read again."""
    rng = random.Random(seed)
    disk = Disk()
    for k, etag in enumerate(etags):
        disk.add(f"o{k}.txt", 10 + k, 0, -2)
        disk.files[f"o{k}.txt"][3] = etag
    old, old_newest = index(disk, rng, url=True)
    for name in list(disk.files):
        if rng.random() < 0.3:
            disk.files[name][3] = rng.choice([UNKNOWN, 1, 2])
    entries = disk.listing(url=True)
    expected, _ = loop_plan(entries, old, old_newest, True, set())
    assert list(reading_plan(Scan(entries, [], "scan", {}, old, old_newest), True, set())) == expected


def test_a_member_id_is_not_taken_for_a_file_listed_under_that_name():
    """a.jsonl became a folder holding "#0": the file a.jsonl/#0 is new, not the old member a.jsonl/#0."""
    old = DocsTable.from_rows([_row("a.jsonl/#0", "a.jsonl", (5, 1, 1, 1, 1), 0), _row("b.txt", "", (5, 1, 1, 2, 1), 1)])
    joined = join(["a.jsonl/#0", "b.txt"], old)
    assert joined.rows(0).tolist() == [] and joined.rows(1).tolist() == [1]
    assert joined.first().tolist() == [-1, 1]


_NAMES = st.text(st.characters(codec="utf-8") | st.sampled_from(["\udcff", '"', "\\", "/", ".", "\n"]), max_size=12)


@settings(max_examples=100, deadline=None)
@given(
    files=st.lists(st.tuples(_NAMES, st.lists(st.integers(-(2**63), 2**63 - 1), min_size=5, max_size=5)), max_size=8),
    skipped=st.lists(st.tuples(_NAMES, _NAMES, st.integers(-1, 2**40), st.integers(-1, 2**62)), max_size=3),
)
def test_the_scan_id_written_from_columns_is_the_one_build_id_gave(files, skipped):
    """Indexes built before keep their scan id: a run with nothing changed stays one."""
    entries = [FileEntry(name, "/c/" + name, *stat) for name, stat in files]
    passed = [Skipped(*s) for s in skipped]
    expected = build_id([[e.id, *e.stat()] for e in entries] + [[s.id, s.reason, s.size, s.mtime_ns] for s in passed])
    assert scan_id_of(Listing.of(entries), passed) == expected


@given(st.lists(st.sampled_from(["a", ".", "jsonl", "ndjson", "warc", "wet", "gz", "zst", "Parquet", "parquet", "/", "txt"])))
def test_walk_key_looks_at_the_last_suffix_first_and_still_gives_the_same_key(parts):
    name = "".join(parts)
    many = is_jsonl(name) or is_warc(name) or name.lower().endswith(".parquet")
    assert walk_key(name) == (name + "/" if many else name)


@given(
    st.lists(st.tuples(st.integers(0, 2), st.integers(-(2**40), 2**40)), max_size=20),
    st.none() | st.tuples(st.integers(0, 3), st.integers(-(2**40), 2**40)),
)
def test_the_walks_columns_give_what_its_entries_give(times, clock):
    entries = [FileEntry(f"f{k}", f"/c/f{k}", k, ns - 5, ns, 100 + k, dev) for k, (dev, ns) in enumerate(times)]
    columns = Entries([e.id for e in entries], [e.path for e in entries], Listing.of(entries).stat)
    assert list(columns) == entries and columns[1:3] == entries[1:3]
    assert newest_ctimes(columns, clock) == newest_ctimes(entries, clock)
    assert np.array_equal(Listing.of(columns).stat, Listing.of(entries).stat) and Listing.of(columns).ids == Listing.of(entries).ids


def test_a_walk_as_columns_finds_what_a_walk_as_entries_finds(tmp_path):
    for name in ("b.txt", "a/x.jsonl", "a/y.txt", "a.txt", ".hidden", "a/.h/z.txt", "c/d/e.warc"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(name)
    (tmp_path / "link").symlink_to(tmp_path / "b.txt")
    for globs in ((), ("*.txt",)):
        listed, skipped = discover(tmp_path, include_globs=globs)
        columns, skipped_too = discover(tmp_path, include_globs=globs, columns=True)
        assert isinstance(columns, Entries) and list(columns) == listed and skipped_too == skipped
    assert [e.id for e in listed] == ["a.txt", "a/y.txt", "b.txt"]  # * crosses / (simdoc.corpus.globs)
