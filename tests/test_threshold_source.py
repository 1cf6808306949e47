"""Issue 27.1: a command without --threshold works at the index's threshold, never silently at the default.

Every command that takes --threshold (pairs, clusters, dedup, query, index)
decides it in one place, simdoc.params.choose_threshold: the one asked, else
the one the index was banded for, else the documented default, which the
summary then names ("the default"). A stored threshold, or a banding chosen by
hand, is never changed unless asked for.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simdoc import params
from simdoc.params import DEFAULT_BAG_THRESHOLD, DEFAULT_THRESHOLD, PairsParams
from tests.conftest import SAMPLE_CORPUS

# The planted pairs of sample_corpus (README), by exact set Jaccard.
COPY = "misc/backup/red-lentil-soup-copy.txt\tmisc/red-lentil-soup.txt\t1.0000\t1.0000\n"
POLICY = "policies/remote-work-policy-2023.txt\tpolicies/remote-work-policy-2024.txt\t0.8594\t0.8905\n"  # J 0.89
HARBOR = "web/harbor-festival.txt\tweb/mirror-harbor-festival.txt\t0.7656\t0.7334\n"  # J 0.73


def index_stage_params(idx) -> dict:
    return json.loads((idx / "manifest.json").read_text())["stages"]["index"]["params"]


@pytest.fixture
def staged(run, tmp_path):
    """An index built stage by stage, banded with `simdoc index --threshold 0.95`."""
    idx = tmp_path / "dd.idx"
    assert run("shingle", SAMPLE_CORPUS, "--index", idx, "-q").exit_code == 0
    assert run("signature", "--index", idx, "-q").exit_code == 0
    r = run("index", "--index", idx, "--threshold", "0.95")
    assert r.exit_code == 0, r.stderr
    assert "default" not in r.stderr
    return idx


def test_dedup_after_index_lists_only_what_the_stored_threshold_allows(run, staged):
    before = index_stage_params(staged)
    r = run("dedup", "--index", staged)
    assert r.exit_code == 0, r.stderr
    # What would reach `xargs rm`: the one exact copy, not the five files of J >= 0.6.
    assert r.stdout == "misc/red-lentil-soup.txt\n"
    assert "(set jaccard >= 0.95, --keep first)" in r.stderr
    assert index_stage_params(staged) == before  # the stored threshold is not changed
    r0 = run("dedup", SAMPLE_CORPUS, "--index", staged, "-0", "--absolute")  # --absolute needs the CORPUS
    assert r0.stdout == str(SAMPLE_CORPUS / "misc/red-lentil-soup.txt") + "\0"


def test_clusters_and_query_after_index_use_the_stored_threshold(run, staged):
    c = run("clusters", "--index", staged)
    assert c.exit_code == 0, c.stderr
    assert c.stdout == "1\t2\tmisc/backup/red-lentil-soup-copy.txt\tmisc/red-lentil-soup.txt\n"
    assert "(set jaccard >= 0.95)" in c.stderr
    q = run("query", SAMPLE_CORPUS / "policies/remote-work-policy-2023.txt", "--index", staged, "-f", "tsv")
    assert q.exit_code == 0, q.stderr
    query = str(SAMPLE_CORPUS / "policies/remote-work-policy-2023.txt")
    assert q.stdout == f"{query}\tpolicies/remote-work-policy-2023.txt\t1.0000\t1.0000\n"  # not the 2024 one (J 0.89)
    assert "(set jaccard >= 0.95)" in q.stderr
    # Asked for, another threshold is used (and the index re-banded for it).
    c8 = run("clusters", "--index", staged, "-t", "0.8")
    assert c8.stdout.count("\n") == 2 and index_stage_params(staged)["threshold"] == 0.8


def test_pairs_then_pairs_keeps_the_threshold_of_the_first_run(run, tmp_path):
    idx = tmp_path / "t1.idx"
    first = run("pairs", SAMPLE_CORPUS, "--index", idx, "-t", "0.8")
    assert first.exit_code == 0, first.stderr
    assert first.stdout == COPY + POLICY
    again = run("pairs", "--index", idx)
    assert again.exit_code == 0, again.stderr
    assert again.stdout == COPY + POLICY
    assert "(set jaccard >= 0.8)" in again.stderr
    with_corpus = run("pairs", SAMPLE_CORPUS, "--index", idx)
    assert with_corpus.stdout == COPY + POLICY
    # `query` afterwards still works at 0.8: the harbor festival's mirror (J 0.73) is no match.
    harbor = SAMPLE_CORPUS / "web/harbor-festival.txt"
    q = run("query", harbor, "--index", idx, "-f", "tsv")
    assert q.exit_code == 0, q.stderr
    assert q.stdout == f"{harbor}\tweb/harbor-festival.txt\t1.0000\t1.0000\n"
    assert index_stage_params(idx)["threshold"] == 0.8


def test_the_default_is_named_on_stderr_and_quiet_with_q(run, tmp_path):
    idx = tmp_path / "idx"
    r = run("pairs", SAMPLE_CORPUS, "--index", idx)
    assert r.exit_code == 0
    assert r.stdout == COPY + POLICY + "".join(r.stdout.splitlines(True)[2:])  # the README's five
    assert len(r.stdout.splitlines()) == 5
    assert "(set jaccard >= 0.6, the default)" in r.stderr
    # The default is now the index's own: not "the default" any more.
    again = run("pairs", "--index", idx)
    assert "(set jaccard >= 0.6) in" in again.stderr
    assert run("pairs", SAMPLE_CORPUS, "--index", tmp_path / "q", "-q").stderr == ""


def test_index_without_threshold_names_the_default_and_keeps_a_stored_one(run, tmp_path):
    idx = tmp_path / "idx"
    assert run("shingle", SAMPLE_CORPUS, "--index", idx, "-q").exit_code == 0
    assert run("signature", "--index", idx, "-q").exit_code == 0
    r = run("index", "--index", idx)
    assert r.exit_code == 0
    assert "banded for the default 0.6" in r.stderr
    assert run("index", "--index", idx, "-q").stderr == ""
    assert run("index", "--index", idx, "-t", "0.9").exit_code == 0
    kept = run("index", "--index", idx)
    assert "default" not in kept.stderr and "up to date" in kept.stderr
    assert index_stage_params(idx)["threshold"] == 0.9


def test_a_hand_banding_is_kept_and_holds_no_threshold_but_its_own(run, tmp_path):
    """Bands and rows chosen by hand stay; without -t they hold no threshold (the midpoint
    (1/b)^(1/r) is none), so the default is used and named (issue 17.3)."""
    idx = tmp_path / "idx"
    assert run("shingle", SAMPLE_CORPUS, "--index", idx, "-q").exit_code == 0
    assert run("signature", "--index", idx, "-q").exit_code == 0
    assert run("index", "--index", idx, "--bands", "20", "--rows", "5").exit_code == 0
    held = index_stage_params(idx)
    for cmd in ("pairs", "clusters", "dedup"):
        r = run(cmd, "--index", idx)
        assert r.exit_code == 0, r.stderr
        assert "set jaccard >= 0.6, the default" in r.stderr, (cmd, r.stderr)
        assert index_stage_params(idx) == held, cmd
    # With a threshold given alongside, the hand banding holds that one.
    assert run("index", "--index", idx, "--bands", "20", "--rows", "5", "-t", "0.85").exit_code == 0
    p = run("pairs", "--index", idx)
    assert p.stdout == COPY + POLICY and "(set jaccard >= 0.85)" in p.stderr
    assert (index_stage_params(idx)["bands"], index_stage_params(idx)["rows"]) == (20, 5)


def test_pairs_with_a_hand_banding_and_no_threshold_records_none(run, tmp_path):
    """As `simdoc index --bands --rows` does (above): `pairs --bands --rows` without -t recorded
    the default 0.6 as the index's own threshold, and later runs no longer said "the default"."""
    idx = tmp_path / "idx"
    for args in ((SAMPLE_CORPUS, "--bands", "20", "--rows", "5"), ()):
        r = run("pairs", *args, "--index", idx)
        assert r.exit_code == 0, r.stderr
        assert "set jaccard >= 0.6, the default" in r.stderr, r.stderr
    held = index_stage_params(idx)
    assert (held["bands"], held["rows"]) == (20, 5) and params.index_threshold(held, "set") is None


