"""The report commands through the CLI: clusters, dedup, tune, stats, show."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from conftest import REPO, SAMPLE_CORPUS, assert_clean_error, write

from simdoc.shingling import normalise

T1 = (
    "The harbour lantern festival returns to Port Ellery on the first Saturday of August, with stalls "
    "along the old quay, music from noon and the lantern parade at nine."
)
T2 = (
    "Minutes of the allotment committee: the water trough on plot twelve leaks again, the shed key is "
    "lost, and the compost rota starts in March with volunteers from every row."
)
T3 = "A short recipe for red lentil soup: onions, carrots, cumin, lentils and stock, simmered for twenty minutes and blended smooth."
# a, b, c: T1 (c with one more sentence, J(a, c) = 0.8644); d, e: T2; f: unrelated.
# Modification times in seconds; sizes: a = b < c, d = e.
GROUPS = {
    "a.txt": (T1, 1000),
    "b.txt": (T1, 3000),
    "c.txt": (T1 + " Bring a lantern of your own.", 2000),
    "d.txt": (T2, 5000),
    "e.txt": (T2, 4000),
    "f.txt": (T3, 6000),
}
# A first run on a new index: the default threshold, named as such.
SUMMARY_CLUSTERS = re.compile(
    r"^simdoc: 6 documents, 4 pairs \(set jaccard >= 0\.6, the default\), 2 clusters holding 5 documents in \d+\.\d\d s$"
)
COMMANDS = ("clusters", "dedup", "tune", "stats", "show")


@pytest.fixture
def groups(tmp_path):
    root = tmp_path / "groups"
    for name, (text, mtime) in GROUPS.items():
        os.utime(write(root / name, text + "\n"), ns=(mtime * 10**9, mtime * 10**9))
    return root


@pytest.fixture
def built(run, groups, tmp_path):
    idx = tmp_path / "idx"
    r = run("pairs", groups, "--index", idx, "--scheme", "classic", "-q")  # the values below are classic MinHash's
    assert r.exit_code == 0, r.stderr
    return groups, idx


# ---------------------------------------------------------------- clusters


def test_clusters_tsv(run, groups, tmp_path):
    r = run("clusters", groups, "--index", tmp_path / "idx")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "1\t3\ta.txt\tb.txt\tc.txt\n2\t2\td.txt\te.txt\n"
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and SUMMARY_CLUSTERS.match(lines[0]), r.stderr


def test_clusters_jsonl_from_index_only(run, built):
    _, idx = built
    r = run("clusters", "--index", idx, "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == (
        '{"cluster_id": 1, "size": 3, "members": ["a.txt", "b.txt", "c.txt"]}\n'
        '{"cluster_id": 2, "size": 2, "members": ["d.txt", "e.txt"]}\n'
    )
    assert [json.loads(x)["size"] for x in r.stdout.splitlines()] == [3, 2]


def test_clusters_threshold(run, built):
    _, idx = built
    r = run("clusters", "--index", idx, "--threshold", "0.9")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "1\t2\ta.txt\tb.txt\n2\t2\td.txt\te.txt\n"


def test_false_candidates_do_not_glue_clusters(run, groups, tmp_path):
    # 128 bands of one row: every pair sharing a shingle hash is a candidate.
    idx = tmp_path / "idx"
    opts = ("--index", idx, "--threshold", "0.6", "--bands", "128", "--rows", "1", "--scheme", "classic")
    cand = run("pairs", groups, *opts, "--all-candidates")
    assert cand.exit_code == 0, cand.stderr
    assert "a.txt\td.txt\t0.0391\t0.0292\n" in cand.stdout  # a candidate, far below the threshold
    r = run("clusters", groups, *opts)
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "1\t3\ta.txt\tb.txt\tc.txt\n2\t2\td.txt\te.txt\n"


def test_clusters_escape_names(run, tmp_path):
    corpus = tmp_path / "c"
    write(corpus / "tab\there.txt", T1)
    write(corpus / "back\\slash.txt", T1)
    r = run("clusters", corpus, "--index", tmp_path / "idx")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "1\t2\tback\\\\slash.txt\ttab\\there.txt\n"
    j = run("clusters", "--index", tmp_path / "idx", "-f", "jsonl")
    assert json.loads(j.stdout)["members"] == ["back\\slash.txt", "tab\there.txt"]


def test_clusters_none(run, tmp_path):
    corpus = tmp_path / "c"
    write(corpus / "x.txt", T1)
    write(corpus / "y.txt", T2)
    r = run("clusters", corpus, "--index", tmp_path / "idx")
    assert r.exit_code == 0
    assert r.stdout == ""
    assert "0 pairs" in r.stderr and "0 clusters holding 0 documents" in r.stderr


def test_clusters_sample_corpus(run, tmp_path):
    r = run("clusters", SAMPLE_CORPUS, "--index", tmp_path / "idx")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == (
        "1\t2\tessays/tide-pools-essay-amara.txt\tessays/tide-pools-essay-brook.txt\n"
        "2\t2\tmisc/backup/red-lentil-soup-copy.txt\tmisc/red-lentil-soup.txt\n"
        "3\t2\tnews/ferry-strike-coastline-courier.txt\tnews/island-cut-off-valemont-gazette.txt\n"
        "4\t2\tpolicies/remote-work-policy-2023.txt\tpolicies/remote-work-policy-2024.txt\n"
        "5\t2\tweb/harbor-festival.txt\tweb/mirror-harbor-festival.txt\n"
    )


def test_clusters_usage_errors(run, groups, tmp_path):
    r = run("clusters")
    assert r.exit_code == 2 and r.stdout == "" and "CORPUS" in r.stderr
    r = run("clusters", "--index", tmp_path / "nothing")
    assert_clean_error(r, 4, "no simdoc index")
    r = run("clusters", "--index", tmp_path / "idx", "--rebuild")
    assert r.exit_code == 2 and "--rebuild needs the CORPUS" in r.stderr
    r = run("clusters", groups, "--index", tmp_path / "idx", "--threshold", "1.5")
    assert_clean_error(r, 2, "threshold")


def test_clusters_header(run, built):
    _, idx = built
    r = run("clusters", "--index", idx, "--header")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "cluster_id\tsize\tmembers\n1\t3\ta.txt\tb.txt\tc.txt\n2\t2\td.txt\te.txt\n"
    assert run("clusters", "--index", idx, "--no-header").stdout == "1\t3\ta.txt\tb.txt\tc.txt\n2\t2\td.txt\te.txt\n"
    bad = run("clusters", "--index", idx, "--header", "-f", "jsonl")
    assert_clean_error(bad, 2, "--header goes with tsv")


# ---------------------------------------------------------------- dedup


@pytest.mark.parametrize(
    "keep, dropped",
    [
        ("first", "b.txt\nc.txt\ne.txt\n"),
        ("longest", "a.txt\nb.txt\ne.txt\n"),  # keeps c (longest) and d (d = e in size: smaller id)
        ("shortest", "b.txt\nc.txt\ne.txt\n"),  # keeps a (a = b: smaller id) and d
        ("newest", "a.txt\nc.txt\ne.txt\n"),  # keeps b (3000 s) and d (5000 s)
        ("oldest", "b.txt\nc.txt\nd.txt\n"),  # keeps a (1000 s) and e (4000 s)
    ],
)
def test_dedup_keep(run, built, keep, dropped):
    _, idx = built
    r = run("dedup", "--index", idx, "--keep", keep)
    assert r.exit_code == 0, r.stderr
    assert r.stdout == dropped
    assert re.match(
        rf"^simdoc: 2 clusters: keep 2, drop 3 documents \(\d+ bytes\) \(set jaccard >= 0\.6, --keep {keep}\) in \d+\.\d\d s\n$",
        r.stderr,
    ), r.stderr


def test_dedup_default_is_first_and_builds_the_index(run, groups, tmp_path):
    r = run("dedup", groups, "--index", tmp_path / "idx")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "b.txt\nc.txt\ne.txt\n"
    sizes = sum(len(GROUPS[n][0]) + 1 for n in ("b.txt", "c.txt", "e.txt"))
    assert f"drop 3 documents ({sizes} bytes)" in r.stderr


@pytest.mark.parametrize("flag", ["-0", "--null"])
def test_dedup_null(run, built, flag):
    _, idx = built
    r = run("dedup", "--index", idx, flag)
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "b.txt\0c.txt\0e.txt\0"


def test_dedup_absolute(run, built):
    corpus, idx = built
    root = corpus.resolve()
    r = run("dedup", corpus, "--index", idx, "--absolute", "--keep", "newest")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "".join(f"{root / n}\n" for n in ("a.txt", "c.txt", "e.txt"))


def test_dedup_tsv_and_jsonl(run, built):
    _, idx = built
    r = run("dedup", "--index", idx, "--format", "tsv", "--keep", "longest")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "a.txt\tc.txt\nb.txt\tc.txt\ne.txt\td.txt\n"
    j = run("dedup", "--index", idx, "-f", "jsonl", "--keep", "longest")
    assert j.exit_code == 0, j.stderr
    assert j.stdout == (
        '{"cluster_id": 1, "keep": "c.txt", "drop": ["a.txt", "b.txt"]}\n'
        '{"cluster_id": 2, "keep": "d.txt", "drop": ["e.txt"]}\n'
    )


def test_dedup_tsv_header(run, built):
    _, idx = built
    r = run("dedup", "--index", idx, "--format", "tsv", "--keep", "longest", "--header")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "drop\tkeep\na.txt\tc.txt\nb.txt\tc.txt\ne.txt\td.txt\n"
    # A path list feeds xargs: a header line there would be a file name.
    for args in ((), ("-0",), ("-f", "jsonl")):
        assert_clean_error(run("dedup", "--index", idx, "--header", *args), 2, "--header goes with tsv")


def test_dedup_never_deletes(run, built):
    corpus, idx = built
    before = sorted(p.name for p in corpus.iterdir())
    assert run("dedup", corpus, "--index", idx).exit_code == 0
    assert sorted(p.name for p in corpus.iterdir()) == before


def test_dedup_null_needs_paths_format(run, built):
    _, idx = built
    r = run("dedup", "--index", idx, "-0", "--format", "tsv")
    assert r.exit_code == 2 and r.stdout == ""
    assert "-0/--null" in r.stderr


def test_dedup_name_with_line_break_only_with_null(run, tmp_path):
    corpus = tmp_path / "c"
    write(corpus / "a.txt", T1)
    write(corpus / "b\nc.txt", T1)
    r = run("dedup", corpus, "--index", tmp_path / "idx")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""
    assert "warning: 'b\\nc.txt' has a line break in its name: left out; use -0" in r.stderr
    r = run("dedup", "--index", tmp_path / "idx", "-0")
    assert r.stdout == "b\nc.txt\0"
    r = run("dedup", "--index", tmp_path / "idx", "-f", "tsv")
    assert r.stdout == "b\\nc.txt\ta.txt\n"


def test_dedup_nothing_to_drop(run, tmp_path):
    corpus = tmp_path / "c"
    write(corpus / "x.txt", T1)
    write(corpus / "y.txt", T3)
    r = run("dedup", corpus, "--index", tmp_path / "idx", "-0")
    assert r.exit_code == 0
    assert r.stdout == ""
    assert "0 clusters: keep 0, drop 0 documents (0 bytes)" in r.stderr


def test_dedup_bad_keep(run, built):
    _, idx = built
    r = run("dedup", "--index", idx, "--keep", "biggest")
    assert r.exit_code == 2 and r.stdout == ""


# ---------------------------------------------------------------- tune

TUNE_08 = """\
threshold T=0.8, num_perm=128: bands b=13, rows r=7 (chosen; 91 of 128 signature rows banded)
S-curve midpoint (1/b)^(1/r) = 0.6932
false-negative rate at J=0.8: 0.0469  (1 - P(T): pairs at T that never become candidates)
false-positive rate at J=0.6: 0.3086  (P(T-0.2): pairs there that still become candidates)

