"""The Dask engine gives the local engine's answers: `--scheduler 'local[2]'` (a LocalCluster of 2
worker processes) and a `dask scheduler` with 2 `dask worker` processes.

simdoc runs as a command wherever it uses a cluster: a Dask client or cluster in the pytest
process can fail to start (see conftest, _no_dask_io_loop_in_the_test_process). The local
engine's runs, which need none, run in this process.
"""

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from simdoc.cli import cli

pytest.importorskip("distributed")

from test_dask_contract import simdoc  # noqa: E402
from test_pipeline import make_corpus  # noqa: E402


def arrays(index: Path) -> dict[str, bytes]:
    from simdoc.store.loaded import open_index

    loaded = open_index(index)
    out = {}
    for stage in ("shingle", "signature", "index"):
        for role, name in loaded.stage(stage)["roles"].items():
            if role not in ("origin", "docs"):
                out[f"{stage}.{role}"] = (index / name).read_bytes()
    return out


def two_workers(cluster) -> None:
    cluster.start_worker()
    cluster.start_worker()
    cluster.wait_for_workers(2)


def test_local_cluster_gives_the_same_pairs_and_arrays(tmp_path):
    """`--scheduler 'local[2]'` as the README has users run it: one command, which starts the LocalCluster."""
    make_corpus(tmp_path / "c", seed=4, n_base=25)
    common = ["--threshold", "0.6", "--all-candidates"]
    local = CliRunner().invoke(cli, ["pairs", str(tmp_path / "c"), "--index", str(tmp_path / "local"), "-j", "2", *common])
    assert local.exit_code == 0, local.stderr
    dask = simdoc("pairs", tmp_path / "c", "--index", tmp_path / "dask", "--scheduler", "local[2]", *common, cwd=tmp_path)
    assert dask.returncode == 0, dask.stderr
    assert dask.stdout == local.stdout and local.stdout
    assert arrays(tmp_path / "dask") == arrays(tmp_path / "local")
    # Candidates are counted alike too.
    assert local.stderr.split(" candidates")[0].split()[-1] == dask.stderr.split(" candidates")[0].split()[-1]


# A worker preload that notes, in the file $SIMDOC_TEST_RAN, the name of every stage task it runs.
RECORD_TASKS = '''
import importlib
import os

for module, name in [("simdoc.stages.scan", "scan_batch"), ("simdoc.stages.signature", "sign_rows"),
                     ("simdoc.stages.dask_index", "band_rows"), ("simdoc.stages.dask_index", "bucket_range")]:
    mod = importlib.import_module(module)
    real = getattr(mod, "_test_real_" + name, None) or getattr(mod, name)  # a preload may run twice
    setattr(mod, "_test_real_" + name, real)

    def noted(task, real=real, name=name):
        with open(os.environ["SIMDOC_TEST_RAN"], "a") as f:
            f.write(name + "\\n")
        return real(task)

    setattr(mod, name, noted)
'''


