"""A crafted index never makes simdoc open or print a path outside its corpus and its index (issue 18.5).

Hostile docs tables and manifests (ids and sources with `..`, absolute paths
and NUL bytes, role file names with `../`, another corpus folder, skipped ids
that climb out) and symbolic links (an index file, or a folder or file of the
corpus, replaced by a link to an identical copy elsewhere) are made with every
checksum fixed up (each file's CRC-32 and shape in the manifest, and the
manifest's own), so that the damage is not caught merely by a checksum. Every
command that reads an index then runs in this process under an audit hook
(:func:`sys.addaudithook`) that records each file opened and each folder
listed, and its stdout is searched for paths that leave the corpus.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simdoc.cli import cli
from simdoc.store.doctable import _blob
from simdoc.store.manifest import dump
from simdoc.store.npyfiles import crc32_file, data_offset

TEXT = "The quick brown fox jumps over the lazy dog while the farmer sleeps in the barn.\n"
OTHER = "Completely unrelated prose about tide tables, harbour cranes and rope.\n"
SECRET = "top secret: " + "this file lies outside the corpus and must never be read. " * 5

# ---------------------------------------------------------------- recording opens

_RECORD: list[tuple[str, str]] | None = None  # (event, path) while a command runs, else None


def _audit(event: str, args: tuple) -> None:
    # Installed once for the session (a hook cannot be removed): it does nothing unless recording.
    if _RECORD is None or event not in ("open", "os.listdir", "os.scandir"):
        return
    path = args[0] if args else None
    if isinstance(path, (str, bytes, os.PathLike)):
        flags = args[2] if event == "open" and len(args) > 2 and isinstance(args[2], int) else 0
        if flags & getattr(os, "O_NOFOLLOW", 0) and os.path.islink(path):
            return  # refused by the open itself (ELOOP): nothing is read through the link
        _RECORD.append((event, os.fsdecode(path)))


_HOOKED = False


def _hook() -> None:
    global _HOOKED
    if not _HOOKED:
        sys.addaudithook(_audit)
        _HOOKED = True


def invoke(args: list[str]) -> tuple[object, list[tuple[str, str]]]:
    """Run simdoc ARGS in this process; return its result and the paths it opened or listed."""
    global _RECORD
    _RECORD = []
    try:
        result = CliRunner().invoke(cli, args, catch_exceptions=True)
    finally:
        seen, _RECORD = _RECORD, None
    return result, seen


# ---------------------------------------------------------------- the pristine corpus and index


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    """base/corpus and the index base/idx built from it; base/outside (a secret), base/mirror
    (identical copies of corpus files, same size and time: what a symbolic link can lead to)."""
    _hook()
    base = tmp_path_factory.mktemp("hostile").resolve()
    corpus = base / "corpus"
    (corpus / "sub").mkdir(parents=True)
    (corpus / "a.txt").write_text(TEXT)
    (corpus / "b.txt").write_text(TEXT)  # an exact copy: paired without being read again
    (corpus / "c.txt").write_text(TEXT.replace("barn", "stable"))
    (corpus / "d.txt").write_text(OTHER)
    (corpus / "sub" / "e.txt").write_text(TEXT.replace("fox", "cat"))
    (corpus / "data.jsonl").write_text(json.dumps({"text": TEXT.replace("dog", "hound")}) + "\n" + json.dumps({"text": OTHER}) + "\n")
    (base / "outside").mkdir()
    (base / "outside" / "secret.txt").write_text(SECRET)
    (base / "outside" / "passwd").write_text(SECRET)
    mirror = base / "mirror"
    (mirror / "sub").mkdir(parents=True)
    for name in ("a.txt", "sub/e.txt", "data.jsonl"):
        shutil.copy2(corpus / name, mirror / name)
    (base / "query.txt").write_text(TEXT)
    r = CliRunner().invoke(cli, ["pairs", str(corpus), "--index", str(base / "idx"), "-q", "-j", "1", "--threshold", "0.5"])
    assert r.exit_code == 0 and "a.txt\tb.txt" in r.stdout, r.output
    return base


# ---------------------------------------------------------------- damage, checksums fixed up


def _text_column(idx: Path, shingle: dict, role: str) -> list[str]:
    blob = np.load(idx / shingle["roles"][role])
    offsets = np.load(idx / shingle["roles"][f"{role}.offsets"]).tolist()
    raw = blob.tobytes()
    return [raw[a:b].decode("utf-8", "surrogateescape") for a, b in zip(offsets[:-1], offsets[1:])]


def _put(idx: Path, stage: dict, role: str, arr: np.ndarray) -> None:
    """Replace a role's array, and fix its manifest entry (size, shape, CRC-32) to match."""
    name = stage["roles"][role]
    path = idx / name
    path.unlink()
    np.save(path, arr)
    stage["files"][name].update(bytes=path.stat().st_size, shape=list(arr.shape), crc32=crc32_file(path, data_offset(path)))


