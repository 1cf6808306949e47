"""Ctrl-C, SIGTERM and SIGKILL on real processes (issue 28 item 8, issue 27 item 7).

* SIGINT or SIGTERM while the commands are still being imported: "Interrupted." (130) or
  "Terminated." (143), never a traceback from inside an import. The signal is sent by the
  process itself at the import of a chosen module (a finder on sys.meta_path), so that it
  lands there every time; a few real delays after the start are tried as well.
* SIGTERM during a build ends it as Ctrl-C does: exit 143, no temporary file left in the
  index, the index sound, and the next run gives what a fresh build gives.
* SIGKILL of the main process while its workers hold tasks: the workers die with it, and
  none prints a traceback about the pipe to their dead parent.
* A signal that arrives inside a finalizer, where Python can only ignore an exception, is
  raised again after it, not lost.

The builds are held at a known point by a launcher that makes each reading task wait (see
HOLD) until the test lets it go or the main process is gone: no test sleeps on timing.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest


REPO = Path(__file__).resolve().parent.parent

# Sends the signal argv[2] to this process when argv[1] is first imported, then runs the
# command (the rest of argv) as `python -m simdoc` does.
AT_IMPORT = """
import os, runpy, signal, sys
module, signame = sys.argv[1], sys.argv[2]

class Trigger:
    def find_spec(self, name, path=None, target=None):
        if name == module:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), getattr(signal, signame))
        return None

sys.meta_path.insert(0, Trigger())
sys.argv = ["simdoc", *sys.argv[3:]]
runpy.run_module("simdoc", run_name="__main__", alter_sys=True)
"""

# Each reading task (in a worker, or in the main process with -j 1) writes its pid to
# $SIMDOC_TEST_MARKER, then waits until $SIMDOC_TEST_MARKER.go exists or the process that
# started it is gone; three files a task, so that a small corpus makes many tasks.
HOLD = """
import os, sys, time
import simdoc.stages.scan as scan

scan.BATCH_DOCS = 3
_real = scan._scan

def _held(task):
    parent, marker = os.getppid(), os.environ["SIMDOC_TEST_MARKER"]
    with open(marker, "a") as f:
        f.write(f"{os.getpid()}\\n")
    while os.getppid() == parent and not os.path.exists(marker + ".go"):
        time.sleep(0.01)
    return _real(task)

scan._scan = _held
sys.argv = ["simdoc", *sys.argv[1:]]
from simdoc.__main__ import main
main()
"""


def make_corpus(root: Path, n: int, seed: int) -> None:
    """``n`` unrelated documents and a near copy of every fifth: few pairs, quick runs."""
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(5000)]
    for i in range(n):
        body = " ".join(rng.choice(words) for _ in range(200))
        path = root / f"d{i % 3}" / f"doc{i:03d}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body, encoding="utf-8")
        if i % 5 == 0:
            path.with_name(f"copy{i:03d}.txt").write_text(body + " tail", encoding="utf-8")


_NUMBA_CACHE: list[str] = []


@pytest.fixture(autouse=True, scope="module")
def _one_numba_cache(tmp_path_factory):
    """The kernels compiled once for every run of this module (each test has a cache folder of its own)."""
    _NUMBA_CACHE[:] = [str(tmp_path_factory.mktemp("numba"))]
    yield
    _NUMBA_CACHE.clear()


@pytest.fixture(autouse=True, scope="module")
def _ctrl_c_not_ignored():
    """A test run started in the background by a shell without job control (`make test &` in a
    script, `nohup`) inherits SIGINT ignored, and so would every process these tests start: simdoc
    rightly leaves an ignored SIGINT ignored, but these tests are about a Ctrl-C that arrives. A
    handler here (not SIG_IGN) gives the children SIGINT at its default again."""
    before = signal.getsignal(signal.SIGINT)
    if before == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]), **extra)
    if _NUMBA_CACHE:
        env["NUMBA_CACHE_DIR"] = _NUMBA_CACHE[0]
    env.pop("SIMDOC_INDEX", None)
    env.pop("SIMDOC_FAULT", None)
    return env


def _simdoc(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "simdoc", *map(str, args)], capture_output=True, text=True, env=_env(), timeout=300
    )


def _simdoc_frames(stderr: str) -> list[str]:
    """Traceback lines that are in simdoc's own code."""
    return [ln for ln in stderr.splitlines() if re.search(r'File ".*[/\\]simdoc[/\\][^"]*\.py"', ln)]


