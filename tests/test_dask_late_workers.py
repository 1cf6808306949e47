"""Workers that join after the contract check: every task checks its worker first (issue 20).

On a cluster of separate processes (test_dask_contract.Cluster), with
`simdoc` run as a command. A late worker is made deterministic without
sleeps, as in test_dask_faults: the first worker is started alone, with a
preload that makes one task of a stage leave a marker file and hang until
the worker is killed. Once the marker is there the run is past the contract
check, and the first worker holds a task; the late worker is started, the
scheduler is waited for until it lists both, and the first one is killed:
its task, and every task after it, can only run on the late worker.

* a late worker that cannot see the corpus (an empty folder mounted over it)
  stops the run with exit 7 naming it, and no pairs are printed: before the
  tasks checked their worker, it read every file as "vanished" and the run
  printed fewer pairs, with exit 0; one that cannot see the index, joining
  while the candidates are scored: exit 7 naming it;
* a late worker whose Python has no simdoc: exit 7 naming it (before, it
  died unpickling the task, and the run waited for a worker for ever); one
  with another simdoc version: exit 7 naming it (before, it ran the tasks);
* a late worker that keeps the contract joins while the candidates are
  scored, after the client published a manifest the start check never saw:
  the local answer, and the worker was checked against the run's token
  before its first task.

Then: the connected components' tasks (submitted with client.submit, not
map_ordered) are checked too (the client in a process of its own, as
tests/conftest.py asks); and, in this process, the token's life in the
index folder, and what of the corpus a late worker must see.
"""

from __future__ import annotations

import fcntl
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("distributed")

from test_dask_contract import (  # noqa: E402
    HIDE_SIMDOC,
    Cluster,
    _can_hide_folders,
    _env,
    assert_cluster_error,
    hidden,
    simdoc,
)
from test_dask_faults import THIRD, finish, hanging_worker, local_answer, start_pairs, wait_for  # noqa: E402
from test_pipeline import make_corpus  # noqa: E402

from simdoc.engines.dask_checked import Contract, _late_problems  # noqa: E402
from simdoc.engines.dask_contract import BROKEN  # noqa: E402
from simdoc.errors import ClusterError  # noqa: E402
from simdoc.store.names import PARTS, remove_parts  # noqa: E402

ARGS = ("-t", "0.6", "--all-candidates")
SAFETY = 240  # seconds: a run not over by then hangs (the test fails; it does not wait for ever)

OTHER_VERSION = '''
import simdoc
import simdoc.version

simdoc.__version__ = simdoc.version.__version__ = "0.0.0+other"  # this worker's simdoc is another one
'''


def replaced_mid_stage(cluster: Cluster, tmp_path: Path, stage: str, condition: str, corpus: Path, index: Path,
                       *late_args: str, prefix: tuple[str, ...] = ()) -> tuple[str, subprocess.CompletedProcess]:
    """Run pairs on a first worker that hangs in ``stage`` (when ``condition``); once it hangs, start
    the late worker, and kill the first. Returns the late worker's address and the finished run."""
    first, marker = hanging_worker(cluster, tmp_path, stage, condition)
    before = set(cluster.workers())
    run = start_pairs(corpus, "--index", index, *ARGS, "--scheduler", cluster.address, cwd=tmp_path, small_batches=True)
    try:
        wait_for(marker, run, cluster)  # past the contract check: the first worker runs a task
        cluster.start_worker(*late_args, prefix=prefix)
        cluster.wait_for_workers(2)
        late = set(cluster.workers()) - before
        cluster.kill(first)  # its task, and the rest, go to the late worker
    finally:
        r = finish(run, timeout=SAFETY)
    assert len(late) == 1, late
    return late.pop(), r


@pytest.mark.skipif(not _can_hide_folders(), reason="needs unshare -rm (user and mount namespaces) to hide a folder")
@pytest.mark.parametrize("hide", ["corpus", "index"])
def test_a_late_worker_that_cannot_see_the_corpus_or_the_index_stops_the_run(tmp_path, cluster, hide):
    corpus = tmp_path / "c"
    make_corpus(corpus, seed=51, n_base=12)
    index = tmp_path / "idx"
    if hide == "corpus":
        # Three files a reading task: the first worker reads two batches, and hangs in the third.
        late, r = replaced_mid_stage(cluster, tmp_path, "scan", THIRD, corpus, index, prefix=hidden(corpus))
        line = assert_cluster_error(r, f"Dask worker {late} (host ", "cannot see the corpus at", str(corpus))
        assert not (index / "manifest.json").exists()  # nothing it read was published
    else:
        # While scoring: the index, and the run's token in it, were made since the start check.
        late, r = replaced_mid_stage(cluster, tmp_path, "score", "True", corpus, index, prefix=hidden(index))
        line = assert_cluster_error(r, f"Dask worker {late} (host ", f"cannot see the index at {index / PARTS}/contract.")
    assert f"Python {sys.executable})" in line
    assert "vanished" not in r.stderr
    assert "the corpus and the index must be at the same absolute paths" in r.stderr