def _set_text_column(idx: Path, shingle: dict, role: str, values: list[str]) -> None:
    blob, offsets = _blob(values)
    _put(idx, shingle, role, blob)
    _put(idx, shingle, f"{role}.offsets", offsets)


def _set_name(idx: Path, shingle: dict, kind: str, row: int, value: str) -> None:
    """Index format 5 keeps a row's key (a file's id, a member's key) and, once for a run of rows,
    their source (simdoc.store.docnames): "id" sets row's key, "source" the source of its run."""
    keys = _text_column(idx, shingle, "docs.key")
    row %= len(keys)
    if kind == "id":
        keys[row] = value
        _set_text_column(idx, shingle, "docs.key", keys)
        return
    files = _text_column(idx, shingle, "docs.files")
    runs = np.load(idx / shingle["roles"]["docs.files.rows"])
    files[int(np.searchsorted(runs, row, side="right")) - 1] = value
    _set_text_column(idx, shingle, "docs.files", files)


# Paths meant to climb out; {outside} and {corpus} are the absolute folders of the example.
NASTY = [
    "../outside/secret.txt",
    "/etc/passwd",
    "{outside}/secret.txt",
    "sub/../../outside/secret.txt",
    "a.txt\0../../outside/secret.txt",
    "x\0",
    "",
    ".",
    "..",
    "sub/",
    "//etc/passwd",
    "./a.txt",
    "data.jsonl/#../../outside/secret.txt",
    "data.jsonl/#x/../../../outside/secret.txt",
]
PARTS = ["..", ".", "", "outside", "secret.txt", "etc", "sub", "e.txt", "a.txt"]
paths = st.one_of(
    st.sampled_from(NASTY),
    st.builds(
        lambda lead, parts: lead + "/".join(parts),
        st.sampled_from(["", "/", "./", "../"]),
        st.lists(st.sampled_from(PARTS), min_size=1, max_size=4),
    ),
)
CORPORA = ["/etc", "/", "{outside}", "{outside}/", "{corpus}/../outside", "../outside", "corpus", "", "{corpus}\0/x", "{corpus}/./sub"]
ROLE_NAMES = ["../outside/secret.txt", "{outside}/secret.txt", "/etc/passwd", "../{name}", "{name}/../../outside/secret.txt", "sub/{name}", "./{name}"]
LINKED_FILES = ["docs.key", "docs.files.offsets", "signatures", "buckets", "manifest.json"]

damages = st.one_of(
    st.tuples(st.just("id"), st.integers(0, 99), paths),
    st.tuples(st.just("source"), st.integers(0, 99), paths),
    st.tuples(st.just("role"), st.integers(0, 99), st.sampled_from(ROLE_NAMES)),
    st.tuples(st.just("corpus"), st.sampled_from(CORPORA)),
    st.tuples(st.just("skipped"), paths),
    st.tuples(st.just("index-link"), st.sampled_from(LINKED_FILES)),
    st.tuples(st.just("corpus-link"), st.sampled_from(["sub", "a.txt", "data.jsonl"])),
    st.tuples(st.just("forget-verified")),  # every pair is verified again: documents are opened
)


def _fill(value: str, work: Path, base: Path, name: str = "") -> str:
    return value.replace("{outside}", str(base / "outside")).replace("{corpus}", str(work / "corpus")).replace("{name}", name)


