"""Incremental updates: only new and changed files are read; the result equals a full rebuild."""

import os
import random
import time
from pathlib import Path

import numpy as np
from click.testing import CliRunner

import simdoc
import simdoc.corpus.plain_batch
import simdoc.corpus.read
import simdoc.corpus.walk
import simdoc.stages.scan
from simdoc.cli import cli
from simdoc.store.loaded import open_index

WORDS = "amber basil cedar delta ember fjord grove heron iris jade kelp lotus maple nutmeg olive".split()


def text(rng: random.Random, n: int = 120) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def build_corpus(root: Path, seed: int = 0, n: int = 30) -> dict[str, str]:
    rng = random.Random(seed)
    docs = {}
    for i in range(n):
        docs[f"part{i % 3}/doc{i:03d}.txt"] = text(rng)
    docs["part0/copy000.txt"] = docs["part0/doc000.txt"]
    for name, body in docs.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(body, encoding="utf-8")
    return docs


def arrays_by_role(index: Path) -> dict[str, bytes]:
    loaded = open_index(index)
    out = {}
    for stage_name in ("shingle", "signature", "index"):
        stage = loaded.stage(stage_name)
        for role, name in stage["roles"].items():
            if role == "docs.added":
                continue  # which update added each text: history, not part of the result
            out[f"{stage_name}.{role}"] = (index / name).read_bytes()
    return out


def mutate(root: Path, rng: random.Random) -> dict[str, str]:
    """Add, change, delete, touch-without-change, and rename; returns what changed how."""
    what = {}
    (root / "part1" / "added.txt").write_text(text(rng), encoding="utf-8")
    what["part1/added.txt"] = "added"
    target = root / "part2" / "doc002.txt"
    target.write_text(target.read_text(encoding="utf-8") + " and a new closing sentence here", encoding="utf-8")
    what["part2/doc002.txt"] = "changed"
    (root / "part0" / "doc003.txt").unlink()
    touched = root / "part1" / "doc001.txt"
    st = touched.stat()
    os.utime(touched, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    what["part1/doc001.txt"] = "touched"
    # A near copy of doc004 appears: a new near-duplicate pair.
    body = (root / "part1" / "doc004.txt").read_text(encoding="utf-8")
    (root / "part2" / "near004.txt").write_text(body.replace("amber", "AMBER", 1), encoding="utf-8")
    what["part2/near004.txt"] = "added"
    return what


def age(root: Path, seconds: int = 3600) -> None:
    """Backdate every file, as a corpus written long before the index would be."""
    for p in root.rglob("*.txt"):
        st = p.stat()
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns - seconds * 10**9))


def test_racily_clean_file_is_reread(tmp_path, monkeypatch):
    corpus = tmp_path / "c"
    build_corpus(corpus)  # written just now: same tick as the first scan
    idx = tmp_path / "idx"
    simdoc.find_pairs(corpus, idx, jobs=1)
    target = corpus / "part1" / "doc001.txt"
    st = target.stat()
    body = target.read_text(encoding="utf-8")
    target.write_text(body.replace("a", "e", 1) if "a" in body else body + "x", encoding="utf-8")
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))  # same size and mtime as recorded
    # Force a rescan (the scan signature is the same) by adding a file.
    (corpus / "other.txt").write_text("something else entirely", encoding="utf-8")
    updated = simdoc.find_pairs(corpus, idx, jobs=1)
    full = simdoc.find_pairs(corpus, tmp_path / "full", jobs=1)
    assert arrays_by_role(idx) == arrays_by_role(tmp_path / "full")
    assert list(updated) == list(full)


def test_a_same_size_edit_in_the_racy_window_is_seen_when_nothing_else_changed(tmp_path):
    """Issue 18.3: the whole-scan "unchanged" shortcut ran before the racy check, so an edit
    that kept the size and the mtime, within 2 s of the scan, was missed when it was the
    only change. Racily clean files are read again whenever there are any."""
    corpus = tmp_path / "c"
    build_corpus(corpus)
    age(corpus)
    target = corpus / "part1" / "doc001.txt"
    # Modified "now" as far as the first scan can tell (a time after it, however slow the
    # machine): racily clean, since the scan cannot tell a later edit by size and time.
    later = time.time_ns() + 60 * 10**9
    os.utime(target, ns=(later, later))
    idx = tmp_path / "idx"
    simdoc.find_pairs(corpus, idx, jobs=1)
    st = target.stat()
    body = target.read_text(encoding="utf-8")
    edited = body.replace("a", "e", 1) if "a" in body else body.replace("e", "a", 1)
    assert len(edited) == len(body) and edited != body
    target.write_text(edited, encoding="utf-8")
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))  # same size and mtime as recorded
    # Nothing else changed: the scan as a whole looks exactly as before.
    updated = simdoc.find_pairs(corpus, idx, jobs=1)
    full = simdoc.find_pairs(corpus, tmp_path / "full", jobs=1)
    assert arrays_by_role(idx) == arrays_by_role(tmp_path / "full")
    assert list(updated) == list(full)