@pytest.mark.parametrize("late", ["without simdoc", "another simdoc"])
def test_a_late_worker_without_this_simdoc_stops_the_run(tmp_path, cluster, late):
    corpus = tmp_path / "c"
    make_corpus(corpus, seed=52, n_base=12)
    index = tmp_path / "idx"
    preload = tmp_path / "late.py"
    preload.write_text(HIDE_SIMDOC if late == "without simdoc" else OTHER_VERSION)
    address, r = replaced_mid_stage(cluster, tmp_path, "scan", THIRD, corpus, index, "--preload", str(preload))
    if late == "without simdoc":
        line = assert_cluster_error(r, f"Dask worker {address} (host ", "cannot import simdoc", "ModuleNotFoundError")
    else:
        line = assert_cluster_error(r, f"Dask worker {address} (host ", "runs simdoc 0.0.0+other, this client ")
    assert f"Python {sys.executable})" in line
    assert "install simdoc" in r.stderr
    assert not (index / "manifest.json").exists()
    assert address in cluster.workers()  # it said so, and is still there: it did not die on the task


def test_a_late_worker_that_keeps_the_contract_gives_the_local_answer(tmp_path, cluster):
    corpus = tmp_path / "c"
    make_corpus(corpus, seed=53, n_base=12)
    want = local_answer(corpus, tmp_path, *ARGS)
    index = tmp_path / "idx"
    # It joins while the first scoring task hangs: the client has published a manifest since the
    # start check (there was none then: a first build).
    late, r = replaced_mid_stage(cluster, tmp_path, "score", "True", corpus, index)
    assert r.returncode == 0, r.stderr + cluster.logs()
    assert "Traceback" not in r.stderr and "vanished" not in r.stderr
    assert r.stdout == want
    # It was checked before it ran a task: against the token the client wrote into the index for
    # the run, which went with the run (and so did dask-parts).
    passed = json.loads(script(PASSED_TERMS, cluster.address, late))
    tokens = [path for checks in passed for what, path, want in checks
              if what == "the index" and want.startswith("sha256:") and Path(path).parent == index / PARTS]
    assert tokens and all(Path(p).name.startswith("contract.") for p in tokens), passed
    assert any(what == "the corpus" for checks in passed for what, _, _ in checks), passed
    assert not (index / PARTS).exists()
    assert simdoc("check", "--index", index, cwd=tmp_path).returncode == 0


# ---------------------------------------------------------------- a client in a process of its own

# A Dask client in the pytest process can fail to start (tests/conftest.py): these run as scripts.
PASSED_TERMS = """
import json
import sys

from distributed import Client


def passed_terms():  # on the worker (a function of __main__: sent by value): the checks of the terms it met
    module = sys.modules.get("simdoc.engines.dask_checked")
    return [list(checks) for checks in getattr(module, "_PASSED", {}).values()]


with Client(sys.argv[1], timeout="10s") as client:
    print(json.dumps(client.run(passed_terms, workers=[sys.argv[2]])[sys.argv[2]]))
"""

LEFT, RIGHT = [0, 1, 5, 7, 2], [1, 2, 6, 8, 9]
COMPONENTS = f"""
import json
import sys

import numpy as np

from simdoc.engines.dask import connect
from simdoc.engines.dask_checked import CheckedClient, Contract
from simdoc.errors import ClusterError
from simdoc.stages.dask_components import components

left, right = np.array({LEFT}), np.array({RIGHT})
out = {{}}
with connect(sys.argv[1], 60) as client:
    out["checked"] = isinstance(client, CheckedClient)
    docs, labels = components(client, left, right, partition_bytes=64)  # several partitions: futures in and out
    out["docs"], out["labels"] = docs.tolist(), labels.tolist()
    try:
        client.map(abs, [1])
    except NotImplementedError as exc:
        out["map"] = str(exc)
try:
    with connect(sys.argv[1], 60) as client:
        client.contract = Contract(None, [("the corpus", sys.argv[2], "dir")])  # terms no worker meets
        components(client, left, right, partition_bytes=64)
except ClusterError as exc:
    out["error"] = exc.message
print(json.dumps(out))
"""