def damage(work: Path, base: Path, harms: list[tuple]) -> None:
    """Apply ``harms`` to the copy of the index in work/idx (and of the corpus in work/corpus)."""
    idx = work / "idx"
    manifest = json.loads((idx / "manifest.json").read_text())
    shingle = manifest["stages"]["shingle"]
    links = []
    # Columns first: they are found by their role names, which a later harm may change.
    for harm in sorted(harms, key=lambda h: h[0] not in ("id", "source")):
        kind = harm[0]
        if kind in ("id", "source"):
            _set_name(idx, shingle, kind, harm[1], _fill(harm[2], work, base))
        elif kind == "role":
            stages = [s for s in manifest["stages"].values() if s.get("roles")]
            roles = [(s, r) for s in stages for r in sorted(s["roles"])]
            stage, role = roles[harm[1] % len(roles)]
            old = stage["roles"][role]
            new = _fill(harm[2], work, base, old)
            stage["files"][new] = stage["files"].pop(old)
            stage["roles"][role] = new
        elif kind == "corpus":
            shingle["corpus"] = _fill(harm[1], work, base)
        elif kind == "forget-verified":
            manifest["stages"].pop("verified", None)
        elif kind == "skipped":
            shingle.setdefault("skipped", []).append({"id": _fill(harm[1], work, base), "reason": "crafted"})
        elif kind == "index-link":
            links.append(harm[1])
        elif kind == "corpus-link":
            target = work / "corpus" / harm[1]
            if target.is_symlink():
                continue  # linked already
            shutil.rmtree(target) if target.is_dir() else target.unlink()
            target.symlink_to(base / "mirror" / harm[1])
    (idx / "manifest.json").write_bytes(dump(manifest))  # its own checksum made to match
    for what in links:
        # An identical copy outside the index, linked in its place: only the link is wrong.
        name = what if what == "manifest.json" else shingle["roles"].get(what) or next(
            (s["roles"][what] for s in manifest["stages"].values() if what in s.get("roles", {})), None
        )
        if name is None or not (idx / name).is_file() or (idx / name).is_symlink():
            continue
        copy = base / "outside" / f"{work.name}-{name.replace('/', '_')}"
        shutil.copy2(idx / name, copy)
        (idx / name).unlink()
        (idx / name).symlink_to(copy)


# ---------------------------------------------------------------- what counts as leaving


def _inside(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _escapes(seen: list[tuple[str, str]], work: Path, base: Path) -> list[str]:
    """Existing files opened, or folders listed, outside work/corpus and work/idx.

    Only paths under the example's base folder or /etc can be reached by the
    damage (everything else is Python's own: modules, the numba cache).
    An open that fails because nothing is there reads nothing.
    """
    allowed = [str(work / "corpus"), str(work / "idx"), str(base / "query.txt")]
    watched = [str(base), "/etc"]
    out = []
    for event, path in seen:
        real = os.path.realpath(os.path.join(os.getcwd(), path))
        if _inside(real, watched) and not _inside(real, allowed) and os.path.lexists(real):
            out.append(f"{event} {path!r} -> {real}")
    return out


_FIELD = re.compile(r"[\t\n\0]")


def _printed_escapes(stdout: str, work: Path, base: Path) -> list[str]:
    """Fields of stdout that name a place outside the corpus.

    An absolute path must lie in the corpus; for a member (``FILE/#KEY``)
    that is its FILE part, since the rest names nothing (FILE is a file).
    No field may hold '..' as a part of its FILE, or name the outside
    folders. (A relative id such as ``outside`` is a place in the corpus.)
    """
    root = str(work / "corpus")
    bad = []
    for field in _FIELD.split(stdout):
        if field == str(base / "query.txt"):
            continue  # query echoes the query file as given
        file_part = field.split("/#", 1)[0]
        if str(base / "outside") in file_part or str(base / "mirror") in file_part:
            bad.append(field)
        elif ".." in file_part.split("/"):
            bad.append(field)
        elif file_part.startswith("/") and not _inside(os.path.normpath(file_part), [root]):
            bad.append(field)
    return bad


def commands(work: Path, base: Path) -> list[list[str]]:
    idx = str(work / "idx")
    return [
        ["pairs", "--index", idx, "-j", "1"],
        ["clusters", "--index", idx, "-j", "1"],
        ["dedup", "--index", idx, "-j", "1", "--absolute", "-0"],
        ["dedup", "--index", idx, "-j", "1", "--absolute", "--format", "tsv"],
        ["dedup", "--index", idx, "-j", "1", "-0"],
        ["show", "a.txt", "c.txt", "--index", idx],  # refused: an index alone names no place to read
        ["show", "sub/e.txt", "data.jsonl/#1", "--index", idx],
        ["query", str(base / "query.txt"), "--index", idx],
        ["check", "--index", idx],
        ["stats", "--index", idx, "--skipped"],
    ]


def _assert_confined(work: Path, base: Path) -> None:
    for args in commands(work, base):
        result, seen = invoke(args)
        where = (args[0], result.exit_code, result.stdout, result.stderr)
        assert result.exception is None or isinstance(result.exception, SystemExit), (where, result.exception)
        assert "Traceback" not in result.output and "Traceback" not in result.stderr, where
        assert result.exit_code in (0, 2, 4), where
        if result.exit_code == 4:
            assert len([ln for ln in result.stderr.splitlines() if ln.startswith("Error:")]) == 1, where
        assert _escapes(seen, work, base) == [], where
        if args[0] == "check" and result.exit_code == 4:
            continue  # its stdout is one line per problem, quoting the damage it found
        assert _printed_escapes(result.stdout, work, base) == [], where


def _example(base: Path) -> tempfile.TemporaryDirectory:
    """A copy of the pristine corpus and index (the manifest moved to the copy's corpus)."""
    tmp = tempfile.TemporaryDirectory(dir=base, prefix="ex-")
    work = Path(tmp.name)
    shutil.copytree(base / "corpus", work / "corpus", symlinks=True)  # copy2: same sizes and times
    shutil.copytree(base / "idx", work / "idx")
    manifest = json.loads((work / "idx" / "manifest.json").read_text())
    manifest["stages"]["shingle"]["corpus"] = str(work / "corpus")
    (work / "idx" / "manifest.json").write_bytes(dump(manifest))
    return tmp


def test_the_pristine_copy_is_sound_and_confined(pristine):
    with _example(pristine) as tmp:
        work = Path(tmp)
        _assert_confined(work, pristine)
        result, _ = invoke(["dedup", str(work / "corpus"), "--index", str(work / "idx"), "-j", "1", "--absolute"])
        # Moved with sizes and times kept, the copy is the corpus: dedup lists its files.
        dropped = ["b.txt", "c.txt", "data.jsonl/#1", "sub/e.txt", "data.jsonl/#2"]
        assert result.stdout == "".join(f"{work / 'corpus'}/{name}\n" for name in dropped), result.output


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(damages, min_size=1, max_size=3))
def test_a_crafted_index_never_opens_or_prints_a_path_outside(pristine, harms):
    with _example(pristine) as tmp:
        work = Path(tmp)
        damage(work, pristine, harms)
        _assert_confined(work, pristine)


