"""What marks a folder as a simdoc index: the names simdoc writes in one, and the one rule that
tells an index from a user's folder (:func:`index_reason`).

The store writes an index (:mod:`simdoc.store.directory`); the corpus passes
over any index it meets, in a walk, in a ``--files-from`` list and under a
bucket prefix (:mod:`simdoc.corpus.indexes`). The two layers do not import
each other, so what both must agree on lives here, below both: the names,
the manifest's ``format``, the note the writer leaves in its lock file.

A folder is a simdoc index when it holds

* a ``manifest.json`` whose start says ``"format": "simdoc-index"`` (any
  index that was ever published; a web app's manifest is not simdoc's), or
* before its first manifest (a first build killed, or still running):
  simdoc's ``lock`` file, and nothing but names simdoc writes in an index
  (hidden names aside, which every walk leaves out), with one of two things
  that only simdoc writes: the note its writer puts in ``lock`` as soon as it
  holds it (:data:`WRITER_NOTE`, the first bytes a build writes, written by
  every simdoc since the lock existed), or one of its arrays
  (``signatures.<16 hex>.npy``; for a lock whose note could not be written).

A user's folder with a file called ``lock`` is none of these: its lock says
something else, or the folder holds a name simdoc never writes. No marker
file is added to the index for this: the lock file is written first already,
and a marker would not be in the indexes older versions left unfinished.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable

FORMAT = "simdoc-index"
MANIFEST = "manifest.json"
LOCK = "lock"  # the writer's flock target (simdoc.store.locks)
READERS = "readers"  # the readers' flock target
PARTS = "dask-parts"  # the folder where a Dask cluster's tasks write their parts (simdoc.store.names)

# Names simdoc writes: <stem>.<16 hex build id>.<ext>, the manifest, the lock files, and temporary
# files of those (".<name>.<random>.tmp"). Nothing else in a directory is ours.
_STEMS = (
    r"(docs|shingles\.(overflow|origin)|docs\.(id|source|key|files)(\.offsets)?|docs\.files\.rows|docs\.(offset|length|size|file_size|mtime_ns|ctime_ns|ino|dev|n_shingles|added|how|status"
    r"|digest|file_digest|identity)|shingles\.(indptr|data|counts)|minhash\.family|signatures|bands|buckets|groups"
    r"|verified\.(keys|jaccard))"
)
# jsonl: format 2 kept its docs table as JSON lines; a --rebuild deletes those files too.
OWN = re.compile(rf"^({_STEMS}\.[0-9a-f]{{16}}\.(npy|jsonl)|manifest\.json|lock|readers)$")
OWN_TEMPORARY = re.compile(rf"^\.({_STEMS}\.(tmp\.npy|tmp\.jsonl|[0-9a-f]{{16}}\.(npy|jsonl))|manifest\.json)\..+\.tmp$")
ARRAY = re.compile(rf"^{_STEMS}\.[0-9a-f]{{16}}\.npy$")  # a published array of a build

# What the writer puts in its lock file once it holds it (who holds the lock, for IndexBusy).
WRITER_NOTE = re.compile(rb"^pid [0-9]+ since [0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}\n")


def writer_note(pid: int, when: str) -> bytes:
    """The note of the writer ``pid`` that took the lock at ``when`` (``%Y-%m-%d %H:%M:%S``)."""
    return f"pid {pid} since {when}\n".encode()


HEAD_BYTES = 1 << 16  # what is read of a manifest: "format" is its second key (its keys are sorted)
_FORMAT_MARK = re.compile(rb'"format"\s*:\s*"' + FORMAT.encode() + rb'"')


def foreign_manifest(raw: bytes) -> bool:
    """Whether a manifest.json's bytes are another tool's: valid JSON, but no simdoc manifest
    (a damaged one of simdoc's is not JSON, and is the store's to refuse or --rebuild). Simdoc's
    own is known by its format mark in its head, as :func:`index_reason` knows it, unparsed."""
    if _FORMAT_MARK.search(raw[:HEAD_BYTES]):
        return False
    try:
        manifest = json.loads(raw)
    except ValueError:
        return False
    return not isinstance(manifest, dict) or manifest.get("format") != FORMAT


# Why a folder is passed over: the note said once, and listed by `stats --skipped`.
INDEX = "a simdoc index (it holds simdoc's manifest.json): its files are not documents"
UNFINISHED = "an unfinished simdoc index (simdoc's lock file and files, no manifest.json yet): its files are not documents"


def index_reason(head: Callable[[str], bytes | None], names: Callable[[], Iterable[str] | None]) -> str | None:
    """Why a folder is a simdoc index (:data:`INDEX`, :data:`UNFINISHED`), or None if it is not one.

    ``head(name)``: the first :data:`HEAD_BYTES` bytes of the regular file ``name`` in the folder,
    None if it holds none (or it cannot be read: then it is walked, as a folder of the user's).
    ``names()``: the names of the folder's entries (None: they cannot be listed, so it is walked);
    asked only of a folder with a lock file and no manifest, so a walk, a list or a listing pays a
    lookup of two names a folder, no more.
    """
    manifest = head(MANIFEST)
    if manifest is not None:  # published: the manifest says whose it is
        return INDEX if _FORMAT_MARK.search(manifest) else None
    lock = head(LOCK)
    if lock is None:
        return None
    listed = names()
    if listed is None:
        return None
    entries = [n for n in listed if not n.startswith(".")]  # temporaries and the user's hidden files alike
    if not all(OWN.match(n) or n == PARTS for n in entries):
        return None  # a name simdoc never writes in an index: a folder of the user's
    if WRITER_NOTE.match(lock) or any(ARRAY.match(n) for n in entries):
        return UNFINISHED
    return None
