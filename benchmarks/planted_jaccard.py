#!/usr/bin/env python3
"""Exact pairwise Jaccard similarity of every document in a corpus directory.

This is a brute-force reference check, independent of simdoc itself: it uses
plain Python sets of shingle strings, with simdoc's default settings:

* each file is decoded as UTF-8, lowercased, every run of whitespace collapsed
  to a single space, and leading/trailing whitespace stripped;
* the document is the set of its character 5-shingles (5 consecutive code
  points); a non-empty text shorter than 5 characters is a single shingle,
  the whole text; an empty text has no shingles;
* Jaccard(A, B) = |A & B| / |A | B| (two empty sets count as 0.0).

Hidden files and directories (names starting with ".") are skipped. Documents
are named by their path relative to the corpus directory, with forward
slashes. Every pair with Jaccard >= --min is printed, tab-separated as
``doc_a<TAB>doc_b<TAB>jaccard`` (4 decimals, doc_a < doc_b), sorted by Jaccard
descending, then by names.

Usage:
    python benchmarks/planted_jaccard.py [CORPUS_DIR] [--min 0.3] [-k 5]
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import sys
from pathlib import Path

_WHITESPACE = re.compile(r"\s+")


def normalize(text: str) -> str:
    """Lowercase, collapse whitespace runs to one space, and strip."""
    return _WHITESPACE.sub(" ", text.lower()).strip()


def shingles(text: str, k: int = 5) -> set[str]:
    """Return the set of character k-shingles of the normalized text."""
    norm = normalize(text)
    if not norm:
        return set()
    if len(norm) < k:
        return {norm}
    return {norm[i : i + k] for i in range(len(norm) - k + 1)}


def jaccard(a: set[str], b: set[str]) -> float:
    """Exact Jaccard similarity of two sets (0.0 when both are empty)."""
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def iter_documents(root: Path) -> list[tuple[str, Path]]:
    """List (relative name, path) of all non-hidden files under root, sorted."""
    docs = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in filenames:
            if name.startswith("."):
                continue
            path = Path(dirpath) / name
            docs.append((path.relative_to(root).as_posix(), path))
    docs.sort()
    return docs


def pairwise(root: Path, k: int = 5) -> list[tuple[str, str, float]]:
    """Exact Jaccard of every unordered pair of documents under root."""
    sets = [(name, shingles(path.read_text(encoding="utf-8"), k))
            for name, path in iter_documents(root)]
    results = []
    for (name_a, a), (name_b, b) in itertools.combinations(sets, 2):
        results.append((name_a, name_b, jaccard(a, b)))
    results.sort(key=lambda r: (-r[2], r[0], r[1]))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", nargs="?", default="sample_corpus",
                        help="corpus directory (default: sample_corpus)")
    parser.add_argument("--min", type=float, default=0.3, dest="min_jaccard",
                        help="print pairs with Jaccard >= this (default: 0.3)")
    parser.add_argument("-k", type=int, default=5,
                        help="shingle length in characters (default: 5)")
    args = parser.parse_args(argv)

    root = Path(args.corpus)
    if not root.is_dir():
        parser.error(f"not a directory: {root}")
    if args.k < 1:
        parser.error("-k must be at least 1")

    for name_a, name_b, value in pairwise(root, args.k):
        if value < args.min_jaccard:
            break
        print(f"{name_a}\t{name_b}\t{value:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