# ---------------------------------------------------------------- the cases the trial found


def test_an_id_that_climbs_out_is_refused_with_one_line_and_the_secret_never_shown(pristine):
    """The trial's id `../outside/secret.txt` made `show` print that file and `dedup --absolute -0`
    emit a path for `xargs -0 rm`: now every reader refuses the table on load (exit 4)."""
    with _example(pristine) as tmp:
        work = Path(tmp)
        # Row 1 is b.txt, a.txt's exact copy: a pair that is never read again, only printed.
        damage(work, pristine, [("id", 1, "../outside/secret.txt")])
        for args in (["dedup", "-0"], ["pairs"], ["query", str(pristine / "query.txt")]):
            result, seen = invoke([*args, "--index", str(work / "idx")])
            assert result.exit_code == 4 and result.stdout == "", (args, result.output)
            errors = [ln for ln in result.stderr.splitlines() if ln.startswith("Error:")]
            assert len(errors) == 1 and "not a path inside the corpus: '../outside/secret.txt'" in errors[0], result.stderr
            assert "top secret" not in result.output and _escapes(seen, work, pristine) == []


@pytest.mark.parametrize(
    "corpus", ["../outside", "corpus", "", "{corpus}/../outside", "{corpus}/./sub", "{corpus}/", "{corpus}\0/x"]
)
def test_a_corpus_that_is_no_absolute_normalised_path_is_refused(pristine, corpus):
    with _example(pristine) as tmp:
        work = Path(tmp)
        damage(work, pristine, [("corpus", corpus)])
        result, _ = invoke(["pairs", "--index", str(work / "idx")])
        assert result.exit_code == 4 and result.stdout == ""
        assert "'corpus' has a value of the wrong kind" in result.stderr, result.stderr