def script(source: str, *args: object) -> str:
    r = subprocess.run([sys.executable, "-c", source, *map(str, args)], capture_output=True, text=True, env=_env(),
                       timeout=SAFETY)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_the_components_tasks_check_their_worker_too(tmp_path, cluster):
    """cluster_components submits with client.submit (futures as arguments): a worker that breaks
    the terms runs none of its tasks, and the run ends as a ClusterError naming it."""
    from simdoc.reports.clusters import connected_components

    cluster.start_worker()
    cluster.wait_for_workers(1)
    out = json.loads(script(COMPONENTS, cluster.address, tmp_path / "nowhere"))
    assert out["checked"]
    want = connected_components(10, np.array(LEFT), np.array(RIGHT))
    assert out["docs"] == [0, 1, 2, 5, 6, 7, 8, 9] and out["labels"] == want[out["docs"]].tolist()
    worker = re.escape(cluster.workers()[0])
    assert re.match(rf"Dask worker {worker} \(host .*\) cannot see the corpus at .*nowhere: No such file", out["error"]), out
    assert "CheckedClient.submit" in out["map"]


# ---------------------------------------------------------------- in this process


def test_the_token_is_written_once_the_index_folder_is_there_and_goes_with_the_run(tmp_path):
    index = tmp_path / "idx"
    start = [("the folder of the index", str(tmp_path), "dir"), ("the corpus", str(tmp_path / "c"), "dir")]
    with Contract(index, start) as contract:
        key, _, checks = contract.terms()
        assert list(checks) == start  # no index folder yet: the terms of the start
        index.mkdir()  # the first build made it
        key2, _, checks = contract.terms()
        token = Path(contract.token)
        assert key2 != key and token.parent == index / PARTS
        assert checks[:2] == (("the index", str(index), "dir"), ("the index", str(token), checks[1][2]))
        assert checks[1][2].startswith("sha256:") and checks[2:] == (start[1],)
        assert contract.terms()[0] == key2  # the same for the whole run
        with open(token, "rb+") as f, pytest.raises(BlockingIOError):
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held while the client runs
    assert not token.exists() and not (index / PARTS).exists()
    assert list(index.iterdir()) == []


def test_a_dead_clients_token_is_removed_a_live_ones_kept(tmp_path):
    index = tmp_path / "idx"
    (index / PARTS).mkdir(parents=True)
    dead = index / PARTS / ("contract." + "d" * 32)
    dead.write_text("a client killed with -9 left it")
    scan = index / PARTS / "scan"  # the parts of a killed run: kept for the next
    scan.mkdir()
    with Contract(index, []) as live:
        live.terms()
        assert not dead.exists() and Path(live.token).exists()
        with Contract(index, []) as other:  # another client of the same index, meanwhile
            other.terms()
            assert Path(live.token).exists() and Path(other.token).exists() and other.token != live.token
        assert Path(live.token).exists() and not Path(other.token).exists()
    assert sorted(p.name for p in (index / PARTS).iterdir()) == ["scan"]
    # `simdoc cache clean` and the stages' clean-up count a token among simdoc's own.
    dead.write_text("left again")
    assert remove_parts(index / PARTS) and not (index / PARTS).exists()


def test_no_token_where_simdoc_must_not_write(tmp_path):
    start = [("the index", "x", "dir"), ("the index", "x/manifest.json", "sha256:" + "0" * 64)]
    theirs = tmp_path / "theirs"  # a folder of the user's, not an index: the stages refuse it
    theirs.mkdir()
    (theirs / "notes.txt").write_text("mine")
    with Contract(theirs, start) as contract:
        assert list(contract.terms()[2]) == start and contract.token is None
    assert sorted(p.name for p in theirs.iterdir()) == ["notes.txt"]
    linked = tmp_path / "linked"  # an index whose dask-parts is a link: never written through
    outside = tmp_path / "outside"
    outside.mkdir()
    linked.mkdir()
    (linked / PARTS).symlink_to(outside)
    with Contract(linked, start) as contract:
        assert list(contract.terms()[2]) == start and contract.token is None
    assert list(outside.iterdir()) == []


def test_a_late_worker_must_see_one_sampled_entry_of_each_folder():
    """The corpus may change during a run: an entry deleted since the start is no fault of a worker's,
    but an empty folder of the same name is."""
    checks = (("the corpus", "/c", "dir"), ("the corpus", "/c/a", "exists"), ("the corpus", "/c/b", "exists"),
              ("the corpus", "/d", "dir"), ("the corpus", "/d/x", "exists"), ("the index", "/i/t", "sha256:00"))
    gone = ("the corpus", "/c/a", "No such file or directory")
    assert _late_problems(checks, [gone]) == []
    empty = [gone, ("the corpus", "/c/b", "No such file or directory")]
    assert _late_problems(checks, empty) == empty
    other = [("the corpus", "/d/x", "No such file or directory")]  # /c's entries do not stand for /d's
    assert _late_problems(checks, other) == other
    token = [("the index", "/i/t", "other contents than the client's (another file system?)")]
    assert _late_problems(checks, token) == token
    assert BROKEN.startswith("simdoc: ")
