"""A nightly run where little or nothing changed (issue 29): it costs the walk, and little more.

What it must not cost: numba's import (nothing is signed), a Python loop over
every entry of the walk, the stored pairs scored again. What it must still
do: print exactly what a rebuild prints, and nothing with --new.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import simdoc.corpus.folders
import simdoc.stages.plan
from simdoc.buckets import BucketStats, bucket_order, iter_candidates
from simdoc.corpus.walk import FileEntry, Skipped, discover, discover_sources, walk, walk_key
from simdoc.lsh import band_keys
from simdoc.stages.plan import Listing, is_listing_id, listing_id, scan_id_of
from simdoc.store.directory import IndexStore
from simdoc.store.loaded import open_index
from tests.conftest import REPO, TEXT_A, TEXT_C, write

# ---------------------------------------------------------------- no numba when nothing is signed

_IMPORTS_AT_EXIT = (
    "import sys, atexit\n"
    "import simdoc.stages.racy\n"
    "simdoc.stages.racy.RACY_NS = 0  # the files just written count as settled (see conftest.settled)\n"
    "atexit.register(lambda: sys.stderr.write('IMPORTED ' + ' '.join(sorted(m for m in sys.modules"
    " if m.split('.')[0] in ('numba', 'asyncio', 'tqdm') or m in ('simdoc.kernels', 'simdoc.kernels_bytes', 'numpy.ma')))"
    " + '\\n'))\n"
    "from simdoc.__main__ import main\n"
    "sys.argv = ['simdoc', *sys.argv[1:]]\n"
    "main()\n"
)


def _simdoc(*args) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-c", _IMPORTS_AT_EXIT, *map(str, args)], capture_output=True, text=True, env=env, timeout=120
    )


def _imported(r: subprocess.CompletedProcess) -> list[str]:
    line = [ln for ln in r.stderr.splitlines() if ln.startswith("IMPORTED")]
    assert len(line) == 1, r.stderr
    return line[0].split()[1:]


def test_a_run_that_signs_nothing_never_imports_numba_nor_what_only_a_cluster_or_a_bar_needs(tmp_path):
    # Nor numpy.ma, which np.unique imports on its first call (~0.015 s).
    corpus = tmp_path / "c"
    write(corpus / "a.txt", TEXT_A)
    write(corpus / "b.txt", TEXT_A)
    write(corpus / "c.txt", TEXT_C)
    idx = tmp_path / "idx"
    first = _simdoc("pairs", corpus, "--index", idx, "--new", "-j", "1")
    assert first.returncode == 0, first.stderr
    assert first.stdout == "a.txt\tb.txt\t1.0000\t1.0000\tboth\n"
    # It signed three documents: with the numpy reference (simdoc.kernel_choice), numba not loaded.
    assert "numba" not in _imported(first) and "simdoc.kernels" not in _imported(first)
    again = _simdoc("pairs", corpus, "--index", idx, "--new", "-j", "1")
    assert again.returncode == 0, again.stderr
    assert again.stdout == ""
    assert _imported(again) == []
    whole = _simdoc("pairs", corpus, "--index", idx, "-j", "1")
    assert whole.stdout == "a.txt\tb.txt\t1.0000\t1.0000\n" and _imported(whole) == []


def test_a_pairs_run_imports_the_pairs_command_alone_not_the_others(tmp_path):
    # The other commands (reports, show, tuning, cache) and what only they use are imported when
    # they are asked for: ~0.035 CPU-s of a nightly run that finds nothing changed (issue 29).
    corpus = tmp_path / "c"
    write(corpus / "a.txt", TEXT_A)
    write(corpus / "b.txt", TEXT_C)
    code = (
        "import sys, atexit\n"
        "atexit.register(lambda: sys.stderr.write('IMPORTED ' + ' '.join(sorted(m for m in sys.modules"
        " if m.startswith(('simdoc.cli.', 'simdoc.reports')))) + '\\n'))\n"
        "from simdoc.__main__ import main\n"
        "sys.argv = ['simdoc', *sys.argv[1:]]\n"
        "main()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    r = subprocess.run(
        [sys.executable, "-c", code, "pairs", str(corpus), "--index", str(tmp_path / "idx"), "-j", "1"],
        capture_output=True, text=True, env=env, timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert _imported(r) == ["simdoc.cli.options", "simdoc.cli.seconds", "simdoc.cli.stages", "simdoc.cli.stdio"]  # (seconds: an option type)
    listed = subprocess.run([sys.executable, "-m", "simdoc", "--help"], capture_output=True, text=True, env=env, timeout=120)
    for name in ("cache", "check", "clusters", "dedup", "index", "pairs", "query", "shingle", "show", "signature", "stats", "tune"):
        assert f"\n  {name} " in listed.stdout, name
    misspelt = subprocess.run([sys.executable, "-m", "simdoc", "clusterz"], capture_output=True, text=True, env=env, timeout=120)
    assert misspelt.returncode == 2 and "No such command 'clusterz'. Did you mean 'clusters'?" in misspelt.stderr


# ---------------------------------------------------------------- the walk, in C loops


def _reference(root: Path, follow: bool = False) -> list[str]:
    """The ids a walk finds, the plain way: every regular file not under a hidden name, in
    walk order (sorting by walk_key of the whole id is that order, see simdoc.corpus.walk)."""
    ids = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=follow):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for name in filenames:
            path = os.path.join(dirpath, name)
            if name.startswith(".") or not stat.S_ISREG((os.stat if follow else os.lstat)(path).st_mode):
                continue
            ids.append(os.path.relpath(path, root).replace(os.sep, "/"))
    return sorted(ids, key=walk_key)


_PARTS = st.sampled_from(["a", "B", "é", ".", "-", "0", "txt", "jsonl", "JSONL", "gz", "warc", "wet", "Parquet", "z"])
_NAME = st.lists(_PARTS, min_size=1, max_size=4).map("".join).filter(lambda n: n not in (".", ".."))


@settings(max_examples=60, deadline=None)
@given(paths=st.lists(st.lists(_NAME, min_size=1, max_size=3), min_size=1, max_size=25), links=st.integers(0, 3))
def test_the_walk_finds_what_a_plain_walk_finds_in_walk_order(paths, links):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "c"
        root.mkdir()
        for parts in paths:
            target = root.joinpath(*parts)
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                if not target.exists():
                    target.write_text("/".join(parts), encoding="utf-8")
            except (FileExistsError, NotADirectoryError, IsADirectoryError):
                continue  # a name already taken by a file or a directory
        files = sorted(p for p in root.rglob("*") if p.is_file())
        for i in range(min(links, len(files))):
            (root / f"link{i}").symlink_to(files[i])
        listed, skipped = discover(root)
        assert [e.id for e in listed] == _reference(root)
        assert [e.id for e in walk(root)] == _reference(root)
        assert {s.id for s in skipped} == {f"link{i}" for i in range(min(links, len(files)))}
        columns, _ = discover(root, columns=True)
        assert list(columns) == listed
        for e in listed:
            st_ = os.lstat(e.path)
            assert e.stat() == (st_.st_size, st_.st_mtime_ns, st_.st_ctime_ns, st_.st_ino, st_.st_dev)
        assert [e.id for e in discover(root, follow_symlinks=True)[0]] == _reference(root, follow=True)


def test_a_file_gone_between_the_listing_and_its_stat_is_passed_over_and_the_rest_kept(tmp_path, monkeypatch):
    for name in ("a.txt", "b.txt", "c.txt", "sub/d.txt"):
        write(tmp_path / name, name)
    real = simdoc.corpus.folders._LISTDIR

    def vanishing(folder):
        names = real(folder)
        if "b.txt" in names:
            os.unlink(tmp_path / "b.txt")  # gone since it was listed
        return names

    monkeypatch.setattr(simdoc.corpus.folders, "_LISTDIR", vanishing)
    listed, skipped = discover(tmp_path)
    assert [e.id for e in listed] == ["a.txt", "c.txt", "sub/d.txt"]
    assert [(s.id, s.reason) for s in skipped] == [("b.txt", "cannot stat: No such file or directory")]


# ---------------------------------------------------------------- --new: the buckets of the update alone


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31), st.integers(2, 40), st.integers(1, 5), st.integers(1, 3), st.integers(1, 30), st.floats(0, 1))
def test_candidates_of_the_touched_buckets_are_the_candidates_touching_them(seed, n, bands, rows, chunk, share):
    rng = np.random.default_rng(seed)
    sig = rng.integers(0, 3, size=(n, bands * rows)).astype(np.uint32)  # few values: buckets collide
    keys = band_keys(sig, bands, rows)
    order = bucket_order(keys, rng.random(n) > 0.1)
    touching = rng.random(n) < share
    every, stats_all = BucketStats(), BucketStats()
    pairs = [(a, b) for left, right in iter_candidates(keys, order, stats_all, chunk) for a, b in zip(left.tolist(), right.tolist())]
    touched = [
        (a, b) for left, right in iter_candidates(keys, order, every, chunk, touching=touching)
        for a, b in zip(left.tolist(), right.tolist())
    ]
    assert sorted(touched) == sorted(p for p in pairs if touching[p[0]] or touching[p[1]])
    assert len(touched) == len(set(touched))
    assert (every.largest_bucket, every.large_buckets) == (stats_all.largest_bucket, stats_all.large_buckets)


NEAR = "The harbour lantern festival returns to Port Ellery on the first Saturday of August, with stalls. "


def test_new_reports_the_pairs_of_a_new_copy_through_its_groups_representative(run, tmp_path, settled):
    corpus = tmp_path / "c"
    write(corpus / "a.txt", NEAR * 3)
    write(corpus / "b.txt", NEAR * 3)  # a copy of a.txt: a.txt stands for both in the buckets
    write(corpus / "d.txt", NEAR * 3 + "And one more line.")  # near a.txt and b.txt
    write(corpus / "e.txt", TEXT_C)
    idx = tmp_path / "idx"
    first = run("pairs", corpus, "--index", idx, "--new", "-t", "0.5", "-j", "1")
    assert first.exit_code == 0, first.stderr
    assert len(first.stdout.splitlines()) == 3
    assert run("pairs", corpus, "--index", idx, "--new", "-t", "0.5", "-j", "1").stdout == ""
    write(corpus / "c.txt", NEAR * 3)  # a new copy, not its group's representative
    new = run("pairs", corpus, "--index", idx, "--new", "-t", "0.5", "-j", "1")
    assert new.exit_code == 0, new.stderr
    every = run("pairs", corpus, "--index", idx, "-t", "0.5", "-j", "1").stdout.splitlines()
    touching = [line for line in every if "c.txt" in line.split("\t")[:2]]
    assert [line.rsplit("\t", 1)[0] for line in new.stdout.splitlines()] == touching
    assert {line.split("\t")[1] for line in touching} | {line.split("\t")[0] for line in touching} == {"a.txt", "b.txt", "c.txt", "d.txt"}


# ---------------------------------------------------------------- the scan id: arrays hashed, not JSON per file


def _scanned(corpus: Path, idx: Path):
    """The listing and the paths skipped, as a run's scan sees them."""
    _, entries, skipped = discover_sources(corpus, exclude=[idx], columns=True)
    return Listing.of(entries), skipped


