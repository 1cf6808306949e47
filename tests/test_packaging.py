"""The package metadata: what `make run` and `pip install .` see."""

from __future__ import annotations

import re

import pytest
from conftest import REPO

tomllib = pytest.importorskip("tomllib")  # Python 3.11+


def _pyproject() -> dict:
    with (REPO / "pyproject.toml").open("rb") as fh:
        return tomllib.load(fh)


def test_license_is_an_spdx_expression_and_setuptools_can_read_it():
    # Issue 17.15: the TOML-table form made setuptools print a deprecation banner on every install.
    meta = _pyproject()
    assert meta["project"]["license"] == "MIT"
    floors = [r for r in meta["build-system"]["requires"] if r.startswith("setuptools")]
    assert len(floors) == 1
    m = re.fullmatch(r"setuptools>=(\d+)(\.\d+)*", floors[0].replace(" ", ""))
    assert m and int(m.group(1)) >= 77, floors  # 77.0: the first setuptools that takes the SPDX form
