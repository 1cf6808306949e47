"""A banding chosen for a threshold that no b*r <= num_perm makes a candidate with probability
0.95 (the README's promise) is said on stderr when it is built, as `simdoc tune` says it."""

from conftest import write


def _corpus(root):
    write(root / "a.txt", "the harbour lantern festival returns to port ellery in august\n")
    write(root / "b.txt", "the harbour lantern festival returns to port ellery in july\n")
    return root


def test_a_threshold_the_signature_cannot_reach_is_warned_about_once(run, tmp_path):
    c, idx = _corpus(tmp_path / "c"), tmp_path / "idx"
    r = run("pairs", c, "--index", idx, "-t", "0.5", "--num-perm", "3")
    assert r.exit_code == 0, r.stderr
    assert "bands=3 rows=1, the best for J=0.5 with --num-perm 3" in r.stderr
    assert "probability 0.875, below 0.95: 12% of such pairs are never candidates" in r.stderr
    again = run("pairs", c, "--index", idx, "-t", "0.5")  # buckets up to date: nothing new to say
    assert again.exit_code == 0 and "below 0.95" not in again.stderr


def test_no_warning_where_the_promise_holds_or_bands_are_chosen_by_hand(run, tmp_path):
    c = _corpus(tmp_path / "c")
    assert "below 0.95" not in run("pairs", c, "--index", tmp_path / "i1", "-t", "0.8").stderr
    by_hand = run("pairs", c, "--index", tmp_path / "i2", "-b", "1", "-r", "3", "--num-perm", "3")
    assert by_hand.exit_code == 0 and "below 0.95" not in by_hand.stderr
