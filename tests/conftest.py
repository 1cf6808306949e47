"""Shared fixtures for the CLI tests: a CliRunner wrapper and small corpora."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from simdoc.cli import cli

REPO = Path(__file__).resolve().parent.parent
SAMPLE_CORPUS = REPO / "sample_corpus"
SUMMARY_RE = re.compile(
    r"^simdoc: (?P<docs>\d+) documents?(?: \((?P<skipped>\d+) files? skipped\))?, "
    r"(?P<cand>\d+) candidates?, (?P<pairs>\d+) pairs?\b"
)

# Three documents: a.txt and b.txt are exact copies, c.txt is unrelated.
TEXT_A = "The quick brown fox jumps over the lazy dog while the farmer sleeps.\n"
# Two documents sharing two passages, moved (simdoc show, reports.passages).
P1 = "the harbour lantern festival returns to Port Ellery on the first Saturday of August"
P2 = "stalls open at noon and the lantern parade leaves the old quay at nine"
DOC_A = f"Header of site A. {P1}. Something only in A here. {P2}.\n"
DOC_B = f"{P2}! Totally different words in B now.\n\n{P1}, footer.\n"
TEXT_C = "Completely unrelated prose about tide tables, harbour cranes and rope.\n"


@pytest.fixture(autouse=True)
def _no_user_cache(tmp_path_factory, monkeypatch):
    """Never let a test touch ~/.cache or an index named by the environment."""
    monkeypatch.delenv("SIMDOC_INDEX", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))


@pytest.fixture(autouse=True, scope="session")
def _no_scheduler_from_the_environment():
    """A SIMDOC_SCHEDULER of the shell would put every command run here on that cluster
    (local[N]: a cluster in this process, which the next fixture refuses). Session-wide, so
    that the module-scoped fixtures that run `simdoc pairs` do without it too."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("SIMDOC_SCHEDULER", raising=False)
        yield


@pytest.fixture(autouse=True, scope="session")
def _no_dask_io_loop_in_the_test_process():
    """Refuse, at once, a Dask client or cluster in the pytest process: run simdoc as a command.

    Each one starts an IO-loop thread while holding a lock of distributed's (LoopRunner._lock),
    and waits 10 s for the thread. A client left unclosed in a reference cycle (``--scheduler
    bogus``: a ValueError after its loop started) takes that lock in its ``__del__``, in whichever
    thread the garbage collector runs; when that is the new loop thread, the start fails with a
    bare AssertionError (exit 7, "could not start the local Dask cluster"), now and then.
    """
    try:
        from distributed.utils import LoopRunner
    except ImportError:  # the Dask tests skip themselves
        yield
        return

    def refuse(self):
        raise RuntimeError("a Dask client or cluster in the pytest process: run simdoc as a command instead")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(LoopRunner, "start", refuse)
        yield


@pytest.fixture
def run():
    """run(*args) -> click Result; stdout and stderr are captured separately."""

    def _run(*args: object, **kw):
        return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=True, **kw)

    return _run


def summary(result) -> re.Match:
    """The one summary line of a successful `pairs` run, parsed."""
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith("simdoc:")]
    assert len(lines) == 1, result.stderr
    m = SUMMARY_RE.match(lines[0])
    assert m, lines[0]
    return m


def records(result) -> list[list[str]]:
    """tsv stdout split into fields."""
    return [line.split("\t") for line in result.stdout.splitlines()]


def assert_clean_error(result, code: int, *needles: str) -> None:
    """A user error: exit code, nothing on stdout, `Error:` message, no traceback."""
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr, result.exception)
    assert result.stdout == ""
    assert "Traceback" not in result.stderr and "Traceback" not in result.output
    assert "Error" in result.stderr
    for n in needles:
        assert n in result.stderr, (n, result.stderr)


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def add_exact_copies(corpus: Path, docs: dict[str, str]) -> None:
    """Exact copies in a corpus of test_pipeline.make_corpus (its ``docs``): a group of three
    (base/doc03.txt, copies/a.txt, copies/b.txt) and one of two (base/doc05.txt, copies/c.txt)."""
    for name in ("copies/a.txt", "copies/b.txt"):
        write(corpus / name, docs["base/doc03.txt"])
    write(corpus / "copies/c.txt", docs["base/doc05.txt"])