# The only simdoc code that runs before simdoc.__main__ installs its handling of signals: the
# package's __init__ (which imports nothing), simdoc.interrupts and __main__'s own module body.
# A Ctrl-C in those few instructions is Python's KeyboardInterrupt, as for any program.
_BEFORE_THE_HANDLER = re.compile(r'[/\\]simdoc[/\\](__init__|__main__|interrupts)\.py", line \d+, in <module>$')


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path, str]:
    """A corpus, its index, and what a fresh build prints for that corpus with NEW added."""
    root = tmp_path_factory.mktemp("signals")
    corpus = root / "corpus"
    make_corpus(corpus, 30, seed=5)
    r = _simdoc("pairs", corpus, "--index", root / "idx", "-q", "-j", "1")
    assert r.returncode == 0, r.stderr
    grown = root / "grown"
    shutil.copytree(corpus, grown)
    make_corpus(grown / "new", *NEW)
    fresh = _simdoc("pairs", grown, "--index", root / "fresh", "-q", "-j", "1")
    assert fresh.returncode == 0 and fresh.stdout, fresh.stderr
    return corpus, root / "idx", fresh.stdout


NEW = (12, 6)  # the documents an update adds (count, seed)


# ---------------------------------------------------------------- while the commands are imported


@pytest.mark.parametrize("module", ["numpy", "click", "simdoc.cli", "its command's module", "simdoc.stages.pairs"])
@pytest.mark.parametrize("signame,code,said", [("SIGINT", 130, "Interrupted."), ("SIGTERM", 143, "Terminated.")])
def test_a_signal_during_the_imports_ends_the_run_as_later(built, module, signame, code, said):
    corpus, idx, _ = built
    for args in (("check", "--index", idx), ("pairs", corpus, "--index", idx, "-q")):
        # A command's module is imported when the command is asked for (simdoc.cli.COMMANDS), and
        # `check` does not import the pairs stage.
        name = {"check": "simdoc.cli.lookup", "pairs": "simdoc.cli.stages"}[args[0]] if module == "its command's module" else module
        if name == "simdoc.stages.pairs" and args[0] != "pairs":
            continue
        r = subprocess.run(
            [sys.executable, "-c", AT_IMPORT, name, signame, *map(str, args)],
            capture_output=True, text=True, env=_env(), timeout=300,
        )
        assert (r.returncode, r.stderr, r.stdout) == (code, f"{said}\n", ""), (args, r.returncode, r.stderr)


@pytest.mark.parametrize("delay", [0, 0.02, 0.05, 0.1, 0.2, 0.5])
def test_sigint_soon_after_the_start_never_gives_a_traceback_of_simdoc(built, delay):
    """Real delays: the signal lands where it lands. Before simdoc's first line runs, Python's own
    start-up (site) can only die of it, with or without a traceback of its own; from then on the
    run says "Interrupted." and exits 130 (or has finished, if it was that fast)."""
    corpus, idx, _ = built
    proc = subprocess.Popen(
        [sys.executable, "-m", "simdoc", "pairs", corpus, "--index", idx, "-q"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
    )
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    err = _SITE_PTH_ERROR.sub("", err)  # Python's start-up, before any line of simdoc
    if _INIT_FATAL.match(err):
        # Python's start-up died of the signal (setting up sys.stdin or importing site): no simdoc
        # line ran.
        assert err.rstrip().endswith("KeyboardInterrupt"), err
        assert _simdoc_frames(err) == [] and out == "", err
        assert proc.returncode != 0, err
        return
    if err.endswith("KeyboardInterrupt\n") and proc.returncode == -signal.SIGINT:
        assert [f for f in _simdoc_frames(err) if not _BEFORE_THE_HANDLER.search(f)] == [], err
        return
    assert _simdoc_frames(err) == [], err
    if proc.returncode == 130:
        assert (err, out) == ("Interrupted.\n", "")
    else:
        assert proc.returncode in (0, 1, -signal.SIGINT), (proc.returncode, err)
        assert "Interrupted." not in err and "Error" not in err, err


# Interrupted while it sets up the standard streams or imports site, Python gives up (status 1).
_INIT_FATAL = re.compile(r"Fatal Python error: init_\w+: ")
# site.py, interrupted while it runs a .pth file's line (an editable install's finder), says so
# and carries on without it.
_SITE_PTH_ERROR = re.compile(r"Error processing line \d+ of [^\n]*\.pth:\n.*?Remainder of file ignored\n", re.S)


def test_an_interrupt_caught_after_a_string_exec_still_exits_130(tmp_path):
    """CPython remembers a KeyboardInterrupt that ended an exec of a string, even one caught
    later, and under ``-m`` kills the process with SIGINT at exit (status -2, not the 130 the
    run chose): it happened when Ctrl-C landed while a dataclass was built at import."""
    (tmp_path / "execstop.py").write_text(
        "from simdoc.interrupts import finished, handle_signals, stop\n"
        "handle_signals()\n"
        "try:\n"
        "    try:\n"
        "        exec('raise KeyboardInterrupt')\n"
        "    except KeyboardInterrupt as exc:\n"
        "        stop(exc)\n"
        "finally:\n"
        "    finished()\n"
    )
    env = _env()
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env["PYTHONPATH"]])
    r = subprocess.run([sys.executable, "-m", "execstop"], capture_output=True, text=True, env=env, timeout=60)
    assert (r.returncode, r.stderr) == (130, "Interrupted.\n")