similarity  P(candidate)
      0.10  0.0000
      0.20  0.0002
      0.30  0.0028
      0.40  0.0211
      0.50  0.0969
      0.60  0.3086  <- T-0.2
      0.70  0.6728
      0.80  0.9531  <- T
      0.90  0.9998
      1.00  1.0000

P(candidate) by similarity J
 1.0 |                                        ***********
     |                                      **|
     |                                     *  |
     |                                   **   |
     |                                  *     |
 0.5 |                                 *      |
     |                               **       |
     |                             **         |
     |                           **           |
     |                       ****             |
 0.0 +***********************-----------------+----------
      0.0       0.2       0.4       0.6       0.8     1.0
                                              ^ T=0.8
"""


def test_tune_text(run):
    r = run("tune", "--threshold", "0.8")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == TUNE_08
    assert r.stderr == ""


def test_tune_defaults_to_the_default_threshold(run):
    r = run("tune")
    assert r.exit_code == 0
    assert r.stdout.startswith("threshold T=0.6, num_perm=128: bands b=22, rows r=4 (chosen; 88 of 128 signature rows banded)\n")


def test_tune_json_with_bands_rows(run):
    r = run("tune", "-t", "0.5", "--num-perm", "64", "--bands", "16", "--rows", "4", "-f", "json")
    assert r.exit_code == 0, r.stderr
    d = json.loads(r.stdout)
    assert r.stdout.count("\n") == 1
    assert {k: d[k] for k in ("threshold", "num_perm", "bands", "rows", "explicit", "midpoint", "false_positive_at")} == {
        "threshold": 0.5, "num_perm": 64, "bands": 16, "rows": 4, "explicit": True, "midpoint": 0.5, "false_positive_at": 0.3,
    }
    # P(0.5) = 1 - (1 - 0.5^4)^16 = 1 - (15/16)^16
    assert d["false_negative_rate"] == round((15 / 16) ** 16, 6) == 0.356074
    assert d["false_positive_rate"] == round(1 - (1 - 0.3**4) ** 16, 6)
    assert d["probabilities"][0] == {"similarity": 0.1, "probability": round(1 - (1 - 0.1**4) ** 16, 6)}


def test_tune_warns_when_recall_cannot_be_reached(run):
    r = run("tune", "-t", "0.1", "--num-perm", "16")
    assert r.exit_code == 0
    assert r.stderr == "warning: P(J=0.1) = 0.8147 is below 0.95: raise --num-perm\n"
    assert run("tune", "-t", "0.1", "--num-perm", "16", "-q").stderr == ""


@pytest.mark.parametrize("args", [("-t", "0.15", "--num-perm", "512"), ("-t", "0.01"), ("-t", "0.001", "--num-perm", "128"), ("-t", "1e-300", "--num-perm", "65536")])
def test_tune_low_thresholds_give_a_report(run, args):
    # Issue 17.5: these ended in OverflowError with a traceback.
    r = run("tune", *args, "-f", "json")
    assert r.exit_code == 0, (r.stderr, r.exception)
    d = json.loads(r.stdout)
    assert d["bands"] * d["rows"] <= d["num_perm"]


def test_pairs_at_a_low_threshold(run, groups, tmp_path):
    r = run("pairs", groups, "--index", tmp_path / "idx", "-t", "0.01", "--num-perm", "512")
    assert r.exit_code == 0, (r.stderr, r.exception)
    assert "set jaccard >= 0.01" in r.stderr
    assert len(r.stdout.splitlines()) >= 4


@pytest.mark.parametrize(
    "args, needle",
    [
        (("-t", "0"), "threshold"),
        (("-t", "1.5"), "threshold"),
        (("--bands", "5"), "go together"),
        (("--bands", "20", "--rows", "7"), "larger than --num-perm 128"),
        (("--num-perm", "0"), "num-perm"),
    ],
)
def test_tune_usage_errors(run, args, needle):
    r = run("tune", *args)
    assert r.exit_code == 2 and r.stdout == ""
    assert needle in r.stderr


# ---------------------------------------------------------------- stats

STATS_GROUPS = """\
documents: 6 (0 with no shingles)
shingles per document (with repeats): min 122, median 163.5, mean 160.83, max 189; 965 in all
banding: bands=22 rows=4 (threshold 0.6)
buckets: 72 in 22 bands, 44 shared by two or more documents
bucket sizes (buckets per size, bars on a log scale):
          1        28  ########################################
          2        28  ########################################
        3-4        16  ##################################
