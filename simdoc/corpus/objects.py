"""A corpus given as a URL (``s3://bucket/prefix/``): objects listed, read and checked through fsspec.

Listing a prefix replaces walking a folder (:func:`list_prefix`): a document's
id is its key relative to the prefix, exactly as a file's id is its path
relative to the corpus folder, so ``simdoc pairs s3://bucket/crawl/`` and
``simdoc pairs crawl/`` on a copy of it name the same documents alike.
Objects are read through :func:`simdoc.corpus.object_reads.open_object`, a
file-like object with the ``read``/``seek`` of a local file, so every reader
of :mod:`simdoc.corpus` works on it unchanged; a member read at its (offset,
length) is one ranged GET (``ranged``: no read-ahead). The ETag the listing
gave each object is kept in this process (:func:`as_listed`): a read carries it
(S3's ``If-Match``), so opening an object listed costs no HEAD.

An object's identity for change detection is its ETag (else its version id
or generation) with its size: :func:`object_stat` gives it in the shape of a
file's stat (:class:`ObjectStat`), stored where a file's stat is stored
(``ino`` holds a 63-bit hash of the ETag, ``dev`` is :data:`OBJECT_DEV`), so
that a second run over an unchanged bucket reads nothing. An object without
an ETag (``UNKNOWN`` there) is read again at every run (see
:func:`simdoc.stages.racy.racy`).

The backends are optional extras: s3fs for ``s3://`` (``pip install
'simdoc[s3]'``); a missing one is a :class:`~simdoc.errors.CorpusError` that
names it. Storage options come from the environment and fsspec's own config
as fsspec reads them, and from ``--storage-option KEY=VALUE``
(:func:`configure`). On S3 a failing request is retried with backoff a few
times (botocore's standard mode) and a connection times out after a few
seconds, so an unreachable endpoint is one error, not a hang.

Nothing here imports the rest of :mod:`simdoc.corpus`: the listing gives
plain tuples that :mod:`simdoc.corpus.walk` makes into its entries, and
:mod:`simdoc.corpus.files` opens objects through
:mod:`simdoc.corpus.object_reads`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat as stat_module
from dataclasses import dataclass

from simdoc.errors import CorpusError, UsageError

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
OBJECT_DEV = -2  # the "device" of every object: no file system's (a device number is never negative)
UNKNOWN = -1  # no ETag, version or generation: the object cannot be told unchanged without reading it
# The extra that installs each protocol's fsspec backend (the others: the package fsspec names).
EXTRAS = {"s3": "s3", "s3a": "s3"}
# On S3: a few attempts with backoff (throttling included), a connection given up after 5 s.
_S3_CONFIG = {"connect_timeout": 5, "read_timeout": 60, "retries": {"max_attempts": 4, "mode": "standard"}}

_options: dict[str, object] = {}  # --storage-option, for this process (workers: given with the work)
# S3 objects listed in this process, by URL: (ETag, size, modified time in ns), the ETag of 32 hex
# digits as its 16 bytes (10^6 objects listed are 10^6 entries). Forked workers inherit it.
_listed: dict[str, tuple[str | bytes, int, int]] = {}
_MD5_TAG = re.compile(r'^"[0-9a-f]{32}"$')


def is_url(path: object) -> bool:
    """Whether a corpus or a path is a URL that fsspec reads (``s3://...``; not ``file://``)."""
    if not isinstance(path, str):
        return False
    m = _URL.match(path)
    return m is not None and m.group(1).lower() != "file"


def protocol_of(url: str) -> str:
    return _URL.match(url).group(1).lower()


def canonical(url: str) -> str:
    """The URL without trailing slashes: the base that ids are relative to (``s3://bucket/prefix``).

    A ``.``, ``..`` or empty part after the bucket would make ids name another place: an error.
    """
    head, rest = url[: len(_URL.match(url).group(0))], url[len(_URL.match(url).group(0)) :]
    rest = rest.rstrip("/")
    parts = rest.split("/")
    if not rest or "\0" in rest or any(p in ("", ".", "..") for p in parts):
        raise CorpusError(f"corpus {url} is not a bucket and prefix simdoc can name", hint="write it as s3://BUCKET/PREFIX/")
    return head.lower() + rest


def parse_option(text: str) -> tuple[str, object]:
    """``KEY=VALUE`` of ``--storage-option``: VALUE as JSON where it parses (``true``, ``3``,
    ``{"region_name": "eu-west-1"}``), else as the string given."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise UsageError(f"--storage-option takes KEY=VALUE, got {text!r}")
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = value
    return key.strip(), parsed


def configure(options: dict[str, object]) -> None:
    """The storage options of this process (``--storage-option``), replacing those set before.
    Not index parameters: they are never written to the index. They travel to the workers with
    the work (:func:`current`): a pool worker is given them when it starts, a Dask task in its terms."""
    if options != _options:
        _options.clear()
        _options.update(options)


def current() -> dict[str, object]:
    """A copy of this process's storage options, to send with the work to another process."""
    return dict(_options)


def _storage_options(protocol: str) -> dict[str, object]:
    opts = dict(_options)
    if protocol in ("s3", "s3a"):
        given = opts.get("config_kwargs")
        opts["config_kwargs"] = {**_S3_CONFIG, **(given if isinstance(given, dict) else {})}
    return opts


def filesystem(url: str):
    """(fsspec file system, the URL's path without its protocol); a missing backend is a CorpusError
    naming what to install. Instances are fsspec's, cached per process (a forked worker makes its own)."""
    protocol = protocol_of(url)
    extra = EXTRAS.get(protocol)
    install = f"pip install 'simdoc[{extra}]'" if extra else None
    try:
        import fsspec
    except ImportError:
        raise CorpusError(
            f"a corpus at a URL ({protocol}://) needs fsspec and its {protocol} backend",
            hint=install or "install fsspec and the package for that protocol",
        ) from None
    try:
        cls = fsspec.get_filesystem_class(protocol)
    except ImportError as exc:
        # fsspec names each protocol's class ("gcsfs.GCSFileSystem"): its package is what to install.
        from fsspec.registry import known_implementations

        known = known_implementations.get(protocol, {}).get("class", "")
        package = f"pip install {known.split('.')[0]}" if known else "install the package that fsspec names"
        raise CorpusError(f"{protocol}:// needs a backend that is not installed ({exc})", hint=install or package) from None
    except ValueError:
        raise CorpusError(f"fsspec knows no protocol {protocol}://", hint="check the URL") from None
    try:
        fs = cls(**_storage_options(protocol))
    except Exception as exc:  # each backend checks its own options
        raise CorpusError(f"cannot use {protocol}:// with these storage options: {said(exc)}", hint="check --storage-option") from None
    return fs, cls._strip_protocol(url)


def said(exc: BaseException) -> str:
    """The first line of what a backend's exception says (some put a traceback's worth in it)."""
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def _web(url: str) -> bool:
    return protocol_of(url) in ("http", "https")


def where_hint(url: str) -> str:
    """What to check when ``url``'s server gave no answer. A web server has no endpoint option:
    naming ``endpoint_url`` there would send the user after a setting that does not apply."""
    if _web(url):
        return "check the address and the network"
    return "check the endpoint and the network (--storage-option endpoint_url=...)"


def unreachable(url: str, exc: BaseException) -> CorpusError:
    """The error for a listing that failed: no such bucket, access refused, or no answer."""
    if isinstance(exc, FileNotFoundError):
        hint = "check the address" if _web(url) else "check the bucket and prefix"
        return CorpusError(f"corpus {url} does not exist ({said(exc)})", hint=hint)
    if isinstance(exc, PermissionError) or type(exc).__name__ in ("NoCredentialsError", "PartialCredentialsError"):
        return CorpusError(
            f"access to {url} refused ({said(exc)})",
            hint="check the credentials (environment, fsspec config, --storage-option key=... secret=...)",
        )
    return CorpusError(f"cannot list {url}: {said(exc)}", hint=where_hint(url))


def reach(url: str, options: dict[str, object]) -> str | None:
    """Why this process cannot read ``url`` with the storage ``options`` (which it takes as its
    own), or None: one HEAD or one-key listing of the prefix (a Dask worker's check of the run)."""
    configure(options)
    try:
        fs, path = filesystem(url)
        fs.invalidate_cache(path)
        fs.info(path)
    except CorpusError as exc:
        return exc.message
    except Exception as exc:  # gone, refused, unreachable: each backend raises its own kinds
        return unreachable(url, exc).message
    return None


# ---------------------------------------------------------------- identity


@dataclass(frozen=True)
class ObjectStat:
    """An object's identity in the shape of :func:`os.stat`'s result (see the module docstring)."""

    st_size: int
    st_mtime_ns: int
    st_ino: int
    st_dev: int = OBJECT_DEV
    st_mode: int = stat_module.S_IFREG | 0o444

    @property
    def st_ctime_ns(self) -> int:
        return self.st_mtime_ns  # an object has no change time: its modification time stands in

    def values(self) -> tuple[int, int, int, int, int]:
        """As :meth:`simdoc.corpus.walk.FileEntry.stat` orders a file's stat."""
        return (self.st_size, self.st_mtime_ns, self.st_ctime_ns, self.st_ino, self.st_dev)


_TOKENS = ("ETag", "etag", "VersionId", "version_id", "generation", "md5Hash", "content_md5")
_TIMES = ("LastModified", "last_modified", "Last-Modified", "mtime", "updated", "modified", "created", "creation_time")


def object_identity(info: dict) -> ObjectStat:
    """The identity of an object from its fsspec info (a listing's or a HEAD's)."""
    token = next((str(info[k]).strip('"') for k in _TOKENS if info.get(k) not in (None, "")), None)
    return ObjectStat(int(info.get("size") or 0), _time_ns(info), _ino(token))


def _ino(token: str | None) -> int:
    if token is None:
        return UNKNOWN
    return int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "little") >> 1