def test_update_equals_full_rebuild_and_reads_only_what_changed(tmp_path, monkeypatch, settled):
    corpus = tmp_path / "c"
    build_corpus(corpus)
    age(corpus)
    idx = tmp_path / "idx"
    simdoc.find_pairs(corpus, idx, jobs=1)
    mutate(corpus, random.Random(1))

    reads: list[str] = []
    real, real_plain = simdoc.corpus.files.read_document, simdoc.stages.scan.read_plain

    def counting(path, **kw):
        reads.append(Path(path).name)
        return real(path, **kw)

    def counting_plain(path, *args):  # the scan's way for a plain file
        reads.append(Path(path).name)
        return real_plain(path, *args)

    real_together = simdoc.corpus.plain_batch.PlainBatch.__init__

    def counting_together(self, paths, *args):  # a task's small files, read in one compiled loop
        reads.extend(Path(p).name for p in paths)
        real_together(self, paths, *args)

    monkeypatch.setattr(simdoc.corpus.read, "read_document", counting)
    monkeypatch.setattr(simdoc.stages.scan, "read_plain", counting_plain)
    monkeypatch.setattr(simdoc.corpus.plain_batch.PlainBatch, "__init__", counting_together)
    updated = simdoc.find_pairs(corpus, idx, jobs=1, verify=False)
    # Only the added, changed and touched files were read (the touched one only for its digest).
    assert sorted(reads) == sorted(["added.txt", "doc002.txt", "doc001.txt", "near004.txt"])
    shingle = open_index(idx).stage("shingle")
    assert shingle["n_changed"] == 3 and shingle["n_removed"] == 1
    assert "read 4 files, 3 new or changed, 1 removed" in updated.stages[0].detail

    monkeypatch.setattr(simdoc.corpus.read, "read_document", real)
    monkeypatch.setattr(simdoc.stages.scan, "read_plain", real_plain)
    monkeypatch.setattr(simdoc.corpus.plain_batch.PlainBatch, "__init__", real_together)
    updated = simdoc.find_pairs(corpus, idx, jobs=1)
    full = simdoc.find_pairs(corpus, tmp_path / "full", jobs=1)
    assert list(updated) == list(full)
    assert arrays_by_role(idx) == arrays_by_role(tmp_path / "full")


def test_new_prints_only_pairs_touching_the_update(tmp_path):
    corpus = tmp_path / "c"
    build_corpus(corpus)
    idx = tmp_path / "idx"
    runner = CliRunner()
    first = runner.invoke(cli, ["pairs", str(corpus), "--index", str(idx), "--new"])
    # On the first build every document is new.
    assert first.exit_code == 0, first.stderr
    assert first.stdout == "part0/copy000.txt\tpart0/doc000.txt\t1.0000\t1.0000\tboth\n"
    mutate(corpus, random.Random(2))
    r = runner.invoke(cli, ["pairs", str(corpus), "--index", str(idx), "--new"])
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split("\t")[0:2] == ["part1/doc004.txt", "part2/near004.txt"]
    assert lines[0].split("\t")[4] == "b"
    assert all(line.split("\t")[4] in ("a", "b", "both") for line in lines)
    assert not any("copy000" in line for line in lines)  # an old pair is not news
    # That report was written in full: nothing is new since (issue 17.1), in any format.
    again = runner.invoke(cli, ["pairs", str(corpus), "--index", str(idx), "--new"])
    assert again.exit_code == 0 and again.stdout == "", again.stdout
    js = runner.invoke(cli, ["pairs", "--index", str(idx), "--new", "--format", "jsonl"])
    assert js.exit_code == 0 and js.stdout == ""
    # Without --new the old pair is still there.
    all_pairs = runner.invoke(cli, ["pairs", "--index", str(idx)])
    assert "part0/copy000.txt\tpart0/doc000.txt" in all_pairs.stdout


def test_nothing_changed_is_up_to_date(tmp_path):
    corpus = tmp_path / "c"
    build_corpus(corpus)
    idx = tmp_path / "idx"
    simdoc.find_pairs(corpus, idx, jobs=1)
    again = simdoc.find_pairs(corpus, idx, jobs=1)
    assert [s.stage for s in again.stages] == ["shingle", "signature", "index", "verify"]
    assert not any(s.built for s in again.stages)  # the one pair comes from the verified-pairs table


def test_many_random_updates_stay_equal_to_rebuilds(tmp_path, monkeypatch):
    rng = random.Random(5)
    corpus = tmp_path / "c"
    docs = build_corpus(corpus, n=20)
    (corpus / "aa-repeats.txt").write_text("ab" * 800 + " and a tail", encoding="utf-8")
    age(corpus)
    idx = tmp_path / "idx"
    simdoc.find_pairs(corpus, idx, jobs=1)
    names = sorted(docs)
    for step in range(4):
        for _ in range(3):
            action = rng.choice(["add", "change", "delete"])
            if action == "add" or not names:
                name = f"new/s{step}_{rng.randrange(10**6)}.txt"
                (corpus / name).parent.mkdir(parents=True, exist_ok=True)
                src = rng.choice(names) if names and rng.random() < 0.5 else None
                body = (corpus / src).read_text(encoding="utf-8") if src else text(rng)
                (corpus / name).write_text(body, encoding="utf-8")
                names.append(name)
            elif action == "change":
                name = rng.choice(names)
                (corpus / name).write_text(text(rng), encoding="utf-8")
            else:
                name = names.pop(rng.randrange(len(names)))
                (corpus / name).unlink()
        updated = simdoc.find_pairs(corpus, idx, jobs=1)
        full = simdoc.find_pairs(corpus, tmp_path / f"full{step}", jobs=1)
        assert list(updated) == list(full)
        assert arrays_by_role(idx) == arrays_by_role(tmp_path / f"full{step}")
    assert np.all(open_index(idx).signatures().shape == (len(names) + 1, 128))