def test_a_manifest_naming_another_folder_makes_dedup_list_nothing_there(pristine):
    """`"corpus": "/etc"` (or any folder that is not the corpus) made dedup print `/etc/...`:
    exact copies and pairs from the verified-pairs table are not read again. dedup now lists
    only files still as indexed (read again: their digest), and leaves the others out with a
    warning; and it prints no absolute path at all without the CORPUS on its command line
    (tests/test_index_trust.py)."""
    for elsewhere in ("/etc", str(pristine / "outside")):
        with _example(pristine) as tmp:
            work = Path(tmp)
            damage(work, pristine, [("corpus", elsewhere)])
            result, seen = invoke(["dedup", "--index", str(work / "idx"), "-j", "1", "-0"])
            assert result.exit_code == 0 and result.stdout == "", result.output
            # Left out before dedup's own check (an exact copy whose file moved is read again on
            # --index alone, simdoc.stages.results.Verifier.recheck_copies), or by it.
            assert (
                "a.txt: changed or gone since it was indexed, and it is the one to keep" in result.stderr
                or "a.txt: could not be read again; its pairs are left out" in result.stderr
            ), result.stderr
            assert _escapes(seen, work, pristine) == []


@pytest.mark.parametrize("name", ["../outside/secret.txt", "{outside}/secret.txt", "../{name}", "{name}/../../outside/secret.txt"])
def test_a_role_file_named_outside_the_index_is_refused(pristine, name):
    with _example(pristine) as tmp:
        work = Path(tmp)
        damage(work, pristine, [("role", 0, name)])
        result, seen = invoke(["pairs", "--index", str(work / "idx")])
        assert result.exit_code == 4 and "expected" in result.stderr and _escapes(seen, work, pristine) == [], result.stderr


@pytest.mark.parametrize("what", ["docs.key", "signatures", "manifest.json"])
def test_an_index_file_replaced_by_a_symbolic_link_is_refused(pristine, what):
    """Even to an identical copy: a link can lead anywhere, and simdoc writes none."""
    with _example(pristine) as tmp:
        work = Path(tmp)
        damage(work, pristine, [("index-link", what)])
        result, seen = invoke(["pairs", "--index", str(work / "idx")])
        assert result.exit_code == 4 and "is a symbolic link" in result.stderr, result.stderr
        assert _escapes(seen, work, pristine) == []


@pytest.mark.parametrize("what", ["sub", "a.txt", "data.jsonl"])
def test_a_corpus_folder_or_file_turned_into_a_link_is_not_followed(pristine, what):
    """The link leads to an identical copy (same size and time): only the link is wrong. Its
    documents are left out as changed or gone, never read through it."""
    with _example(pristine) as tmp:
        work = Path(tmp)
        damage(work, pristine, [("corpus-link", what), ("forget-verified",)])  # every pair read again
        corpus = str(work / "corpus")
        for args in (["pairs", "-j", "1"], ["show", corpus, "a.txt", "c.txt"], ["show", corpus, "sub/e.txt", "data.jsonl/#1"]):
            result, seen = invoke([*args, "--index", str(work / "idx")])
            # show CORPUS indexes the corpus again first: a link is then no document (exit 2 for it).
            assert result.exit_code in ((0,) if args[0] == "pairs" else (0, 2)), result.output
            assert _escapes(seen, work, pristine) == [], args
            if args[0] == "pairs":
                assert "changed since it was indexed; its pairs are left out" in result.stderr


def test_a_scoring_worker_opens_no_path_outside_though_it_checks_rows_only_as_it_reads_them(pristine):
    """A Dask scoring task maps the docs table and checks a row's path when it reads the document
    (simdoc.store.docnames.Column): a crafted id is refused there, and nothing outside is opened.
    (The client refuses the whole table before it submits anything; this is the worker alone.)"""
    from test_dask_partitions import InProcessClient

    from simdoc.errors import CorruptIndex
    from simdoc.stages import dask_pairs
    from simdoc.stages.results import Verifier
    from simdoc.store.loaded import open_index

    global _RECORD
    with _example(pristine) as tmp:
        work = Path(tmp)
        damage(work, pristine, [("id", 2, "../outside/secret.txt")])  # c.txt: a candidate, read to verify
        verifier = Verifier.of_index(open_index(work / "idx", lazy_ids=True))
        _RECORD = []
        try:
            with pytest.raises(CorruptIndex, match="not a path inside the corpus"):
                dask_pairs.score_candidates(InProcessClient(), str(work / "idx"), 0.5, "set", True, False, None, verifier)
        finally:
            seen, _RECORD = _RECORD, None
        assert _escapes(seen, work, pristine) == []