def _time_ns(info: dict) -> int:
    for k in _TIMES:
        v = info.get(k)
        if v is None:
            continue
        # Whole seconds: S3's listing gives milliseconds, its HEAD (Last-Modified) seconds.
        if hasattr(v, "timestamp"):
            return int(v.timestamp()) * 1_000_000_000
        if isinstance(v, (int, float)):
            return int(v) * 1_000_000_000
        if isinstance(v, str):
            from datetime import datetime
            from email.utils import parsedate_to_datetime

            try:
                return int(datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp()) * 1_000_000_000
            except ValueError:
                pass
            try:  # an HTTP date (Last-Modified: Thu, 26 Nov 2026 07:35:43 GMT)
                return int(parsedate_to_datetime(v).timestamp()) * 1_000_000_000
            except (TypeError, ValueError):
                continue
    return 0


def object_stat(url: str) -> ObjectStat | None:
    """The object's identity now (one HEAD), or None if it is gone or cannot be asked."""
    fs, path = filesystem(url)
    try:
        fs.invalidate_cache(path)
        info = fs.info(path)
    except Exception:  # gone, refused, unreachable: not the object indexed, as far as anyone can tell
        return None
    return object_identity(info) if info.get("type", "file") == "file" else None


def still_there(path: str) -> bool:
    """Whether a document's file (or object: one HEAD) is still there, whatever it holds now.

    What tells a document that could not be read as indexed *stale* (changed:
    index it again) from *gone* (:func:`simdoc.stages.verify.verify_pairs`).
    An object is asked of the store: ``os.path.exists`` of a URL is always
    False, which made every edited object "gone"."""
    if not is_url(path):
        return os.path.exists(path)
    return object_stat(path) is not None


