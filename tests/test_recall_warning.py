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


def test_buckets_that_hold_pairs_by_the_square_of_the_documents_are_said_before_they_are_verified(run, tmp_path, monkeypatch):
    """-t 0.001 is valid, and over texts that share common words nearly every pair is a candidate:
    10^4 documents make ~5*10^7 pairs to read again. The build says how many the buckets hold
    before verifying them (scaled down here: 20 documents, 190 pairs); a usual corpus is not
    warned about (c100k at 0.8: ~1 candidate a document)."""
    import simdoc.stages.index as index_stage

    monkeypatch.setattr(index_stage, "MANY_CANDIDATES", 150)
    monkeypatch.setattr(index_stage, "MANY_A_DOCUMENT", 5)
    c = tmp_path / "c"
    for i in range(20):
        write(c / f"d{i:02d}.txt", f"the harbour lantern festival returns to port ellery in august, year {i}\n")
    low = run("pairs", c, "--index", tmp_path / "i1", "-t", "0.001")
    assert low.exit_code == 0 and low.stdout.count("\n") == 190, low.stderr
    said = [ln for ln in low.stderr.splitlines() if "candidate pairs (its fullest band's to all bands' sum, at most every pair) for 20 documents" in ln]
    assert len(said) == 1, low.stderr
    assert said[0].startswith("warning: index: the buckets hold 190 to 190 candidate pairs")  # every pair, at most
    apart = tmp_path / "apart"  # 20 texts with no word in common: no candidate at 0.8
    words = "harbour lantern festival returns port ellery august tide crane rope gull pier".split()
    for i in range(20):
        write(apart / f"d{i:02d}.txt", " ".join(f"{w}{i}x{j}" for j, w in enumerate(words)) + "\n")
    high = run("pairs", apart, "--index", tmp_path / "i2", "-t", "0.8")
    assert high.exit_code == 0 and high.stdout == "" and "candidate pairs for" not in high.stderr, high.stderr
    # The bound is the sum over 128 bands (at most 190 x 128 = 24,320): not 10,000 a document.
    monkeypatch.setattr(index_stage, "MANY_A_DOCUMENT", 10_000)
    again = run("pairs", c, "--index", tmp_path / "i3", "-t", "0.001")
    assert again.exit_code == 0 and "candidate pairs for" not in again.stderr
