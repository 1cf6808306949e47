"""The process pool under :class:`simdoc.engines.local.LocalEngine`: CPython's, with wide pipes and a quiet handler.

Imported only where a pool is made: :mod:`multiprocessing.pool` and what it
imports (~10 ms) are no part of a run that forks no workers, such as a night
when nothing changed.
"""

from __future__ import annotations

import multiprocessing.pool


class WidePool(multiprocessing.pool.Pool):
    """A pool whose worker handler sleeps until a worker exits or the pool's state changes.

    CPython's handler also wakes whenever a result is waiting to be read (``_get_sentinels``: the
    results pipe). While a large result streams through that pipe, or waits for the thread that
    reads it to get the interpreter lock, the pipe stays readable and the handler spins: 2.5 CPU
    seconds of the main process at 10^6 records, on cores the workers need. The handler only has
    to replace workers that exit, which the workers' own sentinels tell it (these pools have no
    ``maxtasksperchild``), and to see close and terminate, which the change notifier tells it.
    """

    def _get_sentinels(self):
        return [self._change_notifier._reader]

    def _setup_queues(self):
        # The pipes to and from the workers hold several tasks and a whole result (issue 32). At
        # 64 KB, less than one reading task (~90 KB at 10^5 files) or its result (~0.7 MB), a
        # worker waits at each end of a task for the main process's threads to move the rest
        # through, and they wait for the interpreter lock: ~13% of each worker's time at -j2.
        super()._setup_queues()
        for queue in (self._inqueue, self._outqueue):
            widen_pipe(queue._writer.fileno())


PIPE_BYTES = 1 << 20  # Linux's default /proc/sys/fs/pipe-max-size: allowed to any user


def widen_pipe(fd: int, size: int = PIPE_BYTES) -> None:
    """Make the pipe ``fd`` hold ``size`` bytes where the system lets it (Linux); else leave it."""
    try:
        import fcntl

        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, size)
    except (ImportError, AttributeError, OSError):  # not Linux, or over the user's pipe allowance: as it was
        pass