def test_a_run_with_nothing_changed_formats_no_json_per_file(run, tmp_path, settled, monkeypatch):
    corpus = tmp_path / "c"
    write(corpus / "a.txt", TEXT_A)
    write(corpus / "b.txt", TEXT_C)
    idx = tmp_path / "idx"
    assert run("pairs", corpus, "--index", idx, "-j", "1").exit_code == 0

    def refused(*args):
        raise AssertionError("the scan id of an index built before listing ids was made")

    monkeypatch.setattr(simdoc.stages.plan, "scan_id_of", refused)
    generation = open_index(idx).manifest["generation"]
    r = run("pairs", corpus, "--index", idx, "-j", "1", "-v")
    assert r.exit_code == 0, r.output
    assert open_index(idx).manifest["generation"] == generation
    assert is_listing_id(open_index(idx).stage("shingle")["scan_id"])


def test_an_index_built_before_listing_ids_stays_up_to_date_when_nothing_changed(run, tmp_path, settled):
    corpus = tmp_path / "c"
    write(corpus / "a.txt", TEXT_A)
    write(corpus / "b.txt", TEXT_A)
    idx = tmp_path / "idx"
    for attempt in range(64):  # one old scan id in 16 passes the check digit: change the listing, build again
        write(corpus / "c.txt", f"{TEXT_C} {attempt}")
        assert run("pairs", corpus, "--index", idx, "-j", "1").exit_code == 0
        old_id = scan_id_of(*_scanned(corpus, idx))
        if not is_listing_id(old_id):
            break
    store = IndexStore(idx)
    with store.writing():
        manifest = store.read_manifest()
        manifest["stages"]["shingle"]["scan_id"] = old_id  # as simdoc wrote it before listing ids
        store.write_manifest(manifest)
    generation = open_index(idx).manifest["generation"]
    r = run("pairs", corpus, "--index", idx, "-j", "1")
    assert r.exit_code == 0 and r.stdout == "a.txt\tb.txt\t1.0000\t1.0000\n", r.output
    assert open_index(idx).manifest["generation"] == generation  # nothing written
    write(corpus / "d.txt", TEXT_C + " and more")
    assert run("pairs", corpus, "--index", idx, "-j", "1").exit_code == 0
    assert open_index(idx).manifest["generation"] == generation + 1
    assert open_index(idx).stage("shingle")["scan_id"] == listing_id(*_scanned(corpus, idx))


@settings(max_examples=200, deadline=None)
@given(
    files=st.lists(st.tuples(_NAME, st.lists(st.integers(-(2**63), 2**63 - 1), min_size=5, max_size=5)), max_size=6, unique_by=lambda f: f[0]),
    which=st.integers(0, 5), field=st.integers(0, 5), delta=st.integers(1, 3),
)
def test_a_listing_id_changes_with_any_id_or_stat_and_is_told_from_older_ids(files, which, field, delta):
    entries = [FileEntry(name, "/c/" + name, *stat_) for name, stat_ in files]
    before = listing_id(Listing.of(entries), [])
    assert is_listing_id(before)
    if not entries:
        return
    e = entries[which % len(entries)]
    values = [e.id, *e.stat()]
    values[field] = values[field] + "x" * delta if field == 0 else (values[field] + delta + 2**63) % 2**64 - 2**63
    changed = [FileEntry(values[0], e.path, *values[1:]) if x is e else x for x in entries]
    if len({x.id for x in changed}) == len(changed):
        assert listing_id(Listing.of(changed), []) != before
    assert listing_id(Listing.of(entries), [Skipped("z", "why", 1, 2)]) != before
