"""A corpus of objects named one by one: ``--files-from`` listing URLs (``s3://bucket/crawl/a.warc.gz``).

As a list of local files is, a list of URLs is read as the files it names,
with ids relative to the deepest "folder" holding all of them
(:func:`common_base`): ``s3://b/crawl/x/a.txt`` and ``s3://b/crawl/y/c.txt``
give ``x/a.txt`` and ``y/c.txt``, the ids a list of the same files on disk
gives. Every name is asked of the store (one HEAD each, a few at a time:
:func:`stat_listed`), never the whole prefix listed, so a short list under a
large prefix costs what it names. A name that is gone by the time it is
read is skipped with a warning, as a listed file that is gone is.

All URLs of one list are in one bucket of one store (ids are relative to
one base, and the storage options are one store's); a list that mixes URLs
and local paths, protocols or buckets is an error.
"""

from __future__ import annotations

import posixpath
from concurrent.futures import ThreadPoolExecutor

from simdoc.corpus.objects import ObjectStat, canonical, filesystem, object_identity, protocol_of, remember, unreachable
from simdoc.errors import CorpusError

_AT_ONCE = 16  # HEAD requests in flight: a round trip each, so a few at a time


def common_base(urls: list[str]) -> str:
    """The URL that the ids of ``urls`` (objects) are relative to: their deepest common "folder".

    Raises
    ------
    CorpusError
        The URLs are of several protocols or buckets, or one is no key simdoc can name.
    """
    names = [canonical(u) for u in urls]
    protocols = {protocol_of(n) for n in names}
    heads = {n[: len(protocol_of(n)) + 3] for n in names}
    if len(protocols) > 1:
        raise CorpusError(f"the corpus's URLs are of several stores ({', '.join(sorted(heads))})", hint="run simdoc once per store")
    head = heads.pop()
    paths = [n[len(head) :] for n in names]
    if len({p.split("/", 1)[0] for p in paths}) > 1:
        raise CorpusError("the corpus's URLs are in several buckets", hint="run simdoc once per bucket")
    if any("/" not in p for p in paths):
        raise CorpusError(f"{head}{next(p for p in paths if '/' not in p)} is a bucket, not an object", hint="list the objects")
    return head + posixpath.commonpath([posixpath.dirname(p) for p in paths])


def stat_listed(urls: list[str]) -> list[ObjectStat | str]:
    """The identity of each object named (one HEAD each), or why it is passed over.

    Raises
    ------
    CorpusError
        No backend, access refused, the endpoint unreachable (not a name that is gone).
    """
    if not urls:
        return []
    fs, _ = filesystem(urls[0])

    def one(url: str) -> ObjectStat | str:
        path = fs._strip_protocol(url)
        try:
            fs.invalidate_cache(path)
            info = fs.info(path)
        except FileNotFoundError:
            return "no such object, skipped"
        except Exception as exc:  # refused, unreachable: each backend raises its own kinds
            raise unreachable(url, exc) from None
        if info.get("type", "file") != "file":
            return "a prefix, not an object: skipped (name its objects, or give the prefix as the CORPUS)"
        remember(url, info)  # read by this ETag: no second HEAD to open it
        return object_identity(info)

    with ThreadPoolExecutor(min(_AT_ONCE, len(urls))) as pool:
        return list(pool.map(one, urls))
