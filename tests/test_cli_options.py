"""The shared options: one --format and one -0/--null, and flags that cannot go together refused before any work."""

import os
from pathlib import Path

import pytest
from conftest import assert_clean_error

from simdoc.stages.common import default_index_path


def _made(cache: Path) -> list[Path]:
    return sorted(cache.rglob("*"))


@pytest.mark.parametrize(
    "args, message",
    [
        (("pairs", "{corpus}", "--null", "--format", "csv"), "--null and --format go separately"),
        (("pairs", "{corpus}", "--format", "jsonl", "--header"), "--header goes with tsv, csv or table output"),
        (("clusters", "{corpus}", "-0", "--format", "jsonl"), "--null and --format go separately"),
        (("dedup", "{corpus}", "-0", "--format", "tsv"), "-0/--null goes with the default path list (--format paths)"),
        (("query", "{corpus}/a.txt", "--corpus", "{corpus}", "-0", "-f", "tsv"), "--null and --format go separately"),
        (("pairs", "{corpus}", "--bands", "3"), "--bands and --rows go together"),
        (("pairs", "{corpus}", "--threshold", "1.5"), "--threshold must be in (0, 1], got 1.5"),
        (("pairs", "{corpus}", "--measure", "bag", "-t", "0.7"), "bag Jaccard is at most 0.5"),
        (("pairs", "{corpus}", "--jobs", "0"), "--jobs must be at least 1, got 0"),
        (("shingle", "{corpus}", "--jobs", "0"), "--jobs must be at least 1, got 0"),
        (("clusters", "{corpus}", "--rows", "4"), "--bands and --rows go together"),
    ],
)
def test_flags_that_cannot_go_together_are_refused_before_any_work(run, small_corpus, args, message):
    cache = Path(os.environ["XDG_CACHE_HOME"])  # where the default index would be made (conftest)
    r = run(*(a.format(corpus=small_corpus) for a in args))
    assert_clean_error(r, 2, message)
    assert not default_index_path(small_corpus).exists()
    assert _made(cache) == []  # nothing made: no index directory, no lock file


def test_every_command_spells_format_and_null_alike(run):
    for command in ("pairs", "query", "clusters", "dedup", "tune", "stats", "show"):
        assert "-f, --format [" in run(command, "--help").stdout, command
    for command in ("pairs", "query", "clusters", "dedup"):
        assert "-0, --null" in run(command, "--help").stdout, command
    assert "--null" not in run("shingle", "--help").stdout  # taken, only to say where input lists went


@pytest.mark.parametrize(
    "args",
    [
        ("pairs", "--wait", "nan"),
        ("pairs", "--scheduler", "local[1]", "--wait-workers", "NaN"),
        ("cache", "clean", "--older-than", "nan"),
        ("cache", "clean", "--wait", "nan"),
    ],
)
def test_a_wait_that_is_no_number_is_a_usage_error(run, small_corpus, tmp_path, args):
    """click's FloatRange(0) let nan through (nan < 0 is False): --wait nan waited without end."""
    where = [small_corpus, "--index", tmp_path / "idx"] if args[0] == "pairs" else []
    r = run(*args, *where)
    assert_clean_error(r, 2, "is not a number")
    assert not (tmp_path / "idx").exists()
