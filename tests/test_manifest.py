"""store.manifest: a damaged manifest is refused on load, as one error line, never a traceback."""

from __future__ import annotations

import re
import shutil
import tempfile
import zlib
from pathlib import Path

import pytest
from conftest import TEXT_A, TEXT_C
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

_CHECKSUM_AT = re.compile(rb'"checksum": "([0-9a-f]{8})"')


def reseal(raw: bytes) -> bytes:
    """The manifest's bytes with the checksum made to match them again (if the checksum is still there)."""
    m = _CHECKSUM_AT.search(raw)
    if m is None:
        return raw
    zeroed = raw[: m.start(1)] + b"00000000" + raw[m.end(1) :]
    return raw[: m.start(1)] + f"{zlib.crc32(zeroed):08x}".encode() + raw[m.end(1) :]


@pytest.fixture(scope="module")
def sealed(tmp_path_factory):
    """A built index (copied per example), its manifest's bytes, and what `pairs --index` printed."""
    from click.testing import CliRunner

    from simdoc.cli import cli

    root = tmp_path_factory.mktemp("sealed")
    for name, text in (("a.txt", TEXT_A), ("b.txt", TEXT_A + " and more"), ("c.txt", TEXT_C)):
        (root / "c").mkdir(exist_ok=True)
        (root / "c" / name).write_text(text)
    idx = root / "idx"
    r = CliRunner().invoke(cli, ["pairs", str(root / "c"), "--index", str(idx), "-q", "-j", "1", "--threshold", "0.5"])
    assert r.exit_code == 0 and r.stdout, r.stderr
    return idx, (idx / "manifest.json").read_bytes(), r.stdout


def _flipped_outcomes(idx: Path, raw: bytes) -> list:
    from click.testing import CliRunner

    from simdoc.cli import cli

    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "idx"
        shutil.copytree(idx, copy)
        (copy / "manifest.json").write_bytes(raw)
        return [
            CliRunner().invoke(cli, [*args, "--index", str(copy)])
            for args in (("check",), ("pairs", "-j", "1"))
        ]


def _assert_one_line_error_or_harmless(result, allow_ok: bool) -> None:
    assert "Traceback" not in result.output and "Traceback" not in result.stderr, result.stderr
    assert result.exit_code in ((0, 4) if allow_ok else (4,)), (result.exit_code, result.stderr, result.exception)
    if result.exit_code == 4:
        assert len([ln for ln in result.stderr.splitlines() if ln.startswith("Error:")]) == 1, result.stderr


def test_every_single_byte_flip_of_a_manifest_is_refused_on_load(sealed):
    from simdoc.errors import IndexError_
    from simdoc.store.directory import IndexStore

    idx, raw, _ = sealed
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "idx"
        shutil.copytree(idx, copy)
        for pos in range(len(raw)):
            for mask in (0x01, 0x20, 0x80):
                (copy / "manifest.json").write_bytes(raw[:pos] + bytes([raw[pos] ^ mask]) + raw[pos + 1 :])
                with pytest.raises(IndexError_):
                    IndexStore(copy).read_manifest()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.floats(0, 1, exclude_max=True), mask=st.integers(1, 255), fixed=st.booleans())
def test_a_flipped_manifest_byte_is_one_error_line_never_a_traceback(sealed, where, mask, fixed):
    idx, raw, before = sealed
    pos = int(where * len(raw))
    damaged = raw[:pos] + bytes([raw[pos] ^ mask]) + raw[pos + 1 :]
    if fixed:
        # Damage that keeps valid JSON and a valid checksum: the schema must catch it, or it is harmless.
        damaged = reseal(damaged)
    for result in _flipped_outcomes(idx, damaged):
        _assert_one_line_error_or_harmless(result, allow_ok=fixed)


@pytest.mark.parametrize(
    "key", [b'"stages"', b'"n_docs"', b'"roles"', b'"files"', b'"params"', b'"built_from"', b'"bands"', b'"shape"', b'"num_perm"']
)
def test_a_damaged_key_name_with_a_matching_checksum_is_refused(sealed, key):
    idx, raw, _ = sealed
    pos = raw.index(key) + 2
    damaged = reseal(raw[:pos] + bytes([raw[pos] ^ 0x01]) + raw[pos + 1 :])
    for result in _flipped_outcomes(idx, damaged):
        _assert_one_line_error_or_harmless(result, allow_ok=False)


def test_a_manifest_damaged_in_its_blanks_is_refused(sealed):
    idx, raw, _ = sealed
    pos = raw.index(b"\n  ")
    damaged = raw[:pos] + b"\t" + raw[pos + 1 :]  # still valid JSON, same content
    for result in _flipped_outcomes(idx, damaged):
        _assert_one_line_error_or_harmless(result, allow_ok=False)
