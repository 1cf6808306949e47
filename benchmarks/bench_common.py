"""Helpers shared by the benchmark scripts (not part of the simdoc package).

The shingling here is the reference definition used by every benchmark
script, so that all tools are measured against the same sets:

* read the file as UTF-8 (undecodable bytes become U+FFFD, a leading
  byte-order mark is dropped);
* lowercase;
* collapse every whitespace run to a single space and strip both ends;
* character k-shingles (k = 5 by default): every substring of length k.
  A non-empty text shorter than k yields one shingle, the whole text;
  an empty text yields the empty set.
"""

from __future__ import annotations

import os
from fractions import Fraction
from pathlib import Path
from typing import Iterable, Iterator

MANIFEST_NAME = ".MANIFEST.json"  # hidden, so that no tool reads it as a document

def normalize(text: str) -> str:
    """Lowercase, collapse whitespace runs to one space, strip."""
    return " ".join(text.lower().split())


def shingle_list(norm: str, k: int = 5) -> list[str]:
    """All k-shingles of an already normalised text, with repeats, in order."""
    n = len(norm)
    if n == 0:
        return []
    if n < k:
        return [norm]
    return [norm[i:i + k] for i in range(n - k + 1)]


def shingle_set(norm: str, k: int = 5) -> set[str]:
    """Set of k-shingles of an already normalised text."""
    n = len(norm)
    if n == 0:
        return set()
    if n < k:
        return {norm}
    return {norm[i:i + k] for i in range(n - k + 1)}


def shingle_list_np(norm: str, k: int = 5) -> list[str]:
    """Same result as shingle_list, about 4x faster for long texts.

    The text is viewed as UTF-32 code units and numpy reinterprets every
    window of k of them as one fixed-width unicode string (a strided view, no
    copy), which ``tolist`` turns into Python strings. numpy drops trailing
    NUL characters from such strings, so texts containing NUL take the plain
    path.
    """
    import numpy as np

    n = len(norm)
    if n <= k or "\x00" in norm:
        return shingle_list(norm, k)
    buf = norm.encode("utf-32-le")
    view = np.ndarray(shape=(n - k + 1,), dtype=f"U{k}", buffer=buf, strides=(4,))
    return view.tolist()


def read_text(path: str | os.PathLike) -> str:
    """UTF-8 text of a file; invalid bytes become U+FFFD, a leading BOM is dropped."""
    with open(path, "rb") as fh:
        text = fh.read().decode("utf-8", errors="replace")
    return text[1:] if text.startswith("\ufeff") else text


def doc_shingles(corpus: str | os.PathLike, rel: str, k: int = 5) -> set[str]:
    return shingle_set(normalize(read_text(Path(corpus) / rel)), k)


def list_docs(corpus: str | os.PathLike) -> list[str]:
    """Sorted relative paths (forward slashes) of the documents in a corpus.

    Same rule as simdoc's corpus discovery: every regular file below
    ``corpus``, recursively, except hidden files and folders (names starting
    with "."); symbolic links are not followed. (simdoc also skips files
    whose first 8 KiB hold a NUL byte; generated corpora have none, so that
    check is not repeated here.) The generator's manifest is hidden
    (.MANIFEST.json) for this reason.
    """
    root = os.path.abspath(corpus)
    out: list[str] = []
    stack = [(root, "")]
    while stack:
        directory, rel = stack.pop()
        with os.scandir(directory) as it:
            for entry in it:
                if entry.name.startswith("."):
                    continue
                child = f"{rel}/{entry.name}" if rel else entry.name
                if entry.is_symlink():
                    continue
                if entry.is_dir(follow_symlinks=False):
                    stack.append((entry.path, child))
                elif entry.is_file(follow_symlinks=False):
                    out.append(child)
    out.sort()
    return out


def corpus_bytes(corpus: str | os.PathLike, docs: Iterable[str]) -> int:
    root = Path(corpus)
    return sum((root / d).stat().st_size for d in docs)


def ordered(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a < b else (b, a)


def read_pairs_tsv(path: str | os.PathLike) -> dict[tuple[str, str], list[str]]:
    """Read ``doc_a<TAB>doc_b<TAB>...`` lines into {(a, b): [extra columns]}.

    Pairs are re-ordered so that a < b; blank lines, lines starting with '#'
    and a header line starting with 'doc_a' are ignored. A pair seen twice
    keeps its first extra columns.
    """
    pairs: dict[tuple[str, str], list[str]] = {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.rstrip("\n")
            if not line or line.startswith("#") or line.startswith("doc_a\t"):
                continue
            cols = line.split("\t")
            if len(cols) < 2:
                raise ValueError(f"{path}: malformed line {line!r}")
            a, b = cols[0].replace("\\", "/"), cols[1].replace("\\", "/")
            if a == b:
                continue
            pairs.setdefault(ordered(a, b), cols[2:])
    return pairs


def write_pairs_tsv(path: str | os.PathLike, rows: Iterable[tuple]) -> int:
    """Write (doc_a, doc_b, value, ...) rows as TSV; floats with 6 decimals."""
    n = 0
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        for row in rows:
            fh.write("\t".join(f"{v:.6f}" if isinstance(v, float) else str(v) for v in row))
            fh.write("\n")
            n += 1
    return n


def at_least(inter: int, union: int, threshold: float | str | Fraction) -> bool:
    """Exact test of inter/union >= threshold (threshold read as a decimal)."""
    t = threshold if isinstance(threshold, Fraction) else Fraction(str(threshold))
    if union == 0:
        return False
    return inter * t.denominator >= t.numerator * union


def iter_batches(seq: list, size: int) -> Iterator[list]:
    for i in range(0, len(seq), size):
        yield seq[i:i + size]