def test_a_signal_lost_in_a_finalizer_is_raised_again_after_it(tmp_path):
    """llvmlite frees its objects in __del__ while numba compiles, and a generator left at a
    yield is closed when its last reference goes: an exception there is only printed as
    "Exception ignored", and the run would carry on to exit 0."""
    script = """
import os, signal, sys
from simdoc.interrupts import handle_signals
handle_signals()

class Finalized:
    def __del__(self):
        os.kill(os.getpid(), getattr(signal, sys.argv[1]))  # the handler raises here, in __del__
        sum(range(10))

def drop():
    Finalized()

try:
    drop()
    for _ in range(1000):
        sum(range(100))
    print("carried on")
except KeyboardInterrupt as exc:
    print("stopped by", type(exc).__name__)
"""
    for signame, name in (("SIGINT", "KeyboardInterrupt"), ("SIGTERM", "Terminated")):
        r = subprocess.run([sys.executable, "-c", script, signame], capture_output=True, text=True, env=_env(), timeout=60)
        assert (r.stdout, r.stderr) == (f"stopped by {name}\n", ""), (signame, r.stdout, r.stderr)


# ---------------------------------------------------------------- during a build


def _held_run(tmp_path: Path, *args: object) -> tuple[subprocess.Popen, Path]:
    """A run whose reading tasks wait (HOLD), once one of them is waiting; and the marker file."""
    marker = tmp_path / "marker"
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, *map(str, args)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(SIMDOC_TEST_MARKER=str(marker)),
    )
    deadline = time.monotonic() + 300  # a bound on a hang, not a timing assumption
    while not (marker.exists() and marker.read_text().strip()):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no reading task started"
        time.sleep(0.01)
    return proc, marker


def _temporaries(idx: Path) -> list[str]:
    return sorted(p.name for p in idx.iterdir() if p.name.startswith(".") or ".tmp" in p.name)


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_sigterm_during_a_build_ends_it_as_ctrl_c_does(built, tmp_path, jobs):
    corpus, idx = tmp_path / "corpus", tmp_path / "idx"
    shutil.copytree(built[0], corpus)
    assert _simdoc("pairs", corpus, "--index", idx, "-q", "-j", "1").returncode == 0
    make_corpus(corpus / "new", *NEW)  # an update: the new files are read
    proc, _ = _held_run(tmp_path, "pairs", corpus, "--index", idx, "-q", "-j", jobs)
    assert _temporaries(idx)  # the signatures being written
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=300)
    assert (proc.returncode, err, out) == (143, "Terminated.\n", "")
    assert _temporaries(idx) == []
    chk = _simdoc("check", "--index", idx)
    assert chk.returncode == 0, (chk.stdout, chk.stderr)
    again = _simdoc("pairs", corpus, "--index", idx, "-q", "-j", "1")
    assert (again.returncode, again.stdout) == (0, built[2]), again.stderr


@pytest.mark.parametrize("signame, code, said", [("SIGINT", 130, "Interrupted.\n"), ("SIGTERM", 143, "Terminated.\n")])
def test_a_signal_during_a_first_build_on_two_processes_stops_the_pool(built, tmp_path, signame, code, said):
    """A first build on two processes: the main process waits for the first result when the signal comes."""
    idx = tmp_path / "idx"
    proc, _ = _held_run(tmp_path, "pairs", built[0], "--index", idx, "-q", "-j", "2")
    proc.send_signal(getattr(signal, signame))
    out, err = proc.communicate(timeout=300)
    assert (proc.returncode, err, out) == (code, said, "")
    assert not idx.exists() or _temporaries(idx) == []  # a first build's folder goes with it
    again = _simdoc("pairs", built[0], "--index", idx, "-q", "-j", "2")
    assert again.returncode == 0 and again.stdout == _simdoc("pairs", built[0], "--index", built[1], "-q").stdout, again.stderr


