"""The full code-point table is built once and kept: each forked worker loads it instead of building it."""

import os

import numpy as np
import pytest

from simdoc import bytesign, kernels

pytestmark = pytest.mark.skipif(not kernels.ENABLED, reason="numba disabled by SIMDOC_NO_NUMBA")


@pytest.fixture
def kept(tmp_path, monkeypatch):
    """The table kept in tmp_path (one file per lowercase, unicode), the in-process cache emptied before and after."""
    monkeypatch.setattr(bytesign, "table_file", lambda lowercase, unicode: str(tmp_path / f"t-{lowercase}-{unicode}.npy"))
    bytesign.code_point_table.cache_clear()
    yield tmp_path
    bytesign.code_point_table.cache_clear()


def built(lowercase, unicode):
    return bytesign._built_table(lowercase, unicode, bytesign._BMP)


def refuse_to_build(monkeypatch):
    def fail(*args):
        raise AssertionError("built again")

    monkeypatch.setattr(bytesign, "_built_table", fail)


@pytest.mark.parametrize(("lowercase", "unicode"), [(True, "NFC"), (False, "NFKC"), (True, "none")])
def test_a_process_loads_the_table_another_built(kept, monkeypatch, lowercase, unicode):
    want = built(lowercase, unicode)
    assert bytesign.code_point_table(lowercase, unicode).tolist() == want.tolist()
    assert os.listdir(kept) == [f"t-{lowercase}-{unicode}.npy"]  # whole: no temporary file left
    bytesign.code_point_table.cache_clear()  # as a new process (a forked worker that did not inherit it)
    refuse_to_build(monkeypatch)
    assert bytesign.code_point_table(lowercase, unicode).tolist() == want.tolist()


def test_each_kind_of_table_has_its_own_file():
    names = {bytesign.table_file(lc, u) for lc in (True, False) for u in ("NFC", "NFKC", "none")}
    if None in names:
        pytest.skip("no cache folder for compiled kernels here")
    assert len(names) == 6


@pytest.mark.parametrize(
    "damage",
    [
        lambda path: open(path, "wb").write(open(path, "rb").read()[:1000]),  # cut short
        lambda path: np.save(path, np.zeros(10, np.uint32)),  # not a whole table
        lambda path: np.save(path, np.zeros(bytesign._BMP, np.int64)),  # not its type
        lambda path: open(path, "wb").write(b"not a table"),
    ],
)
def test_a_damaged_table_file_is_built_again(kept, damage):
    want = built(True, "NFC")
    bytesign.code_point_table(True, "NFC")
    damage(str(kept / "t-True-NFC.npy"))
    bytesign.code_point_table.cache_clear()
    assert bytesign.code_point_table(True, "NFC").tolist() == want.tolist()
    bytesign.code_point_table.cache_clear()  # and kept whole again
    assert bytesign._load_table(str(kept / "t-True-NFC.npy")).tolist() == want.tolist()


def test_an_unwritable_cache_folder_only_costs_the_build(tmp_path, monkeypatch):
    monkeypatch.setattr(bytesign, "table_file", lambda lowercase, unicode: str(tmp_path / "no-such-folder" / "t.npy"))
    bytesign.code_point_table.cache_clear()
    try:
        assert bytesign.code_point_table(True, "NFC").tolist() == built(True, "NFC").tolist()
    finally:
        bytesign.code_point_table.cache_clear()
    assert not (tmp_path / "no-such-folder").exists()


def test_the_ascii_table_is_never_kept(kept):
    assert bytesign.code_point_table(True, "NFC", True).tolist() == built(True, "NFC")[:128].tolist()
    assert os.listdir(kept) == []
