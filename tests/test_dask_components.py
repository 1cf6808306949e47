"""`clusters` and `dedup` with --scheduler, on a cluster of separate processes: the local bytes.

The components are found on the cluster (simdoc.stages.dask_components),
the clusters named and ordered on the client as without --scheduler. The
corpus has exact copies (groups folded by simdoc.exact, linked as stars)
and edited copies (verified pairs).
"""

from __future__ import annotations

import pytest

pytest.importorskip("distributed")

from test_dask_contract import simdoc  # noqa: E402
from test_pipeline import make_corpus  # noqa: E402


def test_clusters_and_dedup_on_the_cluster_print_the_local_bytes(tmp_path, cluster):
    here = tmp_path / "client"
    docs = make_corpus(here / "c", seed=61, n_base=12)
    for name in ("copies/a.txt", "copies/b.txt"):
        (here / "c" / name).write_text(docs["base/doc03.txt"], encoding="utf-8")
    cluster.start_worker()
    cluster.start_worker()
    cluster.wait_for_workers(2)
    commands = [
        ("clusters", "-t", "0.5"),
        ("clusters", "-t", "0.5", "--format", "jsonl"),
        ("dedup", "-t", "0.5", "--format", "tsv"),
        ("dedup", "-t", "0.5", "--keep", "longest"),
    ]
    for args in commands:
        local = simdoc(*args, "c", "--index", "local.idx", "-j", "1", cwd=here)
        assert local.returncode == 0 and local.stdout.count("\n") >= 3, local.stderr
        r = simdoc(*args, "c", "--index", "idx", "--scheduler", cluster.address, "-v", cwd=here)
        assert r.returncode == 0, r.stderr + cluster.logs()
        assert r.stdout == local.stdout, args
        assert "components on the cluster:" in r.stderr  # found there, not on the client
    assert "copies/a.txt" in local.stdout or "copies/b.txt" in local.stdout  # the exact copies were clustered