def test_sigkill_of_the_main_process_leaves_no_worker_to_print_a_traceback(built, tmp_path):
    corpus = built[0]
    proc, marker = _held_run(tmp_path, "pairs", corpus, "--index", tmp_path / "idx", "-q", "-j", "2")
    proc.kill()
    # Every worker shares the stderr pipe: this returns once the last of them is gone.
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == -signal.SIGKILL
    assert len(marker.read_text().split()) >= 1  # a worker held a task when the main process died
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


def test_a_signal_while_the_options_are_parsed_is_interrupted_not_aborted(monkeypatch):
    """click's own answer would be "Aborted!" and exit 1, which the docs do not list."""
    import click
    from click.testing import CliRunner

    from simdoc.cli import cli

    def interrupted(self, ctx, args):
        raise KeyboardInterrupt

    monkeypatch.setattr(click.Group, "parse_args", interrupted)
    r = CliRunner().invoke(cli, ["check", "--index", "nowhere"])
    assert (r.exit_code, r.stderr) == (130, "Interrupted.\n")


def test_sigterm_to_a_worker_forked_before_it_is_quiet_ends_it_without_a_word(tmp_path):
    """A pool terminated while it is still starting sends SIGTERM to workers that have not yet run
    quiet_worker: they have the main process's handler. Such a worker dies as SIGTERM's default
    would (no Terminated raised in the pool's bootstrap, no traceback); the main process still
    raises Terminated."""
    script = tmp_path / "fork.py"
    script.write_text(
        "import os, signal, sys, time\n"
        "from simdoc.interrupts import Terminated, handle_signals\n"
        "handle_signals()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    time.sleep(5)\n"
        "    os._exit(0)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "print('child', os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM)\n"
        "try:\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    time.sleep(5)\n"
        "except Terminated:\n"
        "    print('parent Terminated')\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "child True\nparent Terminated\n", "")


def test_workers_are_forked_with_the_signals_held_so_none_is_lost_before_they_are_quiet(tmp_path):
    """A SIGTERM that reached a just-forked worker before Python's after-fork code ran was cleared
    by it: the worker lived on, waiting for a task, and the main process waited for it forever in
    the pool's join (a nightly `pairs -j 2` hung so, about once in 100 pools on a busy machine).
    Forked inside held_while_forking, a worker is born with SIGINT and SIGTERM blocked, a SIGTERM
    stays pending until quiet_worker, which then ends the worker as SIGTERM's default does; the
    main process's mask is as before, and the pool's workers run their tasks with neither blocked."""
    script = tmp_path / "held.py"
    script.write_text(
        "import os, signal\n"
        "from simdoc.engines.local import LocalEngine\n"
        "from simdoc.interrupts import handle_signals, held_while_forking, quiet_worker\n"
        "handle_signals()\n"
        "HELD = {signal.SIGINT, signal.SIGTERM}\n"
        "def mask(task):\n"
        "    return signal.pthread_sigmask(signal.SIG_BLOCK, [])\n"
        "parent = os.getpid()\n"
        "with held_while_forking():\n"
        "    pid = os.fork()\n"
        "if pid == 0:\n"
        "    born = HELD <= signal.pthread_sigmask(signal.SIG_BLOCK, [])\n"
        "    os.kill(os.getpid(), signal.SIGTERM)  # as the pool's terminate, before the worker is quiet\n"
        "    quiet_worker(parent)\n"
        "    os._exit(3 if born else 4)  # reached only if the SIGTERM was lost\n"
        "_, status = os.waitpid(pid, 0)\n"
        "print('child', os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM)\n"
        "print('parent', not HELD & signal.pthread_sigmask(signal.SIG_BLOCK, []))\n"
        "masks = list(LocalEngine(2).map(mask, range(4)))\n"
        "print('workers', len(masks) == 4 and not any(HELD & set(m) for m in masks))\n"
    )
    # (The timeout only ends a hang: the pool's first start may compile the kernels.)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=900)
    assert (done.returncode, done.stdout, done.stderr) == (0, "child True\nparent True\nworkers True\n", "")
