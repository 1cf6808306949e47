"""The stage parameters: checked once when made, with the command line's messages; defaults filled in one place."""

import pytest

from simdoc.errors import UsageError
from simdoc.params import (
    DEFAULT_BAG_THRESHOLD,
    DEFAULT_THRESHOLD,
    BandingParams,
    PairsParams,
    Params,
    ShingleParams,
    SignatureParams,
)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: PairsParams(threshold=1.5), "--threshold must be in (0, 1], got 1.5"),
        (lambda: PairsParams(threshold=0), "--threshold must be in (0, 1], got 0"),
        (lambda: PairsParams(threshold=0.7, measure="bag"), "bag Jaccard is at most 0.5 (identical bags), so --threshold 0.7"),
        (lambda: PairsParams(measure="cosine"), "--measure must be one of set, bag, got 'cosine'"),
        (lambda: BandingParams(bands=4), "--bands and --rows go together"),
        (lambda: BandingParams(bands=0, rows=3), "--bands and --rows must be at least 1, got --bands 0 --rows 3"),
        (lambda: BandingParams(threshold=-0.1), "--threshold must be in (0, 1], got -0.1"),
        (lambda: ShingleParams(max_bytes=0), "--max-bytes must be at least 1, got 0"),
        (lambda: ShingleParams(unit="line"), "unknown shingle unit 'line'"),
        (lambda: ShingleParams(k=0), "k must be between 1 and 256, got 0"),
        (lambda: SignatureParams(num_perm=0), "num_perm must be a whole number from 1 to 65536, got 0"),
        (lambda: SignatureParams(seed=-1), "seed must be a whole number from 0 to 2**64-1, got -1"),
        (lambda: SignatureParams(scheme="simhash"), "scheme must be one of classic, oph, got 'simhash'"),
    ],
)
def test_a_bad_value_is_refused_when_the_parameters_are_made(make, message):
    with pytest.raises(UsageError) as err:
        make()
    assert message in str(err.value)


def test_the_pairs_threshold_defaults_by_measure_and_bag_bands_at_its_set_equivalent():
    assert PairsParams().cut == DEFAULT_THRESHOLD == PairsParams().banding_threshold
    bag = PairsParams(measure="bag")
    assert bag.cut == DEFAULT_BAG_THRESHOLD
    assert bag.banding_threshold == pytest.approx(DEFAULT_BAG_THRESHOLD / (1 - DEFAULT_BAG_THRESHOLD))
    assert PairsParams(threshold=0.5, measure="bag").banding_threshold == 1.0  # identical bags only


def test_unasked_parameters_come_from_the_index_then_the_defaults():
    stored = {"unit": "word", "k": 4, "lowercase": False, "include": ["*.md"], "text_field": "body", "max_bytes": 10}
    got = ShingleParams().resolved(stored)
    assert (got.unit, got.k, got.lowercase, got.include, got.text_field, got.max_bytes) == ("word", 4, False, ("*.md",), "body", 10)
    # k is the index's only for the index's unit.
    assert ShingleParams(unit="char").resolved(stored).k == 5
    assert ShingleParams(k=7).resolved(stored).k == 7
    fresh = ShingleParams().resolved(None)
    assert (fresh.unit, fresh.k, fresh.lowercase, fresh.follow_symlinks, fresh.text_field) == ("char", 5, True, False, "text")
    assert SignatureParams().resolved(None).manifest() == {"num_perm": 128, "seed": 1, "scheme": "oph"}
    assert SignatureParams(seed=3).resolved({"num_perm": 64, "seed": 1, "scheme": "classic"}).manifest() == {
        "num_perm": 64,
        "seed": 3,
        "scheme": "classic",
    }


def test_globs_are_a_set_and_asked_values_read_as_the_manifest_keeps_them():
    p = ShingleParams(include=["b/*", "a/*", "b/*"], exclude=[])
    assert p.include == ("a/*", "b/*") and p.exclude is None
    assert p.asked() == {"include": ["a/*", "b/*"]}
    assert p.resolved().manifest()["include"] == ["a/*", "b/*"]
    assert p.resolved().manifest()["exclude"] == []


def test_params_of_the_flags_of_pairs_go_to_their_stage():
    p = Params.of({"threshold": 0.8, "k": 7, "num_perm": 64, "bands": None, "rows": None, "measure": "set"})
    assert p.pairs.threshold == 0.8 and p.banding.threshold is None  # --threshold is the pairs'
    assert p.shingle.k == 7 and p.signature.num_perm == 64
    with pytest.raises(TypeError, match="threshhold"):
        Params.of({"threshhold": 0.8})
