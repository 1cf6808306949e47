"""NUL-separated input and output are two things (issue 17, item 9).

``--files0-from FILE|-`` reads a NUL-separated list (GNU du/wc/sort),
``--files-from`` one name per line, and ``-0``/``--null`` shapes output only
(fd, ripgrep, ``find -print0``).
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import SAMPLE_CORPUS, assert_clean_error, write

from simdoc.cli import cli
from simdoc.corpus.filelists import chosen_list, read_file_list
from simdoc.errors import UsageError

T1 = "The harbour festival opens at dawn with boats, lanterns and a brass band on the pier.\n"
T2 = "Completely unrelated prose about tide tables, cranes, ropes and the price of coal.\n"
SAMPLE_PAIRS = [
    "misc/backup/red-lentil-soup-copy.txt\tmisc/red-lentil-soup.txt\t1.0000\t1.0000",
    "policies/remote-work-policy-2023.txt\tpolicies/remote-work-policy-2024.txt\t0.8594\t0.8905",
    "web/harbor-festival.txt\tweb/mirror-harbor-festival.txt\t0.7656\t0.7334",
    "essays/tide-pools-essay-amara.txt\tessays/tide-pools-essay-brook.txt\t0.6719\t0.6541",
    "news/ferry-strike-coastline-courier.txt\tnews/island-cut-off-valemont-gazette.txt\t0.6484\t0.6313",
]


def invoke(args, data: bytes | str | None = None):
    return CliRunner().invoke(cli, [str(a) for a in args], input=data)


@pytest.fixture
def odd_names(tmp_path) -> tuple[Path, list[Path]]:
    """Two copies whose names a newline list cannot carry, and one unrelated file."""
    root = tmp_path / "odd"
    files = [write(root / "line\nbreak.txt", T1), write(root / " lead and trail ", T1), write(root / "other.txt", T2)]
    return root, files


def nul_list(paths) -> bytes:
    return b"".join(os.fsencode(p) + b"\0" for p in paths)


# ---------------------------------------------------------------- the lists themselves


def test_read_file_list_newlines_and_nuls():
    assert read_file_list(io.BytesIO(b"a.txt\r\n\n  \nb c.txt\n"), nul_separated=False) == ["a.txt", "b c.txt"]
    assert read_file_list(io.BytesIO(b"a\nb\0 \0\0c\xff"), nul_separated=True) == ["a\nb", " ", "c\udcff"]
    with pytest.raises(UsageError, match="--files0-from"):
        read_file_list(io.BytesIO(b"a.txt\0b.txt\0"), nul_separated=False)
    with pytest.raises(UsageError, match="both given"):
        chosen_list(io.BytesIO(b"a\n"), io.BytesIO(b"a\0"))
    assert chosen_list(None, None) is None


# ---------------------------------------------------------------- pairs


def test_find_print0_into_pairs_files0_from(tmp_path):
    """The issue's own line, run by a shell exactly as written."""
    corpus = shutil.copytree(SAMPLE_CORPUS, tmp_path / "sample")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    env.pop("SIMDOC_INDEX", None)
    r = subprocess.run(
        ["bash", "-c", "find . -type f -print0 | simdoc pairs --files0-from - --format tsv"],
        cwd=corpus, env=env, capture_output=True, text=True, timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == SAMPLE_PAIRS


def test_files0_from_keeps_every_name(odd_names, tmp_path):
    root, files = odd_names
    r = invoke(["pairs", "--files0-from", "-", "--index", tmp_path / "idx", "--format", "tsv"], nul_list(files))
    assert r.exit_code == 0, r.stderr
    assert r.stdout == " lead and trail \tline\\nbreak.txt\t1.0000\t1.0000\n"


def test_files0_from_a_file(odd_names, tmp_path):
    root, files = odd_names
    listing = tmp_path / "list0"
    listing.write_bytes(nul_list(files))
    r = invoke(["pairs", "--files0-from", listing, "--index", tmp_path / "idx", "-f", "tsv"])
    assert r.exit_code == 0, r.stderr
    assert len(r.stdout.splitlines()) == 1


def test_null_is_output_only_with_files_from(tmp_path):
    """-0 no longer changes how --files-from is read: the list stays one name per line."""
    a, b = write(tmp_path / "c" / "a.txt", T1), write(tmp_path / "c" / "b.txt", T1)
    r = invoke(["pairs", "--files-from", "-", "-0", "--index", tmp_path / "idx"], f"{a}\n{b}\n")
    assert r.exit_code == 0, r.stderr
    assert r.stdout_bytes == b"a.txt\0b.txt\0" + b"1.0000\0" * 2


def test_nul_list_through_files_from_says_use_files0_from(tmp_path):
    a, b = write(tmp_path / "c" / "a.txt", T1), write(tmp_path / "c" / "b.txt", T1)
    for extra in ([], ["-0"]):  # the old spelling `--files-from - -0` is told where the list went
        r = invoke(["pairs", "--files-from", "-", *extra, "--index", tmp_path / "idx"], nul_list([a, b]))
        assert_clean_error(r, 2, "NUL", "--files0-from")
    assert not (tmp_path / "idx").exists()


@pytest.mark.parametrize("command", ["shingle", "pairs", "clusters", "dedup", "query"])
def test_files_from_and_files0_from_together_is_a_usage_error(command, tmp_path):
    listing = tmp_path / "list"
    listing.write_text("x.txt\n")
    r = invoke([command, "--files-from", listing, "--files0-from", listing, "--index", tmp_path / "idx"])
    assert_clean_error(r, 2, "--files-from and --files0-from")


@pytest.mark.parametrize("command", ["shingle", "pairs", "clusters", "dedup"])
def test_every_command_with_files_from_takes_files0_from(command, odd_names, tmp_path):
    root, files = odd_names
    idx = tmp_path / "idx"
    r = invoke([command, "--files0-from", "-", "--index", idx], nul_list(files))
    assert r.exit_code == 0, r.stderr
    listed = invoke(["clusters", "--index", idx])
    assert listed.stdout == "1\t2\t lead and trail \tline\\nbreak.txt\n"


def test_empty_files0_from_is_reported_under_its_own_name(tmp_path):
    r = invoke(["pairs", "--files0-from", "-", "--index", tmp_path / "idx"], b"")
    assert r.exit_code != 0 and "Traceback" not in r.stderr
    assert "--files0-from" in r.stderr


# ---------------------------------------------------------------- a stale list (issue 27, item 4)


@pytest.mark.parametrize("flag", ["--files-from", "--files0-from"])
@pytest.mark.parametrize("command", ["pairs", "clusters", "dedup", "shingle"])
def test_a_listed_file_that_is_gone_is_skipped_with_a_warning(command, flag, tmp_path):
    """As a file that vanishes during a folder walk: a warning and a count, and the answer."""
    a, b = write(tmp_path / "c" / "a" / "x.txt", T1), write(tmp_path / "c" / "a" / "y.txt", T1)
    gone = tmp_path / "c" / "b" / "gone.txt"  # its folder is gone too
    sep = "\0" if flag == "--files0-from" else "\n"
    listing = "".join(f"{p}{sep}" for p in (a, gone, b))
    idx = tmp_path / "idx"
    r = invoke([command, flag, "-", "--index", idx], listing.encode())
    assert r.exit_code == 0, r.stderr
    assert "warning: b/gone.txt: no such file, skipped" in r.stderr
    if command == "pairs":
        # The ids stay relative to the folder of every name listed: those of the night before.
        assert r.stdout == "a/x.txt\ta/y.txt\t1.0000\t1.0000\n"
        assert "2 documents (1 file skipped)" in r.stderr
    quiet = invoke(["pairs", flag, "-", "--index", idx, "-q"], listing.encode())
    assert quiet.exit_code == 0, quiet.stderr
    assert "1 file skipped" in quiet.stderr
    listed = invoke(["stats", "--index", idx, "--skipped"])
    assert listed.stdout == "b/gone.txt\tno such file, skipped\n"


def test_a_list_of_only_gone_files_has_no_documents(tmp_path):
    r = invoke(["pairs", "--files-from", "-", "--index", tmp_path / "idx"], f"{tmp_path / 'gone.txt'}\n")
    assert_clean_error(r, 3, "no documents")
    assert "warning: gone.txt: no such file, skipped" in r.stderr


def test_a_corpus_named_on_the_command_line_must_exist(tmp_path):
    """A name typed is not a stale list: still an error (exit 3), as is a list that cannot be read."""
    a = write(tmp_path / "c" / "a.txt", T1)
    r = invoke(["pairs", a, tmp_path / "c" / "typo.txt", "--index", tmp_path / "idx"])
    assert_clean_error(r, 3, "typo.txt does not exist")
    r = invoke(["pairs", "--files-from", tmp_path / "no-such-list", "--index", tmp_path / "idx"])
    assert r.exit_code == 2 and "no-such-list" in r.stderr and "Traceback" not in r.stderr


def test_shingle_null_points_to_files0_from(odd_names, tmp_path):
    root, files = odd_names
    r = invoke(["shingle", "--files-from", "-", "-0", "--index", tmp_path / "idx"], nul_list(files))
    assert_clean_error(r, 2, "--files0-from")


# ---------------------------------------------------------------- query


@pytest.fixture
def sample_index(tmp_path) -> Path:
    idx = tmp_path / "sample.idx"
    r = invoke(["pairs", SAMPLE_CORPUS, "--index", idx])
    assert r.exit_code == 0, r.stderr
    return idx


def test_query_files0_from_and_null_output(sample_index):
    soup = SAMPLE_CORPUS / "misc" / "red-lentil-soup.txt"
    r = invoke(["query", "--files0-from", "-", "--index", sample_index, "-0"], nul_list([soup]))
    assert r.exit_code == 0, r.stderr
    q = os.fsencode(soup)
    assert r.stdout_bytes == (
        q + b"\0misc/backup/red-lentil-soup-copy.txt\x001.0000\x001.0000\0"
        + q + b"\0misc/red-lentil-soup.txt\x001.0000\x001.0000\0"
    )
    # Newline list, NUL output: the two are independent.
    r2 = invoke(["query", "--files-from", "-", "--index", sample_index, "-0"], f"{soup}\n")
    assert r2.stdout_bytes == r.stdout_bytes
    both = invoke(["query", soup, "--index", sample_index, "-0", "--format", "tsv"])
    assert_clean_error(both, 2, "--null and --format")


# ---------------------------------------------------------------- clusters -0


def test_clusters_null_fields(odd_names, tmp_path):
    root, files = odd_names
    write(root / os.fsdecode(b"x\xff.txt"), T2)
    idx = tmp_path / "idx"
    r = invoke(["clusters", root, "--index", idx, "-0"])
    assert r.exit_code == 0, r.stderr
    assert r.stdout_bytes == b"1\x002\0 lead and trail \0line\nbreak.txt\0" + b"2\x002\0other.txt\0x\xff.txt\0"
    assert_clean_error(invoke(["clusters", "--index", idx, "-0", "--format", "jsonl"]), 2, "--null and --format")


def test_clusters_null_can_be_read_back_by_bash(odd_names, tmp_path):
    """The documented way to read `clusters -0`: id, size, then size members."""
    root, files = odd_names
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    env.pop("SIMDOC_INDEX", None)
    script = (
        "simdoc clusters \"$1\" --index \"$2\" -0 | "
        "while IFS= read -r -d '' id && IFS= read -r -d '' size; do "
        "for ((i = 0; i < size; i++)); do IFS= read -r -d '' m; printf '%s [%s]\\n' \"$id\" \"$m\"; done; done"
    )
    r = subprocess.run(
        ["bash", "-c", script, "bash", str(root), str(tmp_path / "idx")], env=env, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == "1 [ lead and trail ]\n1 [line\nbreak.txt]\n"


def test_dedup_paths_are_raw_bytes_in_a_strict_utf8_locale(tmp_path):
    """A non-UTF-8 name goes to `xargs rm` as its bytes, whatever the locale's error handler."""
    root = tmp_path / "c"
    write(root / os.fsdecode(b"z\xff.txt"), T1)
    write(root / "b.txt", T1)
    env = dict(os.environ, PYTHONIOENCODING="utf-8:strict", XDG_CACHE_HOME=str(tmp_path / "cache"))
    env.pop("SIMDOC_INDEX", None)
    for flags, expected in (
        (["-0"], b"z\xff.txt\0"),
        ([], b"z\xff.txt\n"),
        (["--absolute"], os.fsencode(root) + b"/z\xff.txt\n"),
    ):
        r = subprocess.run(
            [sys.executable, "-m", "simdoc", "dedup", str(root), *flags], env=env, capture_output=True, timeout=300
        )
        assert r.returncode == 0, r.stderr
        assert r.stdout == expected


# ---------------------------------------------------------------- property: every name comes back

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

# A path is any bytes but NUL.
NAMES = st.binary(min_size=1, max_size=40).filter(lambda b: b"\0" not in b)


@given(st.lists(NAMES, max_size=20), st.booleans())
def test_property_files0_from_gives_back_every_name(names, trailing):
    data = b"\0".join(names) + (b"\0" if trailing and names else b"")
    assert [os.fsencode(n) for n in read_file_list(io.BytesIO(data), nul_separated=True)] == names


@given(st.lists(NAMES.filter(lambda b: b"\n" not in b and not b.endswith(b"\r") and b.strip()), max_size=20))
def test_property_files_from_gives_back_every_name_without_a_line_break(names):
    data = b"".join(n + b"\n" for n in names)
    assert [os.fsencode(n) for n in read_file_list(io.BytesIO(data), nul_separated=False)] == names
