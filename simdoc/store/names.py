"""Which entries of an index directory are simdoc's own, and removing the Dask parts folder.

An index directory may sit inside a user's folder, or be handed to simdoc
damaged or crafted: simdoc deletes, overwrites or counts as its own only the
names it writes. Those are ``<stem>.<16 hex build id>.npy``, the manifest,
the lock files, temporaries of those (``.<name>.<random>.tmp``), and the
folder :data:`PARTS` where the tasks of a Dask cluster write their parts
(:mod:`simdoc.stages.scan`, :mod:`simdoc.stages.dask_index`,
:mod:`simdoc.stages.dask_pairs`), with the names they write in it. Nothing else is touched, and a symbolic link is
never followed.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from pathlib import Path

# Names simdoc writes (<stem>.<16 hex build id>.<ext>, the manifest, the lock files, their
# temporaries, and PARTS, the folder where the tasks of a Dask cluster write their parts:
# simdoc.stages.scan, simdoc.stages.dask_index, simdoc.stages.dask_pairs) are known to the corpus
# too, which passes over any index it meets: they live in simdoc.indexmarks, below both layers.
from simdoc.indexmarks import OWN, OWN_TEMPORARY, PARTS  # noqa: F401  (OWN_TEMPORARY, PARTS: imported from here)

# The names the tasks write in PARTS, at any depth.
_OWN_PART = re.compile(
    r"^(scan|[0-9a-f]{16}-[0-9a-f]{16}|band-[0-9a-f]{16}|copies\.[0-9a-f]{16}\.npy|\.copies\.[0-9]+\.tmp\.npy"
    r"|[0-9]{3}-[0-9]{6}\.npz(\.[0-9]+\.[0-9]+\.tmp)?|\.?[0-9a-f]{32}\.npz(\.[0-9]+\.[0-9]+\.tmp)?"
    r"|[0-9]{6}\.(keys|docs)\.npy(\.[0-9]+\.tmp)?)$"
)
# And the token of a Dask client's run, contract.<32 hex> (simdoc.engines.dask_checked.Contract).
_OWN_PART = re.compile(rf"{_OWN_PART.pattern}|^contract\.[0-9a-f]{{32}}$")


def parts_folder(index: Path, *names: str) -> Path | None:
    """``index/PARTS/names...`` (absolute: workers run in folders of their own), made where missing;
    None if a symbolic link stands on the way, or it cannot be made (a read-only index).

    Every stage that writes parts asks here: nothing is ever written through a
    link an index holds, which may point anywhere.
    """
    folder = Path(index).absolute() / PARTS
    try:
        for name in ("", *names):
            folder = folder / name if name else folder
            if folder.is_symlink():
                return None
            folder.mkdir(exist_ok=True)
    except OSError:
        return None
    return folder


def remove_parts(folder: Path) -> bool:
    """Remove ``folder`` (the PARTS folder of an index, or one in it) with what simdoc wrote in it;
    True if it is gone.

    Only names simdoc writes there go, and only regular files and real
    folders: a symbolic link is never followed, and anything else stays
    (and so does the folder that holds it), as with the index's own files.
    """
    try:
        if not stat.S_ISDIR(os.lstat(folder).st_mode):
            return False  # a link (never followed) or a file: not what simdoc made
    except FileNotFoundError:
        return True
    except OSError:
        return False
    with contextlib.suppress(OSError):
        with os.scandir(folder) as entries:
            for entry in entries:
                if not _OWN_PART.match(entry.name):
                    continue
                with contextlib.suppress(OSError):
                    if entry.is_dir(follow_symlinks=False):
                        remove_parts(Path(entry.path))
                    elif entry.is_file(follow_symlinks=False):
                        os.unlink(entry.path)
        folder.rmdir()
    return not os.path.lexists(folder)


def is_own_file(name: str) -> bool:
    """True for the names of files simdoc writes in an index directory (and their temporaries)."""
    return bool(OWN.match(name) or OWN_TEMPORARY.match(name))


def own_entry(path: Path) -> bool:
    """An entry of an index directory simdoc made: one of its files, or the PARTS folder
    (a first build killed on a Dask cluster leaves that, and no manifest yet)."""
    return is_own_file(path.name) or (path.name == PARTS and path.is_dir() and not path.is_symlink())