def test_stage_commands_take_the_scheduler_too(tmp_path, cluster):
    make_corpus(tmp_path / "c", seed=5, n_base=8)
    (tmp_path / "record.py").write_text(RECORD_TASKS)
    ran = tmp_path / "ran"
    for _ in range(2):
        cluster.start_worker("--preload", str(tmp_path / "record.py"), env={"SIMDOC_TEST_RAN": str(ran)})
    cluster.wait_for_workers(2)
    runner = CliRunner()
    idx = tmp_path / "idx"
    on_cluster = {"SIMDOC_SCHEDULER": cluster.address}  # the variable, not --scheduler
    r = simdoc("shingle", tmp_path / "c", "--index", idx, env=on_cluster, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = simdoc("signature", "--index", idx, env=on_cluster, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = simdoc("index", "--index", idx, "--threshold", "0.6", env=on_cluster, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    # Re-banding on the cluster reuses the exact-copy groups it found.
    r = simdoc("index", "--index", idx, "--threshold", "0.7", env=on_cluster, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    # Each stage's work ran on the workers (the variable was not ignored).
    assert set(ran.read_text().split()) == {"scan_batch", "sign_rows", "band_rows", "bucket_range"}
    local = runner.invoke(cli, ["pairs", str(tmp_path / "c"), "--index", str(tmp_path / "local"), "-t", "0.7"])
    staged = runner.invoke(cli, ["pairs", "--index", str(idx), "-t", "0.7"])
    assert staged.stdout == local.stdout
    # The same arrays, but for the shingle sets that only the stage-by-stage build keeps
    # and the verified pairs that only a run given the corpus keeps.
    sets = ("shingle.indptr", "shingle.data", "shingle.counts")
    kept = lambda d: {k: v for k, v in arrays(d).items() if k not in sets}  # noqa: E731
    assert kept(idx) == kept(tmp_path / "local")


def test_unreachable_scheduler_is_a_clear_error(tmp_path):
    make_corpus(tmp_path / "c", seed=6, n_base=3)
    r = simdoc("pairs", tmp_path / "c", "--index", tmp_path / "i", "--scheduler", "127.0.0.1:9", cwd=tmp_path)
    assert r.returncode == 2 and "cannot reach the Dask scheduler" in r.stderr, r.stderr
    bad = simdoc("pairs", tmp_path / "c", "--index", tmp_path / "i", "--scheduler", "bogus", cwd=tmp_path)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "host:port" in bad.stderr, bad.stderr



@pytest.fixture
def not_a_scheduler():
    """Ports where something other than a Dask scheduler listens: ``silent`` accepts and never
    says a word (a web server waiting for a request line, the dashboard's port, a tunnel with
    nothing behind it); ``talker`` answers at once with bytes of its own (an HTTP error page)."""
    import socket
    import threading

    servers, held = [], []

    def serve(answer: bytes | None) -> int:
        s = socket.create_server(("127.0.0.1", 0))
        servers.append(s)

        def loop():
            while True:
                try:
                    c, _ = s.accept()
                except OSError:
                    return
                if answer is None:
                    held.append(c)
                else:
                    c.sendall(answer)
                    c.close()

        threading.Thread(target=loop, daemon=True).start()
        return s.getsockname()[1]

    yield {"silent": serve(None), "talker": serve(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")}
    for s in servers + held:
        s.close()


def test_a_port_that_is_no_scheduler_is_a_clear_error_not_a_hang(tmp_path, not_a_scheduler):
    """distributed bounds the TCP connect by its timeout, not the handshake after it: the
    silent port hung the run for good, the talking one ended in a traceback (numpy asked for
    exabytes, the HTTP status line read as a frame length)."""
    make_corpus(tmp_path / "c", seed=6, n_base=3)
    for port in not_a_scheduler.values():
        r = simdoc("pairs", tmp_path / "c", "--index", tmp_path / "i", "--scheduler", f"tcp://127.0.0.1:{port}", cwd=tmp_path, timeout=60)
        assert r.returncode == 2 and "cannot reach the Dask scheduler" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr and not (tmp_path / "i").exists(), r.stderr

def test_what_the_workers_verified_is_kept_and_reported_as_locally(tmp_path, cluster):
    """The cluster's verification feeds the verified-pairs table and the warnings, as the local engine's does."""
    docs = make_corpus(tmp_path / "c", seed=7, n_base=12)
    two_workers(cluster)
    runner = CliRunner()
    idx = tmp_path / "idx"
    common = ["--threshold", "0.6", "-v"]
    first = simdoc("pairs", tmp_path / "c", "--index", idx, "--scheduler", cluster.address, *common, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    verified = [line for line in first.stderr.splitlines() if line.startswith("verify: ")]
    assert verified and re.match(r"verify: [1-9]\d* pairs verified from the documents", verified[0]), first.stderr
    # The table the workers' pairs went into: a second run, here, verifies nothing again.
    again = runner.invoke(cli, ["pairs", str(tmp_path / "c"), "--index", str(idx), "-j", "1", *common])
    assert again.exit_code == 0 and again.stdout == first.stdout
    assert "verify: up to date" in again.stderr.splitlines(), again.stderr  # all from the table
    # A document changed since it was indexed (and never verified: an index built with --no-verify):
    # both engines leave its pairs out, with the same warning.
    bare = tmp_path / "bare"
    assert runner.invoke(cli, ["pairs", str(tmp_path / "c"), "--index", str(bare), "--no-verify", "-j", "1"]).exit_code == 0
    (tmp_path / "c" / "base/doc01.txt").write_text(docs["base/doc01.txt"] + " and a tail", encoding="utf-8")
    local = runner.invoke(cli, ["pairs", "--index", str(bare), "--threshold", "0.6", "-j", "1"])
    dask = simdoc("pairs", "--index", bare, "--threshold", "0.6", "--scheduler", cluster.address, cwd=tmp_path)
    assert local.exit_code == dask.returncode == 0, dask.stderr
    assert dask.stdout == local.stdout and "base/doc01.txt" not in local.stdout
    warning = [line for line in local.stderr.splitlines() if "changed since it was indexed" in line]
    assert warning and warning == [line for line in dask.stderr.splitlines() if "changed since it was indexed" in line]


def test_a_local_cluster_that_fails_to_start_is_a_cluster_error(tmp_path, monkeypatch):
    """distributed can fail to start its IO loop in time (a bare AssertionError): exit 7, one Error line."""
    import distributed

    def failing(*args, **kwargs):
        raise AssertionError

    monkeypatch.setattr(distributed, "LocalCluster", failing)
    make_corpus(tmp_path / "c", seed=3, n_base=4)
    r = CliRunner().invoke(cli, ["pairs", str(tmp_path / "c"), "--index", str(tmp_path / "idx"), "--scheduler", "local[2]"])
    assert r.exit_code == 7, (r.exit_code, r.stderr)
    assert "could not start the local Dask cluster local[2]: AssertionError" in r.stderr
    assert "Traceback" not in r.stderr


def test_a_local_cluster_of_no_worker_is_a_usage_error(tmp_path):
    """`local[0]` waited --wait-workers for a worker that never comes, then exit 7 with the hint
    `dask worker local[0]`: a usage error at once, before any index is made."""
    make_corpus(tmp_path / "c", seed=3, n_base=4)
    r = simdoc("pairs", tmp_path / "c", "--index", tmp_path / "idx", "--scheduler", "local[0]", "--wait-workers", "1", cwd=tmp_path)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "local[0]: an in-process cluster needs at least 1 worker" in r.stderr
    assert "dask worker" not in r.stderr and not (tmp_path / "idx").exists()
