"""Where ``simdoc dedup --write`` puts the deduplicated corpus: a local folder, or a prefix at a URL.

:mod:`simdoc.reports.write` writes each file of the corpus, one at a time,
to a local path that a destination gives (:meth:`Destination.target`), and
hands it back once its digest proved it the one indexed
(:meth:`Destination.done`):

* :class:`FolderDestination`: the files go to a temporary folder beside
  DIR, renamed to DIR at the end, so DIR is whole or not there;
* :class:`ObjectDestination`: each file is written to a local temporary
  file (only one at a time: the local disk needs room for the largest file,
  not the corpus), then put under ``s3://bucket/prefix/`` by its name
  through fsspec, with the run's storage options, and the local copy
  deleted. An object store has no rename of a whole prefix: the objects
  appear one by one, and a run that fails deletes the objects it put. So the
  bytes are those a local DIR gets, byte for byte; only the publishing is
  not atomic.

A destination that holds anything is refused before any work, as a
non-empty folder is (:func:`check_url_destination`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

from simdoc.corpus.objects import canonical, filesystem, is_url, said, where_hint
from simdoc.errors import CorpusError, OutputError, UsageError


def _unwritable(dest: str, exc: BaseException) -> OutputError:
    """The error for a destination that cannot be asked or written (exit 6: output not written)."""
    if isinstance(exc, PermissionError) or type(exc).__name__ in ("NoCredentialsError", "PartialCredentialsError"):
        hint = "check the credentials (environment, fsspec config, --storage-option key=... secret=...)"
    else:
        hint = where_hint(dest)
    return OutputError(f"cannot write {dest}: {said(exc)}", hint=hint)


def check_url_destination(dest: str, root: str = "", folder: bool = True, link: bool = False) -> None:
    """Refuse a URL ``dest`` that names an object, holds any object, or lies inside the corpus at the
    URL ``root`` (a prefix, with ``folder``); ``--link`` (a hard link cannot reach a bucket). One
    listing of the prefix; a missing bucket, a refused credential or an unreachable endpoint is an
    OutputError (exit 6), before any work."""
    base = canonical(dest)
    if link:
        raise UsageError(f"--link cannot link files into {dest}", hint="drop --link: the objects are copied")
    if root and folder and is_url(root):
        corpus = canonical(root)
        if base == corpus or base.startswith(corpus + "/"):
            raise UsageError(f"--write {dest} is inside the corpus {root}", hint="write the deduplicated corpus elsewhere")
    try:
        fs, path = filesystem(base)
    except CorpusError as exc:  # no backend for it: nothing can be written there
        raise OutputError(f"cannot write {dest}: {exc.message}", hint=exc.hint) from None
    bucket = path.split("/", 1)[0]
    try:
        fs.invalidate_cache(path)
        if fs.isfile(path):
            raise UsageError(f"--write {dest} is an object, not a prefix", hint="name a new or empty prefix")
        try:
            held = fs.ls(path, detail=False)
        except FileNotFoundError:
            held = []
            fs.invalidate_cache(bucket)
            fs.ls(bucket, detail=False)  # no such prefix is fine; no such bucket is not
    except UsageError:
        raise
    except FileNotFoundError:
        raise OutputError(f"cannot write {dest}: no such bucket {bucket}", hint="create the bucket first, or name another") from None
    except Exception as exc:  # refused, unreachable: each backend raises its own kinds
        raise _unwritable(dest, exc) from None
    if held:
        raise UsageError(f"--write {dest} is not empty", hint="name a new or empty prefix; simdoc never writes over objects")


class Destination:
    """Where the files go (see the module docstring): a local path for each, then kept or dropped."""

    def target(self, name: str) -> str:
        """The local path to write the file ``name`` (a corpus-relative id) to."""
        raise NotImplementedError

    def done(self, name: str) -> None:
        """The file ``name`` is written and checked: publish it."""

    def commit(self) -> None:
        """All files are written: the destination is whole."""

    def abort(self) -> None:
        """Something failed: leave nothing of what was written."""


class FolderDestination(Destination):
    """A new or empty local folder, filled in a temporary folder beside it and renamed at the end."""

    def __init__(self, dest: Path) -> None:
        self.dest = Path(os.path.abspath(dest))
        try:
            self.dest.parent.mkdir(parents=True, exist_ok=True)
            self.tmp = Path(tempfile.mkdtemp(prefix=f".{self.dest.name}.", suffix=".tmp", dir=self.dest.parent))
            # mkdtemp makes the folder 0700: DIR gets the mode a new folder gets under the umask (a
            # probe's, made while the folder is empty; reading the umask would set it), or, at
            # commit, that of the empty DIR it replaces.
            probe = self.tmp / "probe"
            try:
                probe.mkdir()
                self.mode = probe.stat().st_mode & 0o7777
                probe.rmdir()
            except OSError:
                shutil.rmtree(self.tmp, ignore_errors=True)
                raise
        except OSError as exc:
            raise OutputError(f"cannot write {self.dest}: {exc.strerror or exc}") from None

    def target(self, name: str) -> str:
        target = self.tmp / name
        target.parent.mkdir(parents=True, exist_ok=True)
        return str(target)

    def commit(self) -> None:
        try:
            mode = os.stat(self.dest).st_mode & 0o7777
        except FileNotFoundError:
            mode = self.mode
        os.chmod(self.tmp, mode)
        os.rename(self.tmp, self.dest)  # replaces an empty DIR; atomic

    def abort(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


class ObjectDestination(Destination):
    """A new or empty prefix at a URL: each file staged locally, then put under the prefix."""

    def __init__(self, dest: str) -> None:
        self.dest = canonical(dest)
        self.fs, self.path = filesystem(self.dest)
        self.put: list[str] = []
        try:
            self.tmp = tempfile.mkdtemp(prefix=".simdoc-write.", suffix=".tmp")
        except OSError as exc:
            raise OutputError(f"cannot write {dest}: no local temporary folder: {exc.strerror or exc}") from None
        self._staged = ""

    def target(self, name: str) -> str:
        # Under its own name: how a copy's digest is taken depends on it (``.gz``: decompressed).
        self._drop_staged()
        self._staged = os.path.join(self.tmp, name.rpartition("/")[2])
        return self._staged

    def _drop_staged(self) -> None:
        if self._staged:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._staged)

    def done(self, name: str) -> None:
        key = f"{self.path}/{name}"
        try:
            self.fs.put_file(self._staged, key)
        except Exception as exc:  # each backend raises its own kinds
            raise _unwritable(f"{self.dest}/{name}", exc) from None
        finally:
            self._drop_staged()
        self.put.append(key)

    def commit(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def abort(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)
        if self.put:
            try:
                self.fs.rm(self.put)
            except Exception:  # best effort: the error being raised says what went wrong first
                pass


def destination_of(dest: str | os.PathLike) -> Destination:
    return ObjectDestination(dest) if is_url(dest) else FolderDestination(Path(dest))
