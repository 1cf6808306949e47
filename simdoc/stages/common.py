"""What the stage modules share: the default index, build ids, the parameter check, progress bars, the cycle collector paused."""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simdoc.errors import ParameterMismatch
from simdoc.store.cache import cached_index_path

if TYPE_CHECKING:
    from tqdm import tqdm


def default_index_path(corpus: str | os.PathLike | list) -> Path:
    """Where an index lives when ``--index`` is not given.

    ``$SIMDOC_INDEX`` if set; otherwise ``$XDG_CACHE_HOME/simdoc/<name>-<hash>``
    (``~/.cache/simdoc/...``), where the hash is of the corpus's absolute path,
    so each corpus gets its own index and the corpus itself is never written to.
    """
    env = os.environ.get("SIMDOC_INDEX")
    if env:
        return Path(env)
    return cached_index_path(corpus)


def corpus_name(corpus: str | os.PathLike | list) -> str:
    """The corpus as the user gave it, for messages."""
    return os.fspath(corpus) if isinstance(corpus, (str, os.PathLike)) else " ".join(map(os.fspath, corpus))


def build_id(*parts: object) -> str:
    """The id of a build: a hash of what it was made from (inputs, parameters, version), for file names."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def progress_bar(total: int | None, desc: str, enabled: bool, unit: str = " docs") -> tqdm:
    """A bar on stderr; with a total it shows the share done and the time left. No work, no bar."""
    from tqdm import tqdm  # here: a run with nothing to do makes no bar, and does without the import

    return tqdm(
        total=total, desc=desc, unit=unit, disable=not enabled or total == 0, file=sys.stderr, leave=False, dynamic_ncols=True
    )


def mismatch(stage: str, stored: Mapping[str, Any], asked: Mapping[str, Any], index: str | os.PathLike, rebuild: bool) -> bool:
    """True if a parameter asked for differs from the one the index's ``stage`` was built with.

    Without ``rebuild`` that is a ParameterMismatch naming the flag: an index
    keeps its parameters, and a run never silently changes them.
    """
    for name, value in asked.items():
        if value is None or name not in stored or stored[name] == value:
            continue
        if rebuild:
            return True
        raise ParameterMismatch(stage, name, stored[name], value, str(index))
    return False


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cycle collector for a stage that only makes acyclic objects.

    The shingle stage keeps a few objects per document alive until its end;
    each collection would walk all of them again. Nothing it makes holds a cycle.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