def remember(url: str, info: dict) -> None:
    """Keep what a listing (or a HEAD) said of an S3 object: its reads then carry that ETag
    (:func:`as_listed`) instead of asking it by a HEAD first."""
    tag = info.get("ETag")
    if isinstance(tag, str) and tag and protocol_of(url) in ("s3", "s3a") and info.get("type", "file") == "file":
        packed: str | bytes = bytes.fromhex(tag[1:-1]) if _MD5_TAG.match(tag) else tag
        _listed[url] = (packed, int(info.get("size") or 0), _time_ns(info))


def as_listed(url: str) -> tuple[str, ObjectStat] | None:
    """(ETag, identity) of an object as this process last listed it, or None (not listed here)."""
    got = _listed.get(url)
    if got is None:
        return None
    packed, size, mtime_ns = got
    tag = f'"{packed.hex()}"' if isinstance(packed, bytes) else packed
    return tag, ObjectStat(size, mtime_ns, _ino(tag.strip('"')))


# ---------------------------------------------------------------- listing


def base_of(url: str) -> str:
    """The URL that ids are relative to: the prefix, or the "folder" of the one object a URL
    without a trailing slash names (one HEAD request to tell)."""
    return _base(url)[0]


def _base(url: str) -> tuple[str, str | None]:
    """(base, the path of the one object named, or None)."""
    base = canonical(url)
    if url.endswith("/"):
        return base, None
    fs, path = filesystem(base)
    try:
        one = fs.isfile(path)
    except Exception as exc:
        raise unreachable(base, exc) from None
    if not one or "/" not in path:
        return base, None
    return base.rpartition("/")[0], path  # (an HTTP path is the whole URL: not the protocol added again)