largest shared buckets (each once; bands: how many hold the same documents together):
       size      band     bands  sample member
          3         0        16  a.txt
          2         0        22  d.txt  (a group of exact copies)
          2         1         6  a.txt  (a group of exact copies)
"""


def test_stats_text(run, built):
    _, idx = built
    r = run("stats", "--index", idx)
    assert r.exit_code == 0, r.stderr
    assert r.stdout == STATS_GROUPS
    assert r.stderr == ""
    # Each band holds 6 documents: 22 bands * 6 = 28*1 + 28*2 + 16*sizes in 3-4 (3 each) = 132.
    assert 28 * 1 + 28 * 2 + 16 * 3 == 22 * 6


def test_stats_json(run, built):
    _, idx = built
    r = run("stats", "--index", idx, "--top", "1", "--format", "json")
    assert r.exit_code == 0, r.stderr
    d = json.loads(r.stdout)
    # With repeats: one shingle per 5-character window of each normalised text.
    assert d["n_docs"] == 6 and d["shingles_total"] == sum(max(len(normalise(t + "\n")) - 4, 0) for t, _ in GROUPS.values()) == 965
    assert d["buckets"]["histogram"] == [[1, 1, 28], [2, 2, 28], [3, 4, 16]]
    assert d["buckets"]["largest"] == [{"size": 3, "band": 0, "sample": "a.txt", "bands": 16, "copies": False}]


def test_stats_before_index_stage_and_stale(run, groups, tmp_path):
    idx = tmp_path / "idx"
    assert run("shingle", groups, "--index", idx, "-q").exit_code == 0
    r = run("stats", "--index", idx)
    assert r.exit_code == 0, r.stderr
    assert r.stdout.splitlines()[-1] == "buckets: none yet (run `simdoc index --index ...` or `simdoc pairs`)"
    assert run("signature", "--index", idx, "-q").exit_code == 0
    assert run("index", "--index", idx, "-q").exit_code == 0
    assert run("signature", "--index", idx, "--num-perm", "64", "--rebuild", "-q").exit_code == 0
    r = run("stats", "--index", idx)
    assert r.exit_code == 0
    assert "buckets: out of date" in r.stdout
    assert r.stderr.startswith("warning: the LSH buckets are out of date")


def test_stats_errors(run, tmp_path):
    r = run("stats")
    assert r.exit_code == 2 and "--index" in r.stderr
    assert_clean_error(run("stats", "--index", tmp_path / "none"), 4, "no simdoc index")


# ---------------------------------------------------------------- show

SHOW_AC = """\
A  a.txt  (29 words, 153 shingles)
B  c.txt  (35 words, 177 shingles)
set jaccard      0.8644  (153 of 177 distinct shingles shared)
bag jaccard      0.4585  (identical bags score 0.5)
estimated        0.8750  (MinHash, 128 permutations)
A in B           1.0000  (|A∩B|/|A|: share of A's shingles found in B)
B in A           0.8644  (|A∩B|/|B|)
shared passages  1 of 5 or more words: 29 words, 100.0% of A and 82.9% of B

passage        A words        B words   words
      1           1-29           1-29      29

A: a.txt
  [[1: The harbour lantern festival returns to Port Ellery on the first Saturday
  (... 5 words ...) the old quay, music from noon and the lantern parade at
  nine.]]

B: c.txt
  [[1: The harbour lantern festival returns to Port Ellery on the first Saturday
  (... 5 words ...) the old quay, music from noon and the lantern parade at
  nine.]] Bring a lantern of your own.
"""


def test_show_text(run, built):
    corpus, idx = built
    r = run("show", corpus, "--index", idx, "a.txt", "c.txt")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == SHOW_AC
    assert r.stderr == ""
    # The same exact Jaccard and estimate as `pairs` prints for the pair.
    assert "a.txt\tc.txt\t0.8750\t0.8644\n" in run("pairs", "--index", idx).stdout


def test_show_with_corpus_builds_the_index(run, groups, tmp_path):
    r = run("show", groups, "a.txt", "c.txt", "--index", tmp_path / "idx", "--scheme", "classic")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == SHOW_AC


def test_show_full_and_unrelated(run, built):
    corpus, idx = built
    r = run("show", corpus, "--index", idx, "a.txt", "d.txt", "--context", "3")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.endswith(
        "shared passages  none of 5 or more words\n"
        "\n"
        "A: a.txt\n"
        "  The harbour lantern festival returns to (... 23 words ...)\n"
        "\n"
        "B: d.txt\n"
        "  Minutes of the allotment committee: the (... 24 words ...)\n"
    )
    full = run("show", corpus, "--index", idx, "a.txt", "c.txt", "--full")
    assert f"  [[1: {T1[:60]}" in full.stdout and "(..." not in full.stdout


def test_show_json(run, built):
    corpus, idx = built
    r = run("show", corpus, "--index", idx, "c.txt", "a.txt", "--format", "json", "--min-words", "3")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout) == {
        "doc_a": "c.txt",
        "doc_b": "a.txt",
        "set_jaccard": 0.8644,
        "bag_jaccard": 0.4585,
        "estimated": 0.875,
        "containment_a": 0.8644,
        "containment_b": 1.0,
        "shingles_a": 177,
        "shingles_b": 153,
        "shingles_common": 153,
        "words_a": 35,
        "words_b": 29,
        "min_words": 3,
        "passages_searched_bytes": None,
        "cut_a": False,
        "cut_b": False,
        "passages": [{"number": 1, "a_start": 0, "a_end": 29, "b_start": 0, "b_end": 29, "words": 29, "text": T1}],
    }


def test_show_warns_when_a_document_changed(run, built, monkeypatch):
    corpus, idx = built
    write(corpus / "c.txt", "Something else entirely now.\n")
    # `show CORPUS` indexes it again first; a document changed after that (another writer, a
    # race) is read as it is now, with a warning: as if the refresh had found nothing to do.
    import importlib

    monkeypatch.setattr(importlib.import_module("simdoc.cli.show"), "refresh_signatures", lambda *a, **k: [])
    r = run("show", corpus, "--index", idx, "a.txt", "c.txt")
    assert r.exit_code == 0
    assert r.stderr == "warning: c.txt changed since it was indexed: the numbers and passages are from today's text\n"
    # Today's texts share nothing; the Jaccards verified for the texts as indexed are given beside them.
    assert "B  c.txt  (4 words, 24 shingles)" in r.stdout  # 28 characters: 24 5-shingles
    assert "set jaccard      0.0000  (0 of 177 distinct shingles shared)" in r.stdout
    assert "as indexed       set jaccard 0.8644, bag jaccard 0.4585  (verified then)" in r.stdout
    assert "shared passages  none" in r.stdout
    assert run("show", corpus, "--index", idx, "a.txt", "c.txt", "-q").stderr == ""


@pytest.mark.parametrize(
    "args, code, needle",
    [
        (("a.txt",), 2, "DOC_A DOC_B"),
        (("x", "y", "z", "w"), 3, "corpus x does not exist"),  # several CORPUS arguments are allowed
        (("a.txt", "a.txt"), 2, "same document"),
        (("a.txt", "missing.txt"), 2, "missing.txt is not a document"),
        (("a.txt", "c.txt", "--min-words", "0"), 2, "--min-words"),
        (("a.txt", "c.txt", "--k", "7"), 4, "built with --k 5"),
    ],
)
def test_show_errors(run, built, args, code, needle):
    corpus, idx = built
    r = run("show", corpus, "--index", idx, *args)
    assert r.exit_code == code, (r.stdout, r.stderr)
    assert r.stdout == "" and needle in r.stderr and "Traceback" not in r.stderr


# ---------------------------------------------------------------- every command: help, quiet, verbose


@pytest.mark.parametrize("cmd", COMMANDS)
def test_help_has_a_real_example(run, cmd):
    r = run(cmd, "--help")
    assert r.exit_code == 0 and r.stderr == ""
    assert "Example" in r.stdout
    assert re.search(rf"^\s+simdoc {cmd} \S", r.stdout, re.M), r.stdout
    assert "--quiet" in r.stdout and "--verbose" in r.stdout


def test_group_help_lists_the_report_commands(run):
    r = run("--help")
    for cmd in COMMANDS:
        assert re.search(rf"^\s+{cmd}\s", r.stdout, re.M), cmd


def _args(cmd, corpus, idx):
    return {
        "clusters": ("clusters", corpus, "--index", idx),
        "dedup": ("dedup", corpus, "--index", idx),
        "tune": ("tune", "-t", "0.1", "--num-perm", "16"),  # warns: recall not reached
        "stats": ("stats", "--index", idx),
        "show": ("show", corpus, "a.txt", "c.txt", "--index", idx),
    }[cmd]


@pytest.mark.parametrize("flag", ["--quiet", "-q"])
@pytest.mark.parametrize("cmd", COMMANDS)
def test_quiet(run, built, cmd, flag):
    corpus, idx = built
    loud = run(*_args(cmd, corpus, idx))
    quiet = run(*_args(cmd, corpus, idx), flag)
    assert loud.exit_code == quiet.exit_code == 0, quiet.stderr
    assert quiet.stderr == ""
    assert quiet.stdout == loud.stdout != ""


@pytest.mark.parametrize(
    "cmd, needle",
    [
        ("clusters", "banding: bands=22 rows=4"),
        ("dedup", "shingle: up to date"),
        ("tune", "tune: of all b*r <= 16 with P(T) >= 0.95"),
        ("stats", "stats: "),
        ("show", "signature: up to date"),
    ],
)
def test_verbose(run, built, cmd, needle):
    corpus, idx = built
    r = run(*_args(cmd, corpus, idx), "--verbose")
    assert r.exit_code == 0, r.stderr
    assert needle in r.stderr
    assert r.stdout == run(*_args(cmd, corpus, idx)).stdout


# ---------------------------------------------------------------- odds and ends


def test_clusters_bag_measure(run, built):
    _, idx = built
    r = run("clusters", "--index", idx, "--measure", "bag")  # bag threshold 0.4; J_bag(a, c) = 0.4585
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "1\t3\ta.txt\tb.txt\tc.txt\n2\t2\td.txt\te.txt\n"
    assert "(bag jaccard >= 0.4, the default)" in r.stderr  # the index holds a set threshold only


@pytest.mark.parametrize("cmd", ["clusters", "dedup", "show"])
def test_index_writing_commands_take_wait(run, cmd):
    assert "--wait" in run(cmd, "--help").stdout


def test_dedup_refuses_an_index_that_changed_under_it(run, built, monkeypatch):
    import simdoc.reports.library as reports  # where simdoc dedup (and simdoc.dedup) runs the pairs

    real = reports.run_pairs
    corpus, idx = built

    def racing(*a, **kw):
        res = real(*a, **kw)
        # Another run updates the index meanwhile: a file of a cluster edited, its rows replaced.
        write(corpus / "e.txt", GROUPS["e.txt"][0] + " and a line more\n")
        cmd = [sys.executable, "-m", "simdoc", "pairs", str(corpus), "--index", str(idx), "-q"]
        done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
        assert done.returncode == 0, done.stderr
        return res

    monkeypatch.setattr(reports, "run_pairs", racing)
    assert_clean_error(run("dedup", "--index", idx), 4, "changed while dedup ran")


def test_show_takes_paths_to_the_files(run, built, monkeypatch):
    corpus, idx = built
    monkeypatch.chdir(corpus.parent)
    r = run("show", corpus, "--index", idx, f"{corpus.name}/a.txt", str(corpus / "c.txt"))
    assert r.exit_code == 0, r.stderr
    assert r.stdout == SHOW_AC


def test_rich_rendering_has_the_plain_words(capsys):
    from simdoc.cli.show import _rich_document
    from simdoc.cli.tuning import _styled
    from simdoc.reports.passages import Segment

    text = _rich_document([Segment("own", None, "", 3, "a b"), Segment("shared", 1, "c d", 4, "e f"), Segment("own", None, "g")])
    assert text.plain == "(... 3 words ...) a b [1] c d (... 4 words ...) e f g"
    styles = {text.plain[s.start : s.end]: str(s.style) for s in text.spans}
    assert styles["[1]"] == "bold magenta" and styles["c d"] == "bold green" and styles["(... 3 words ...)"] == "dim"
    _styled(["P(candidate) by similarity J", " 1.0 |   |  ***"])
    assert capsys.readouterr().out == "P(candidate) by similarity J\n 1.0 |   |  ***\n"


def test_dedup_keeps_by_a_members_own_size_not_its_files(run, tmp_path):
    # Issue 17.2: members carried their whole file's size, so --keep shortest kept the longer one.
    base = "the quick brown fox jumps over the lazy dog near the river bank while the sun sets " * 5
    rows = [
        {"id": "long", "text": base + " and a good many more words at the end of this longer one"},
        {"id": "short", "text": base},
        {"id": "other", "text": "completely different text about databases and their indexes " * 5},
    ]
    write(tmp_path / "c" / "data.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    args = ("dedup", tmp_path / "c", "--index", tmp_path / "idx", "--id-field", "id", "-t", "0.5")
    shortest = run(*args, "--keep", "shortest")
    assert shortest.exit_code == 0, shortest.stderr
    assert shortest.stdout == "data.jsonl/#long\n"
    size_long = len(rows[0]["text"].encode())
    assert f"drop 1 document ({size_long} bytes)" in shortest.stderr
    longest = run(*args, "--keep", "longest")
    assert longest.stdout == "data.jsonl/#short\n"
    assert f"drop 1 document ({len(base.encode())} bytes)" in longest.stderr


def test_index_after_a_standalone_shingle_names_the_stage_to_run(run, tmp_path):
    # Issue 17.4: after `simdoc shingle` on a changed corpus, `simdoc index` said "up to date".
    corpus, idx = tmp_path / "c", tmp_path / "idx"
    write(corpus / "a.txt", "a first document about harbours and the boats in them")
    write(corpus / "b.txt", "a second document about harbours and the ships in them")
    for stage in ("shingle", "signature", "index"):
        args = (stage, corpus, "--index", idx) if stage == "shingle" else (stage, "--index", idx)
        assert run(*args).exit_code == 0
    write(corpus / "b.txt", "a second document, now about mountains and the goats on them")
    assert run("shingle", corpus, "--index", idx).exit_code == 0
    r = run("index", "--index", idx)
    assert_clean_error(r, 4, "built from another shingle build", "simdoc signature --index")
    stats = run("stats", "--index", idx)
    assert "run `simdoc signature --index ...`, then `simdoc index --index ...`" in stats.stdout
    assert run("signature", "--index", idx).exit_code == 0
    assert run("index", "--index", idx).exit_code == 0
    assert "buckets: out of date" not in run("stats", "--index", idx).stdout