def test_pairs_with_bands_and_rows_keeps_the_stored_threshold(run, tmp_path):
    idx = tmp_path / "idx"
    assert run("pairs", SAMPLE_CORPUS, "--index", idx, "-t", "0.8", "-q").exit_code == 0
    r = run("pairs", "--index", idx, "--bands", "16", "--rows", "8")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == COPY + POLICY and "(set jaccard >= 0.8)" in r.stderr
    held = index_stage_params(idx)
    assert (held["bands"], held["rows"], held["threshold"]) == (16, 8, 0.8)
    assert run("pairs", "--index", idx).stdout == COPY + POLICY
    assert index_stage_params(idx) == held


def test_a_bag_threshold_is_kept_for_bag_runs(run, tmp_path):
    idx = tmp_path / "idx"
    assert run("pairs", SAMPLE_CORPUS, "--index", idx, "--measure", "bag", "-t", "0.45", "-q").exit_code == 0
    r = run("pairs", "--index", idx, "--measure", "bag")
    assert r.exit_code == 0
    assert "(bag jaccard >= 0.45)" in r.stderr


# ---------------------------------------------------------------- the one place


stored_params = st.one_of(
    st.none(),
    st.builds(
        lambda t, explicit, measure, bag: {
            "bands": 13, "rows": 7, "threshold": t, "explicit": explicit, "measure": measure,
            **({"bag_threshold": bag} if measure == "bag" else {}),
        },
        st.floats(0.01, 1.0), st.booleans(), st.sampled_from(["set", "bag"]), st.floats(0.01, 0.5),
    ),
)