def _sized(fs, found: dict[str, dict]) -> None:
    """The size and the rest of the identity of the objects a listing gives without their size
    (an HTTP server's pages of links), asked of each (a HEAD, a few at a time)."""
    missing = [name for name, info in found.items() if info.get("size") is None and info.get("type", "file") == "file"]
    if missing:
        from concurrent.futures import ThreadPoolExecutor

        def one(name: str) -> None:
            try:
                found[name] = {**found[name], **fs.info(name)}
            except FileNotFoundError:
                found.pop(name, None)  # gone since the page listed it

        with ThreadPoolExecutor(min(16, len(missing))) as pool:
            list(pool.map(one, missing))


def forget_listings(fs, root: str) -> None:
    """Drop what ``fs`` keeps of earlier listings of ``root`` and of every "folder" under it.

    ``invalidate_cache(root)`` drops only ``root`` and its parents, and s3fs's
    listing never replaces a folder it keeps: an object edited since (a second
    run in one process, or a re-read after verification) would be opened with
    its old ETag, and its read refused as if it had vanished."""
    fs.invalidate_cache(root)
    kept = getattr(fs, "dircache", None)
    if kept is not None:
        for name in [k for k in list(kept) if isinstance(k, str) and k.startswith(root.rstrip("/") + "/")]:
            kept.pop(name, None)


def list_prefix(url: str) -> tuple[str, list[tuple[str, str, ObjectStat]], list[tuple[str, str, int, int]]]:
    """The objects under ``url``: (base URL, [(id, URL, identity)], [(id, why passed over, size, time)]).

    Ids are keys relative to the prefix with "/" separators, unsorted. A URL
    that names one object lists that object, relative to its "folder" (as a
    file named on the command line). Hidden names (a part starting with
    ".") are left out as in a folder; a key that cannot be a path (an empty,
    ``.`` or ``..`` part) or that lies "inside" another object's key
    (``a`` and ``a/b``: no file system holds both) is passed over.

    Raises
    ------
    CorpusError
        No backend, no such bucket or prefix, access refused, endpoint unreachable.
    """
    base, one = _base(url)
    fs, root = filesystem(base)
    _listed.clear()  # this listing replaces the last one
    try:
        forget_listings(fs, root)  # fsspec keeps listings: this run lists the store as it is now
        found = {one: fs.info(one)} if one is not None else fs.find(root, detail=True)
        if not found:
            fs.ls(root)  # nothing found, or nothing answered? (fsspec's generic find says {} to both)
            found = {}
    except Exception as exc:  # every backend raises its own kinds (botocore: not OSError)
        raise unreachable(canonical(url), exc) from None
    if not found:
        raise CorpusError(f"corpus {base} does not exist (no object under it)", hint="check the URL (bucket and prefix)")
    try:
        _sized(fs, found)
    except Exception as exc:
        raise unreachable(canonical(url), exc) from None
    listed: list[tuple[str, str, ObjectStat]] = []
    passed: list[tuple[str, str, int, int]] = []
    keys = set()
    for name, info in found.items():
        if info.get("type", "file") != "file" or not name.startswith(root + "/"):
            continue
        rel = name[len(root) + 1 :]
        if rel.endswith("/") and not info.get("size"):
            continue  # a "folder" marker some tools write
        keys.add(rel)
    for name, info in sorted(found.items()):
        rel = name[len(root) + 1 :]
        if rel not in keys:
            continue
        parts = rel.split("/")
        ident = object_identity(info)
        if any(p.startswith(".") for p in parts if p not in (".", "..")):
            continue
        if any(p in ("", ".", "..") for p in parts):
            # Not an id a docs table can hold: listed under the corpus itself, with its key.
            passed.append((".", f"the key {rel!r} is no path (an empty, '.' or '..' part), skipped", ident.st_size, ident.st_mtime_ns))
            continue
        outer = next(("/".join(parts[:i]) for i in range(1, len(parts)) if "/".join(parts[:i]) in keys), None)
        if outer is not None:
            passed.append((rel, f"a key inside the object {outer} (a file cannot hold files), skipped", ident.st_size, ident.st_mtime_ns))
            continue
        listed.append((rel, f"{base}/{rel}", ident))
        remember(listed[-1][1], info)
    # What fsspec keeps of the listing (~1 KB an object) is not what objects are opened by: the
    # ETags kept here are (as_listed()), and an object edited since is found so when it is read.
    forget_listings(fs, root)
    return base, listed, passed
