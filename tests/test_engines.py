"""The local engine: task order, an initializer for the workers' state, lazy tasks, and the engine a command gets."""

import os
import sys

import pytest

from simdoc.engines import open_engine
from simdoc.engines.local import LocalEngine, check_jobs
from simdoc.errors import UsageError

_STATE: dict = {}


def _install(offset: int) -> None:
    _STATE["offset"] = offset


def _shifted(x: int) -> tuple[int, int]:
    return x + _STATE["offset"], os.getpid()


def _square(x: int) -> int:
    return x * x


@pytest.fixture(autouse=True)
def _clean_state():
    _STATE.clear()
    yield
    _STATE.clear()


def test_results_come_back_in_task_order_on_several_processes():
    got = list(LocalEngine(2).map(_square, range(40)))
    assert got == [x * x for x in range(40)]


def test_every_worker_runs_the_initializer_before_its_tasks():
    got = list(LocalEngine(2).map(_shifted, range(20), initializer=_install, initargs=(100,)))
    assert [v for v, _ in got] == [x + 100 for x in range(20)]
    assert os.getpid() not in {pid for _, pid in got}  # run by the pool's workers
    assert "offset" not in _STATE  # not in this process


def test_one_job_runs_here_and_runs_the_initializer_here():
    got = list(LocalEngine(1).map(_shifted, range(5), initializer=_install, initargs=(7,)))
    assert got == [(x + 7, os.getpid()) for x in range(5)]


def test_unordered_results_are_all_there():
    assert sorted(LocalEngine(2).map(_square, range(30), ordered=False)) == [x * x for x in range(30)]


def test_tasks_are_drawn_as_they_are_needed():
    drawn = []

    def tasks():
        for x in range(10):
            drawn.append(x)
            yield x

    results = LocalEngine(1).map(_square, tasks())
    assert next(results) == 0
    assert drawn == [0]  # in this process, one task is made per result taken


def test_jobs_below_one_is_a_usage_error_and_none_is_all_cores():
    with pytest.raises(UsageError, match="--jobs must be at least 1, got 0"):
        LocalEngine(0)
    assert check_jobs(None) >= 1 and check_jobs(3) == 3


def test_without_a_scheduler_a_command_gets_the_local_engine(monkeypatch):
    monkeypatch.delenv("SIMDOC_SCHEDULER", raising=False)
    with open_engine(3) as engine:
        assert isinstance(engine, LocalEngine) and engine.jobs == 3
    with pytest.raises(UsageError, match="--jobs must be at least 1"), open_engine(0, "local[1]"):
        pass  # --jobs is checked before any cluster is started


def _big(x: int) -> bytes:
    return bytes([x]) * (4 << 20)


def test_the_pool_does_not_spin_while_results_wait_to_be_read():
    """CPython's worker handler wakes whenever the results pipe is readable: while large results
    stream through it, or wait for a reader that needs the interpreter lock, it spins (2.5 CPU
    seconds of the main process at 10^6 records). The engine's pool wakes it only when a worker
    exits or the pool's state changes."""
    import multiprocessing.pool
    import time
    from unittest import mock

    woken = []
    wait = multiprocessing.pool.Pool._wait_for_updates

    def counted(*args, **kwargs):
        woken.append(1)
        return wait(*args, **kwargs)

    with mock.patch.object(multiprocessing.pool.Pool, "_wait_for_updates", staticmethod(counted)):
        got = []
        for r in LocalEngine(2).map(_big, range(8)):
            end = time.process_time() + 0.05
            while time.process_time() < end:  # the main thread busy in Python, holding the lock
                pass
            got.append(r[0])
    assert got == list(range(8))
    assert len(woken) < 20, len(woken)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a pipe's size is set on Linux only")
def test_the_pipes_to_and_from_the_workers_hold_a_reading_task_and_its_result():
    """At the pipes' 64 KB, a worker waited at each end of a task (one is ~90 KB, its result
    ~0.7 MB at 10^5 files) for the main process's threads, which wait for the interpreter lock:
    ~13% of each worker's time at -j2 (issue 32)."""
    import fcntl
    import multiprocessing

    from simdoc.engines.pool import PIPE_BYTES, WidePool

    assert PIPE_BYTES >= 1 << 20
    with WidePool(1, context=multiprocessing.get_context("fork")) as pool:
        sizes = [fcntl.fcntl(q._writer.fileno(), fcntl.F_GETPIPE_SZ) for q in (pool._inqueue, pool._outqueue)]
        assert pool.apply(_square, (3,)) == 9
    assert sizes == [PIPE_BYTES, PIPE_BYTES]


def _frozen(_: int) -> int:
    import gc

    return gc.get_freeze_count()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers are forked on Linux only")
def test_forked_workers_inherit_this_processs_objects_frozen_and_this_process_unfreezes_them():
    # A worker's collector never walks the objects it inherits (it would copy every page holding
    # one); this process's own collector still does once the workers are forked.
    import gc

    kept = [object() for _ in range(1000)]  # objects this process holds when the pool forks
    assert gc.get_freeze_count() == 0
    got = list(LocalEngine(2).map(_frozen, range(4)))
    assert min(got) >= len(kept)
    assert gc.get_freeze_count() == 0


def _read_loop_known(_: int) -> bool:
    from simdoc.corpus import plain_batch

    return bool(plain_batch._USABLE)


def test_forked_workers_inherit_whether_the_compiled_read_works(monkeypatch):
    """The pool finds out once, here, whether the small files' compiled read works (loading its
    loop), before it forks: a forked worker starts knowing it, and does not load the loop again."""
    from simdoc.corpus import plain_batch

    monkeypatch.setattr(plain_batch, "_USABLE", [])
    got = list(LocalEngine(2).map(_read_loop_known, range(4)))
    assert plain_batch._USABLE and (got == [True] * 4 or not sys.platform.startswith("linux"))
