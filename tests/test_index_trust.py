"""What an index is trusted for: never to name the place of the files that `dedup` lists or `show` prints.

The issue's trial (issue 28.3): an index of a copy of four /etc files, its
manifest's ``corpus`` rewritten to the /etc folder and its checksum made
again with simdoc's own code. ``check`` passes (the manifest is sound), and
``dedup --index fe --absolute`` printed ``/etc/group-`` and ``/etc/passwd-``
for ``xargs rm``, and ``show --index fe passwd passwd-`` printed
``/etc/passwd``. Here the /etc folder is a folder of the test's own (``etc``)
holding the same four names: copied with their sizes and times, the copies
are byte for byte what the index describes, so no size, time or digest can
tell the folders apart. Only what the user names on the command line can.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from simdoc.cli import cli
from simdoc.store.manifest import dump

PASSWD = "".join(f"user{i}:x:{1000 + i}:{1000 + i}:User number {i}:/home/user{i}:/bin/bash\n" for i in range(12))
GROUP = "".join(f"group{i}:x:{2000 + i}:user{i},user{i + 1}\n" for i in range(14))


@pytest.fixture
def forged(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(etc, copy, fe): the folder the forged manifest names, the corpus indexed, the forged index."""
    etc, copy = tmp_path / "etc", tmp_path / "copy"
    etc.mkdir()
    copy.mkdir()
    texts = {"passwd": PASSWD, "passwd-": PASSWD, "group": GROUP, "group-": GROUP + "group99:x:2099:\n"}
    for name, text in texts.items():
        (etc / name).write_text(text)
        shutil.copy2(etc / name, copy / name)  # same bytes, size and modification time
    fe = tmp_path / "fe"
    r = run("pairs", copy, "--index", fe)
    assert r.exit_code == 0 and r.stdout.count("\n") == 2, r.output
    manifest = json.loads((fe / "manifest.json").read_text())
    manifest["stages"]["shingle"]["corpus"] = str(etc)
    (fe / "manifest.json").write_bytes(dump(manifest))  # the checksum made again, as the trial did
    return etc, copy, fe


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_the_forged_index_is_sound_to_check(forged):
    _, _, fe = forged
    assert run("check", "--index", fe).exit_code == 0


def test_dedup_on_the_index_alone_prints_no_absolute_path(forged):
    etc, copy, fe = forged
    r = run("dedup", "--index", fe, "--absolute")
    assert r.exit_code == 2 and r.stdout == "", r.output
    assert "--absolute needs the CORPUS on the command line" in r.stderr
    for fmt in ("tsv", "jsonl"):
        r = run("dedup", "--index", fe, "--absolute", "--format", fmt)
        assert r.exit_code == 2 and r.stdout == "", r.output
    # Without --absolute: ids, relative to whatever corpus it is, which name nothing by themselves.
    # And here none at all: the files the manifest leads to are not the files indexed (other
    # inodes), though they have the same bytes, sizes and times.
    r = run("dedup", "--index", fe)
    assert r.exit_code == 0 and r.stdout == "", r.output
    assert "group: changed or gone since it was indexed, and it is the one to keep" in r.stderr
    assert str(etc) not in r.stdout


def test_dedup_absolute_needs_the_corpus_the_index_was_built_for(forged):
    etc, copy, fe = forged
    # The copy is not the corpus the (forged) index is of: refused, nothing listed.
    r = run("dedup", copy, "--index", fe, "--absolute")
    assert r.exit_code == 4 and r.stdout == "", r.output
    assert f"was built for the corpus {etc}, not {copy}" in r.stderr
    # Naming the folder itself is the user's own choice: then its paths are the ones named.
    r = run("dedup", etc, "--index", fe, "--absolute")
    assert r.exit_code == 0 and r.stdout == f"{etc}/group-\n{etc}/passwd-\n", r.output


def test_dedup_absolute_prints_the_paths_under_the_corpus_named(tmp_path, forged):
    _, copy, _ = forged
    r = run("dedup", copy, "--index", tmp_path / "own", "--absolute")
    assert r.exit_code == 0 and r.stdout == f"{copy}/group-\n{copy}/passwd-\n", r.output


def test_show_on_the_index_alone_reads_nothing(forged):
    etc, copy, fe = forged
    r = run("show", "--index", fe, "passwd", "passwd-")
    assert r.exit_code == 2 and r.stdout == "", r.output
    assert "show reads the two documents from their corpus: name it" in r.stderr
    assert "user1" not in r.output
    r = run("show", copy, "passwd", "passwd-", "--index", fe)
    assert r.exit_code == 4 and r.stdout == "" and f"was built for the corpus {etc}, not {copy}" in r.stderr
