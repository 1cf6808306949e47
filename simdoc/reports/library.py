"""The library's calls over an index: clusters, dedup and query, as data.

``simdoc.find_clusters``, ``simdoc.dedup`` and ``simdoc.query`` are what
``simdoc clusters``, ``simdoc dedup`` and ``simdoc query`` compute, returned
instead of printed: the commands call the same functions
(:func:`clusters_of`, :func:`dedup_of`, :func:`query`) and only write what
they return. Warnings a command prints on stderr are in the result's
``warnings``; errors are raised as :class:`simdoc.errors.SimdocError`.

The keywords of :func:`find_clusters` and :func:`dedup` are those of
:func:`simdoc.find_pairs` (the flags of ``simdoc pairs``); their pairs are
always verified, since clusters are made of verified pairs only.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from simdoc.corpus.objects import is_url
from simdoc.corpus.walk import resolve_sources
from simdoc.engines import DaskEngine, open_engine
from simdoc.errors import IndexError_, UsageError
from simdoc.params import Params, Threshold
from simdoc.reports.clusters import KEEP_POLICIES, Cluster, DedupDecision, cluster_pairs, plan_dedup
from simdoc.reports.query import Match, query_documents
from simdoc.stages.dask_components import Rounds
from simdoc.stages.pairs import pairs_index, run_pairs
from simdoc.reports.droppable import outside_corpus, still_indexed
from simdoc.stages.reread import reader_of
from simdoc.stages.results import PairsResult
from simdoc.store.directory import IndexStore
from simdoc.store.loaded import open_index


@dataclass
class Clusters:
    """Groups of near-duplicates (:func:`find_clusters`); iterating gives the clusters.

    Attributes
    ----------
    clusters : list of Cluster
        Connected components of the verified pairs, numbered from 1 in
        order of their smallest member; members sorted by id.
    pairs : PairsResult
        The verified pairs they were made of, with the run's counts (documents,
        files skipped, threshold, stages built).
    index : Path
        The index directory used.
    rounds : Rounds
        With a Dask scheduler: the rounds of the components found on the cluster.
    """

    clusters: list[Cluster]
    pairs: PairsResult
    index: Path
    rounds: Rounds = field(default_factory=Rounds)

    def __iter__(self) -> Iterator[Cluster]:
        return iter(self.clusters)

    def __len__(self) -> int:
        return len(self.clusters)

    def __getitem__(self, i: int) -> Cluster:
        return self.clusters[i]


@dataclass
class Dedup:
    """What :func:`dedup` found can go: per cluster the document to keep and the others.

    Attributes
    ----------
    decisions : list of DedupDecision
        One per cluster whose document to keep is still the file indexed;
        ``drop`` holds only files still as indexed (see ``warnings``).
    keep : str
        The policy that chose the documents to keep.
    root : str or None
        The corpus folder the document ids are relative to, if the corpus was
        named to this call and the index is its index; None otherwise: an
        index alone is not trusted to say where its files are, so that no
        absolute path the caller did not name is ever given for deletion.
    sizes : dict of str to int
        Bytes of each document of the clusters, by id.
    clusters : Clusters
        The clusters the decisions were made from.
    warnings : list of str
        The documents left out because their file changed or went since it
        was indexed (a cluster whose document to keep did is left out whole),
        or because deleting them would harm (see ``unlisted``).
    unlisted : list of str
        Copies of a document kept that are not in ``decisions`` only because
        deleting their files would harm (a file outside the corpus, reached
        through a link; the kept document's own file, a link or a hard link):
        :meth:`write` leaves them out of the corpus it writes.
    """

    decisions: list[DedupDecision]
    keep: str
    root: str | None
    sizes: dict[str, int]
    clusters: Clusters
    warnings: list[str] = field(default_factory=list)
    unlisted: list[str] = field(default_factory=list)

    def __iter__(self) -> Iterator[DedupDecision]:
        return iter(self.decisions)

    def __len__(self) -> int:
        return len(self.decisions)

    def path(self, doc_id: str, absolute: bool = False) -> str:
        """The path of a document: its id (relative to the corpus), or joined to the corpus folder
        (``absolute``: only when the corpus was named, see ``root``)."""
        if not absolute:
            return doc_id
        if self.root is None:
            raise UsageError(
                "absolute paths need the CORPUS named (simdoc dedup CORPUS --index IDX --absolute): an index "
                "alone is not trusted to say where its files are; without --absolute, dedup gives paths "
                "relative to the corpus"
            )
        if os.sep == "/":
            # Verbatim: a member's key may hold anything ("crawl.warc.gz/#http://a.example/"), and
            # os.path.join of its parts dropped the empty one ("#http:/a.example/"). A file's id is a
            # relative path with no empty, "." or ".." part (checked as the index loads): the same.
            return self.root.rstrip("/") + "/" + doc_id
        return os.path.join(self.root, *doc_id.split("/"))

    def paths(self, absolute: bool = False) -> list[str]:
        """The documents that can go, in cluster order: what ``simdoc dedup`` prints."""
        return [self.path(x, absolute) for d in self.decisions for x in d.drop]

    @property
    def n_drop(self) -> int:
        return sum(len(d.drop) for d in self.decisions)

    @property
    def drop_bytes(self) -> int:
        return sum(self.sizes[x] for d in self.decisions for x in d.drop)

    def write(self, dest: str | os.PathLike, link: bool = False):
        """Write the corpus without :meth:`paths` to the new or empty folder (or URL prefix) ``dest``, in its
        own formats, as ``simdoc dedup --write`` does (:mod:`simdoc.reports.write`); returns
        what was written (:class:`~simdoc.reports.write.Written`: files, documents, dropped, the
        skipped files copied as they are (symbolic links made again), those not written with why,
        and the links that lead nowhere in ``dest``). Only when the corpus was named (see
        ``root``): the files are read from it."""
        from simdoc.reports.write import write_deduplicated

        if self.root is None:
            raise UsageError(
                "writing the deduplicated corpus needs the CORPUS named (simdoc dedup CORPUS --write DIR): an index "
                "alone is not trusted to say where its files are"
            )
        return write_deduplicated(self, dest if is_url(dest) else Path(dest), link)


@dataclass
class QueryResult:
    """The indexed near-duplicates of each query (:func:`query`); iterating gives the matches.

    ``matches`` are ordered by query (as given), then similarity descending,
    then document id; ``warnings`` name queries with no shingles and
    candidates whose file changed since it was indexed; ``threshold`` is the
    one used and where it came from (asked, the index's, or the default).
    """

    matches: list[Match]
    warnings: list[str]
    threshold: Threshold

    def __iter__(self) -> Iterator[Match]:
        return iter(self.matches)

    def __len__(self) -> int:
        return len(self.matches)


def find_clusters(
    corpus: str | os.PathLike | list | None = None,
    index: str | os.PathLike | None = None,
    *,
    threshold: float | None = None,
    measure: str = "set",
    unit: str | None = None,
    k: int | None = None,
    lowercase: bool | None = None,
    num_perm: int | None = None,
    seed: int | None = None,
    scheme: str | None = None,
    bands: int | None = None,
    rows: int | None = None,
    jobs: int | None = None,
    rebuild: bool = False,
    progress: bool = False,
    wait: float = 0.0,
    max_bytes: int | None = None,
    follow_symlinks: bool | None = None,
    include: list[str] | None = None,
    exclude: list[str] | None = None,
    text_field: str | None = None,
    id_field: str | None = None,
    main_content: bool | None = None,
    unicode: str | None = None,
    min_length: int | None = None,
    all_responses: bool | None = None,
    scheduler: str | None = None,
    wait_workers: float | None = None,
) -> Clusters:
    """Groups of near-duplicates of a corpus: connected components of its verified pairs.

    Takes the corpus and keywords of :func:`simdoc.find_pairs` and builds or
    refreshes the index the same way (without ``corpus``, the index is used
    as it is). Only pairs whose exact similarity reaches the threshold link
    documents; linking is transitive.

    Examples
    --------
    ::

        for cluster in simdoc.find_clusters("corpus/", index="corpus.idx", threshold=0.8):
            print(cluster.cluster_id, cluster.members)
    """
    params = Params.of(
        dict(
            threshold=threshold, measure=measure, unit=unit, k=k, lowercase=lowercase, num_perm=num_perm, seed=seed,
            scheme=scheme, bands=bands, rows=rows, max_bytes=max_bytes, follow_symlinks=follow_symlinks,
            include=include, exclude=exclude, text_field=text_field, id_field=id_field, main_content=main_content,
            unicode=unicode, min_length=min_length, all_responses=all_responses, verify=True,
            all_candidates=False,
        )
    )
    return clusters_of(
        corpus, index, params, jobs=jobs, scheduler=scheduler, wait_workers=wait_workers, rebuild=rebuild,
        progress=progress, wait=wait,
    )


def clusters_of(
    corpus: str | os.PathLike | list | None,
    index: str | os.PathLike | None,
    params: Params,
    *,
    jobs: int | None = None,
    scheduler: str | None = None,
    wait_workers: float | None = None,
    rebuild: bool = False,
    progress: bool = False,
    wait: float = 0.0,
) -> Clusters:
    """:func:`find_clusters` with the parameters made (as ``simdoc clusters`` and ``dedup`` call it).

    ``params`` must ask for verified pairs (clusters are made of nothing
    else). With a Dask engine, the components are found on its cluster too
    (while the engine is open, so that a lost scheduler is a ClusterError
    there as well).
    """
    index = pairs_index(corpus, index)
    rounds = Rounds()
    with open_engine(jobs, scheduler, wait_workers, index=index, corpus=corpus) as engine:
        res = run_pairs(corpus, index, params, engine=engine, rebuild=rebuild, progress=progress, wait=wait)
        found = cluster_pairs(res, engine.client if isinstance(engine, DaskEngine) else None, rounds)
    return Clusters(found, res, index, rounds)


def dedup(
    corpus: str | os.PathLike | list | None = None,
    index: str | os.PathLike | None = None,
    *,
    keep: str = "first",
    threshold: float | None = None,
    measure: str = "set",
    unit: str | None = None,
    k: int | None = None,
    lowercase: bool | None = None,
    num_perm: int | None = None,
    seed: int | None = None,
    scheme: str | None = None,
    bands: int | None = None,
    rows: int | None = None,
    jobs: int | None = None,
    rebuild: bool = False,
    progress: bool = False,
    wait: float = 0.0,
    max_bytes: int | None = None,
    follow_symlinks: bool | None = None,
    include: list[str] | None = None,
    exclude: list[str] | None = None,
    text_field: str | None = None,
    id_field: str | None = None,
    main_content: bool | None = None,
    unicode: str | None = None,
    min_length: int | None = None,
    all_responses: bool | None = None,
    scheduler: str | None = None,
    wait_workers: float | None = None,
) -> Dedup:
    """The documents that can go: of every cluster (:func:`find_clusters`), all but one.

    ``keep`` chooses the one to keep: ``first`` (smallest id), ``longest`` /
    ``shortest`` (bytes), ``newest`` / ``oldest`` (modification time); ties
    go to the smallest id. A document is listed only while its file is
    still the one indexed (others are named in ``warnings``). Nothing is
    deleted. The other keywords are those of :func:`simdoc.find_pairs`.

    Examples
    --------
    ::

        plan = simdoc.dedup("corpus/", index="corpus.idx", threshold=0.95, keep="newest")
        for path in plan.paths(absolute=True):
            print(path)     # review, then delete
    """
    params = Params.of(
        dict(
            threshold=threshold, measure=measure, unit=unit, k=k, lowercase=lowercase, num_perm=num_perm, seed=seed,
            scheme=scheme, bands=bands, rows=rows, max_bytes=max_bytes, follow_symlinks=follow_symlinks,
            include=include, exclude=exclude, text_field=text_field, id_field=id_field, main_content=main_content,
            unicode=unicode, min_length=min_length, all_responses=all_responses, verify=True,
            all_candidates=False,
        )
    )
    return dedup_of(
        corpus, index, params, keep, jobs=jobs, scheduler=scheduler, wait_workers=wait_workers, rebuild=rebuild,
        progress=progress, wait=wait,
    )


def dedup_of(
    corpus: str | os.PathLike | list | None,
    index: str | os.PathLike | None,
    params: Params,
    keep: str = "first",
    *,
    jobs: int | None = None,
    scheduler: str | None = None,
    wait_workers: float | None = None,
    rebuild: bool = False,
    progress: bool = False,
    wait: float = 0.0,
) -> Dedup:
    """:func:`dedup` with the parameters made (as ``simdoc dedup`` calls it)."""
    if keep not in KEEP_POLICIES:  # before any work
        raise UsageError(f"--keep must be one of {', '.join(KEEP_POLICIES)}, got {keep!r}")
    found = clusters_of(
        corpus, index, params, jobs=jobs, scheduler=scheduler, wait_workers=wait_workers, rebuild=rebuild,
        progress=progress, wait=wait,
    )
    with IndexStore(found.index).reading():
        loaded = open_index(found.index)
        build = loaded.stage("shingle").get("build_id", "")  # as the pairs took it (simdoc.stages.pairs)
        # Records of the clusters' documents only (rows of the index, as the clusters name them).
        rows = np.unique(np.array([r for c in found.clusters for r in c.rows], dtype=np.int64))
        records = loaded.doc_records(rows[rows < len(loaded.docs())])
        root = loaded.stage("shingle").get("corpus", "")
        reader = reader_of(loaded)
    if corpus is not None and resolve_sources(corpus)[0] != root:
        # The corpus was checked against the index when the stages were brought up to date; a
        # writer that ran since could have rebuilt it for another one.
        raise IndexError_(f"the index at {found.index} is now the index of {root}, not of the corpus named", hint="run dedup again")
    if build != found.pairs.build:
        # Another run updated the index between the pairs and this read: sizes and times would
        # belong to other documents than the clusters. (The docs table's build says so at once;
        # its 10^6 ids compared as two lists were ~1 s.)
        raise IndexError_(f"the index at {found.index} changed while dedup ran", hint="run dedup again")
    rows_of = {m: r for c in found.clusters for m, r in zip(c.members, c.rows)}
    outside = outside_corpus(reader, (m for c in found.clusters for m in c.members), rows_of)
    checked = still_indexed(plan_dedup(found.clusters, records, keep, outside), reader, outside, rows_of)
    trusted = root if corpus is not None else None
    sizes = {r["id"]: r["size"] for r in records}
    return Dedup(checked.decisions, keep, trusted, sizes, found, checked.warnings, checked.unlisted)


def query(
    index: str | os.PathLike,
    documents: Iterable[tuple[str, str]] | Iterable[str],
    *,
    threshold: float | None = None,
    verify: bool = True,
    all_candidates: bool = False,
) -> QueryResult:
    """The indexed near-duplicates of each document, without changing the index.

    ``documents``: (query id, text) pairs, or texts alone (then named by
    their position: "0", "1", ...). Each is shingled, signed and banded as
    the index's own documents were; its candidates are scored by estimate
    and verified against their documents, re-read from the corpus. The
    threshold defaults to the one the index was banded for, else 0.6.

    Examples
    --------
    ::

        for m in simdoc.query("corpus.idx", [("draft", open("draft.txt").read())]):
            print(m.query, m.doc, m.estimated, m.jaccard)
    """
    docs = [(str(i), d) if isinstance(d, str) else tuple(d) for i, d in enumerate(documents)]
    for d in docs:
        if len(d) != 2 or not isinstance(d[1], str):
            raise TypeError("documents are texts, or (query id, text) pairs")
    matches, warnings, chosen = query_documents(index, docs, threshold, verify=verify, all_candidates=all_candidates)
    return QueryResult(matches, warnings, chosen)
