"""What the scoring tasks on a Dask cluster send back, and the part files they leave in the index.

A scoring task (:mod:`simdoc.stages.dask_pairs`) returns a
:class:`PartitionResult` and writes the same to its part file,
``dask-parts/<manifest>-<question>/<band>-<range>.npz``, atomically: a part
that exists is that task's completion record, read back by a later run of
the same index asking the same question (:func:`run_folder` names the
folder by everything the results depend on) instead of running the task
again. Parts are numpy arrays only, read without pickle.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from simdoc.stages.results import Scoring
from simdoc.store.names import PARTS


@dataclass
class PartitionResult:
    """What one task sends back: the pairs to print and what verification learnt."""

    band: int
    scored: tuple  # (left, right, est, jac or None)
    n_candidates: int  # after expanding copies and --new, as score_pairs counts them
    n_pairs: int  # before: pairs of representatives, as BucketStats counts them
    largest_bucket: int = 0
    large_buckets: int = 0
    n_verified: int = 0
    n_cached: int = 0
    stale: set = field(default_factory=set)
    gone: set = field(default_factory=set)
    verified_keys: np.ndarray | None = None  # pairs newly verified: keys (m, 4), jaccards (m, 2)
    verified_jaccard: np.ndarray | None = None



_COUNTS = ("band", "n_candidates", "n_pairs", "largest_bucket", "large_buckets", "n_verified", "n_cached", "verified")


def write_part(path: str, r: PartitionResult) -> None:
    """Write one task's result where its part goes, atomically: a part that exists is complete."""
    left, right, est, jac = r.scored
    verified = jac is not None
    counts = [r.band, r.n_candidates, r.n_pairs, r.largest_bucket, r.large_buckets, r.n_verified, r.n_cached, verified]
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    with open(tmp, "wb") as f:
        np.savez(
            f, counts=np.array(counts, np.int64), left=left, right=right, est=est, jac=jac if verified else np.zeros(0),
            stale=np.array(sorted(r.stale), np.int64), gone=np.array(sorted(r.gone), np.int64),
            verified_keys=r.verified_keys if r.verified_keys is not None else np.zeros((0, 4), np.uint64),
            verified_jaccard=r.verified_jaccard if r.verified_jaccard is not None else np.zeros((0, 2)),
        )
    os.replace(tmp, path)


def read_part(path: str) -> PartitionResult | None:
    """A task's result from its part, or None if there is none (or it cannot be read: run the task again)."""
    try:
        with np.load(path) as z:
            c = dict(zip(_COUNTS, z["counts"].tolist()))
            jac = z["jac"] if c["verified"] else None
            keys, vjac = z["verified_keys"], z["verified_jaccard"]
            return PartitionResult(
                c["band"], (z["left"], z["right"], z["est"], jac), c["n_candidates"], c["n_pairs"], c["largest_bucket"],
                c["large_buckets"], c["n_verified"], c["n_cached"], set(z["stale"].tolist()), set(z["gone"].tolist()),
                keys if len(keys) else None, vjac if len(keys) else None,
            )
    except Exception:  # whatever a damaged part makes numpy or zipfile raise: run the task again
        return None


def run_folder(loaded, manifest: str, how: Scoring, new_after: int | None, ranges: list[int]) -> Path:
    """The folder of one run's parts: named by the manifest and everything the results depend on,
    so that only a run of the same index, asking the same, finds and reuses them."""
    from simdoc.version import __version__

    asked = [manifest, how.threshold, how.measure, how.verify, how.all_candidates, new_after, ranges, __version__]
    key = hashlib.sha256(json.dumps(asked).encode()).hexdigest()[:16]
    return loaded.store.path / PARTS / f"{manifest[:16]}-{key}"


_RUN_FOLDER = re.compile(r"^[0-9a-f]{16}-[0-9a-f]{16}$")  # see run_folder


def remove_parts(folder: Path, manifest: str) -> None:
    """After a run: its parts, and those of scoring runs of manifests that are no more (never to be reused).

    Only scoring runs' folders: the reading and banding parts of a build in
    progress (a writer may be at work while this run only reads) are that
    build's to remove.
    """
    with contextlib.suppress(OSError):
        shutil.rmtree(folder)
    with contextlib.suppress(OSError):
        for other in folder.parent.iterdir():
            if _RUN_FOLDER.match(other.name) and other.is_dir() and not other.name.startswith(manifest[:16]):
                shutil.rmtree(other, ignore_errors=True)
    with contextlib.suppress(OSError):
        folder.parent.rmdir()  # unless another run's parts, or the copies table of one, are in it
