"""A damaged .npy header is a damaged index file (exit 4), never a crash of numpy's header parser.

numpy parses a .npy header with Python's tokenizer and ``ast.literal_eval``:
one flipped bit there raised tokenize.TokenError or SyntaxError through every
command, `check` included (issue 28, item 4). Every single-bit flip of the
header of an index file is tried on the loader; the commands on a sample.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from conftest import SAMPLE_CORPUS

HEADER = 128  # the fixed header simdoc writes (store.npyfiles._NPY_HEADER)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    from click.testing import CliRunner

    from simdoc.cli import cli

    root = tmp_path_factory.mktemp("headers")
    corpus = root / "corpus"
    shutil.copytree(SAMPLE_CORPUS, corpus)
    result = CliRunner().invoke(cli, ["pairs", str(corpus), "--index", str(root / "idx"), "-q"])
    assert result.exit_code == 0, result.output
    return root


def _entry(index: Path, prefix: str) -> tuple[str, dict]:
    manifest = json.loads((index / "manifest.json").read_text())
    for stage in manifest["stages"].values():
        for name, info in stage.get("files", {}).items():
            if name.startswith(prefix):
                return name, info
    raise AssertionError(prefix)


@pytest.mark.parametrize("prefix", ["signatures.", "docs.key.offsets."])
def test_every_single_bit_flip_of_a_header_is_refused_or_harmless(built, tmp_path, prefix):
    from simdoc.errors import CorruptIndex
    from simdoc.store import npyfiles
    from simdoc.store.directory import IndexStore

    index = tmp_path / "idx"
    shutil.copytree(built / "idx", index)
    name, info = _entry(index, prefix)
    path = index / name
    pristine = path.read_bytes()
    store = IndexStore(index)
    expected = np.array(store.load_array(name, info, force=True))
    refused = 0
    for byte in range(HEADER):
        for bit in range(8):
            damaged = bytearray(pristine)
            damaged[byte] ^= 1 << bit
            path.write_bytes(bytes(damaged))
            npyfiles.VERIFIED.clear()
            for mmap in (True, False):
                try:
                    arr = store.load_array(name, info, mmap=mmap, force=True)
                except CorruptIndex as exc:
                    assert str(path) in exc.message
                    refused += 1
                    continue
                # A flip that leaves the same meaning ('<u4' read as '=u4') is harmless: the very array.
                assert arr.dtype == expected.dtype and arr.shape == expected.shape, (byte, bit)
                assert np.array_equal(np.asarray(arr), expected), (byte, bit)
                del arr
    assert refused > 2 * 8 * HEADER * 0.9


def test_a_fortran_ordered_header_is_damage_not_a_transposed_array(built, tmp_path):
    """A header saying Fortran order, with the right dtype and shape, would read the rows transposed."""
    from simdoc.errors import CorruptIndex
    from simdoc.store.directory import IndexStore

    index = tmp_path / "idx"
    shutil.copytree(built / "idx", index)
    name, info = _entry(index, "signatures.")
    path = index / name
    data = path.read_bytes()
    assert b"'fortran_order': False, " in data[:HEADER]
    path.write_bytes(data[:HEADER].replace(b"'fortran_order': False, ", b"'fortran_order': True,  ") + data[HEADER:])
    with pytest.raises(CorruptIndex, match="Fortran"):
        IndexStore(index).load_array(name, info, force=True)


# A sample of flips that made numpy's parser raise something other than ValueError (byte, bit).
CRASHERS = [(20, 1), (60, 2), (90, 5), (126, 6)]


@pytest.mark.parametrize("byte,bit", CRASHERS)
@pytest.mark.parametrize("prefix", ["signatures.", "docs.key.offsets."])
def test_every_command_exits_4_on_a_damaged_header(built, tmp_path, run, byte, bit, prefix):
    from conftest import assert_clean_error

    index = tmp_path / "idx"
    shutil.copytree(built / "idx", index)
    name, _ = _entry(index, prefix)
    path = index / name
    data = bytearray(path.read_bytes())
    data[byte] ^= 1 << bit
    path.write_bytes(bytes(data))
    result = run("check", "--index", index)  # check names each problem on stdout, then one Error line
    assert result.exit_code == 4, (result.output, result.exception)
    assert "Traceback" not in result.output
    assert "damaged index file" in result.stdout and str(path) in result.stdout
    assert [ln for ln in result.stderr.splitlines() if ln.startswith("Error:")] == [
        f"Error: the index at {index} is damaged (1 problem)"
    ]
    commands = [["pairs", "--index", index], ["dedup", "--index", index], ["pairs", built / "corpus", "--index", index]]
    for args in commands:
        result = run(*args)
        assert_clean_error(result, 4, "damaged index file", str(path))
        assert len([ln for ln in result.stderr.splitlines() if ln.startswith("Error:")]) == 1, result.stderr
