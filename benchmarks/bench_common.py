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

A document is a file, or one line of a JSON Lines file (``.jsonl``), named
the way simdoc names it: ``REL/#LINE`` with LINE the 1-based line number,
its text the line's ``text`` field (blank lines are no documents).
``list_docs(corpus, members=True)`` lists such members in place of their
file and ``read_doc`` reads either kind.
"""

from __future__ import annotations

import json
import os
import resource
from fractions import Fraction
from pathlib import Path
from typing import Iterable, Iterator

MANIFEST_NAME = ".MANIFEST.json"  # hidden, so that no tool reads it as a document
JSONL_SUFFIXES = (".jsonl", ".ndjson")  # uncompressed only: the generator writes these
MEMBER_SEP = "/#"


def children_cpu() -> float:
    """User + system CPU seconds of this process's waited-for children so far (a command run, its workers)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


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
    return shingle_set(normalize(read_doc(corpus, rel)), k)


def is_jsonl(rel: str) -> bool:
    return rel.endswith(JSONL_SUFFIXES)


class JsonlFile:
    """Where each line of a JSON Lines file is, so that a member is one read away.

    Listing scans the file once, line by line; only the offsets are kept
    (16 bytes a line), so a 10^6-record file costs 16 MB here, not its size.
    """

    def __init__(self, path: str | os.PathLike):
        import numpy as np

        self.path = os.fspath(path)
        starts: list[int] = []
        ends: list[int] = []
        numbers: list[int] = []
        pos = 0
        with open(self.path, "rb") as fh:
            for n, line in enumerate(fh, 1):
                if line.strip():
                    starts.append(pos)
                    ends.append(pos + len(line))
                    numbers.append(n)
                pos += len(line)
        self.numbers = numbers  # 1-based numbers of the non-blank lines
        self._numbers = np.array(numbers, dtype=np.int64)
        self.starts = np.array(starts, dtype=np.int64)
        self.ends = np.array(ends, dtype=np.int64)

    def line_numbers(self) -> list[int]:
        return self.numbers

    def lines(self, numbers: list[int]) -> list[bytes]:
        """The raw lines (newline stripped) of the given 1-based line numbers."""
        import numpy as np

        idx = np.searchsorted(self._numbers, np.asarray(numbers, dtype=np.int64)).tolist()
        if any(i >= len(self.numbers) or self.numbers[i] != n for i, n in zip(idx, numbers)):
            raise KeyError(f"{self.path}: no document at some of lines {numbers[:5]}...")
        out: list[bytes] = []
        with open(self.path, "rb") as fh:
            if idx and idx == list(range(idx[0], idx[0] + len(idx))):
                # consecutive members: one read of their whole range
                base = int(self.starts[idx[0]])
                fh.seek(base)
                chunk = fh.read(int(self.ends[idx[-1]]) - base)
                for i in idx:
                    out.append(chunk[int(self.starts[i]) - base:int(self.ends[i]) - base])
            else:
                for i in idx:
                    fh.seek(int(self.starts[i]))
                    out.append(fh.read(int(self.ends[i] - self.starts[i])))
        return [b.rstrip(b"\r\n") for b in out]

    def texts(self, numbers: list[int]) -> list[str]:
        return [json.loads(b)["text"] for b in self.lines(numbers)]


_jsonl_cache: dict[str, JsonlFile] = {}


def jsonl_file(path: str | os.PathLike) -> JsonlFile:
    key = os.path.abspath(path)
    f = _jsonl_cache.get(key)
    if f is None:
        f = _jsonl_cache[key] = JsonlFile(key)
    return f


def split_member(name: str) -> tuple[str, int] | None:
    """(file, line) of a member name ``REL/#LINE``; None for a plain file."""
    rel, sep, line = name.rpartition(MEMBER_SEP)
    if sep and is_jsonl(rel) and line.isdigit():
        return rel, int(line)
    return None


def read_doc(corpus: str | os.PathLike, name: str) -> str:
    """Text of a document: a file (see read_text) or a JSON Lines member."""
    m = split_member(name)
    if m is None:
        return read_text(Path(corpus) / name)
    return jsonl_file(Path(corpus) / m[0]).texts([m[1]])[0]


def expand_members(corpus: str | os.PathLike, docs: list[str]) -> list[str]:
    """Each JSON Lines file replaced by its members, in place (order kept)."""
    out: list[str] = []
    for rel in docs:
        if is_jsonl(rel):
            out.extend(f"{rel}{MEMBER_SEP}{n}" for n in jsonl_file(Path(corpus) / rel).line_numbers())
        else:
            out.append(rel)
    return out


def list_docs(corpus: str | os.PathLike, members: bool = False) -> list[str]:
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
    return expand_members(corpus, out) if members else out


def corpus_bytes(corpus: str | os.PathLike, docs: Iterable[str]) -> int:
    """Bytes of the files holding the documents (a JSON Lines file counted once)."""
    root = Path(corpus)
    files = {m[0] if (m := split_member(d)) else d for d in docs}
    return sum((root / f).stat().st_size for f in files)


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