@given(
    asked=st.one_of(st.none(), st.floats(0.01, 0.5)),
    measure=st.sampled_from(["set", "bag"]),
    stored=stored_params,
)
def test_choose_threshold_asked_else_the_indexs_else_the_default(asked, measure, stored):
    chosen = params.choose_threshold(asked, measure, stored)
    if asked is not None:
        assert (chosen.value, chosen.source) == (asked, "asked")
    elif stored is not None and stored["measure"] == measure:
        held = stored["bag_threshold"] if measure == "bag" else stored["threshold"]
        assert (chosen.value, chosen.source) == (held, "index")
        assert "default" not in chosen.describe()
    else:
        assert chosen.value == (DEFAULT_THRESHOLD if measure == "set" else DEFAULT_BAG_THRESHOLD)
        assert chosen.source == "default" and chosen.describe().endswith(", the default")
    resolved = PairsParams(threshold=asked, measure=measure).resolved(stored)
    assert resolved.cut == chosen.value and resolved.chosen == chosen


def test_a_hand_bandings_midpoint_is_no_threshold():
    midpoint = round((1 / 20) ** (1 / 5), 6)
    hand = {"bands": 20, "rows": 5, "threshold": midpoint, "explicit": True, "measure": "set"}
    assert params.choose_threshold(None, "set", hand).source == "default"
    assert params.choose_threshold(None, "set", {**hand, "threshold": 0.7}).value == 0.7


def test_a_smaller_num_perm_bands_again_for_the_stored_threshold(run, tmp_path):
    idx = tmp_path / "idx"
    assert run("pairs", SAMPLE_CORPUS, "--index", idx, "-t", "0.8", "-q").exit_code == 0
    r = run("pairs", SAMPLE_CORPUS, "--index", idx, "--num-perm", "32", "--rebuild")
    assert r.exit_code == 0, r.stderr
    assert "(set jaccard >= 0.8)" in r.stderr
    held = index_stage_params(idx)
    assert held["threshold"] == 0.8 and held["bands"] * held["rows"] <= 32