@pytest.fixture
def settled(monkeypatch) -> None:
    """Files a test wrote count as written long before the scans that follow.

    A scan reads again the files whose change time is within RACY_NS of the
    file system's newest time it saw (simdoc.stages.racy): those a test has
    just written, whose change time it cannot set back (`os.utime` sets it
    to now). A test of what an update reads, or of parts reused, makes that
    window 0: then only a file changed after a scan began is racy.
    """
    import simdoc.stages.racy

    monkeypatch.setattr(simdoc.stages.racy, "RACY_NS", 0)


@pytest.fixture
def small_corpus(tmp_path) -> Path:
    root = tmp_path / "corpus"
    write(root / "a.txt", TEXT_A)
    write(root / "b.txt", TEXT_A)
    write(root / "c.txt", TEXT_C)
    return root


def warc_record(uri: str, body: str | bytes, rid: int, content_type: str = "text/plain; charset=utf-8") -> bytes:
    """One WARC response record (uncompressed) whose HTTP body is ``body``, with record id number ``rid``."""
    raw = body.encode() if isinstance(body, str) else body
    http = f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\n\r\n".encode() + raw
    head = (
        "WARC/1.0\r\nWARC-Type: response\r\n"
        f"WARC-Record-ID: <urn:uuid:00000000-0000-0000-0000-{rid:012d}>\r\n"
        f"WARC-Target-URI: {uri}\r\nWARC-Date: 2024-01-01T00:00:00Z\r\n"
        "Content-Type: application/http; msgtype=response\r\n"
        f"Content-Length: {len(http)}\r\n\r\n"
    ).encode()
    return head + http + b"\r\n\r\n"


def random_sets(rng, n, size=300, universe=2**32):
    return [set(rng.integers(0, universe, size=rng.integers(1, size)).tolist()) for _ in range(n)]


@pytest.fixture
def cluster(tmp_path):
    """A `dask scheduler` process in a folder of its own (workers: ``cluster.start_worker``), stopped after the test."""
    from test_dask_contract import Cluster  # only the cluster tests need distributed

    c = Cluster(tmp_path / "cluster")
    c.start_scheduler()
    yield c
    c.stop()


def numbered_page(i: int, change: int = 0) -> str:
    """A text of its own for each ``i`` (60 words drawn with seed ``i``); ``change`` words of it
    replaced (a near-duplicate of the page of the same ``i``)."""
    import random

    rng = random.Random(i)
    words = [f"w{rng.randrange(400)}" for _ in range(60)]
    for c in range(change):
        words[3 + 7 * c] = f"edit{c}"
    return " ".join(words)


def printed_jaccard(a: str, b: str, spec=None) -> str:
    """The exact set Jaccard of two texts as simdoc prints it (``spec``: the shingles; default simdoc's)."""
    import simdoc

    sets = simdoc.shingle_texts([a, b], spec)
    return f"{simdoc.jaccard(sets.row(0), sets.row(1)):.4f}"


def tsv_pairs(corpus, index, *args) -> tuple[dict[tuple[str, str], str], str]:
    """`simdoc pairs CORPUS --index INDEX ARGS` on one job: {(doc_a, doc_b): jaccard as printed}, and stderr."""
    r = CliRunner().invoke(cli, ["pairs", str(corpus), "--index", str(index), "-j", "1", "--format", "tsv", *map(str, args)])
    assert r.exit_code == 0, (r.stderr, r.exception)
    return {(f[0], f[1]): f[3] for f in (line.split("\t") for line in r.stdout.splitlines())}, r.stderr
