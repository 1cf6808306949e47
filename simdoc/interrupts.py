"""Ctrl-C and SIGTERM: how a run ends when it is asked to stop, in the main process and in its workers.

In the main process SIGINT raises KeyboardInterrupt (Python's own handler)
and SIGTERM, as cron, systemd and ``kill`` send it, raises
:class:`Terminated`, a KeyboardInterrupt. The run unwinds
the same way for both, through every ``finally`` and ``except
BaseException``: the writer's temporary files are removed, its lock
released, the index left as its last published manifest; then one line,
"Interrupted." (exit 130) or "Terminated." (exit 143, 128 + 15, what a
shell reports for a process that SIGTERM ended). :func:`handle_signals`
runs before the commands' imports, which take half a second or more, so
that a signal in that time ends the run the same way and not with a
traceback from inside an import; this module imports nothing but the
standard library's os, signal and sys, which Python has loaded already.

Workers of the local process pool leave both signals to the main process:
they ignore SIGINT (Ctrl-C reaches the whole process group; the main
process stops the pool), die at SIGTERM without a word (the pool's
``terminate``), and on Linux die with the main process
(``PR_SET_PDEATHSIG``): a main process killed with SIGKILL leaves no
worker to finish its task and print a traceback about the broken pipe it
had to send the result through.
"""

from __future__ import annotations

import os
import signal
import sys

EXIT_INTERRUPTED = 130  # Ctrl-C (SIGINT)
EXIT_TERMINATED = 143  # SIGTERM: 128 + 15, as shells report a process that SIGTERM ended

_PR_SET_PDEATHSIG = 1  # linux/prctl.h


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread: a KeyboardInterrupt, so that the run unwinds and cleans
    up exactly as it does for Ctrl-C."""


def handle_signals() -> None:
    """In the main process of a command: SIGTERM raises Terminated; SIGINT keeps Python's handler;
    neither is lost in a finalizer."""
    global _main_pid
    _main_pid = os.getpid()
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:  # an ignored SIGTERM (nohup and the like) stays so
        signal.signal(signal.SIGTERM, _terminate)
    global _next_unraisable_hook
    if _next_unraisable_hook is None:
        _next_unraisable_hook = sys.unraisablehook
        sys.unraisablehook = _raise_again


def _terminate(signum: int, frame: object) -> None:
    if os.getpid() != _main_pid:
        # A worker just forked, before quiet_worker gave it SIGTERM's default: it dies as that
        # default would, without a word (raising here printed a traceback from the pool's
        # bootstrap when the main process terminated a pool it was still starting).
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return
    # One is enough: a second SIGTERM must not break off the cleanup the first one started
    # (SIGKILL still ends the process, and the next run deletes what it left).
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated()


_main_pid = -1  # the process whose handler this is (handle_signals)


_next_unraisable_hook = None
_lost: list[KeyboardInterrupt] = []


def _raise_again(unraisable) -> None:
    """Python can only ignore an exception raised in a finalizer (a ``__del__``, such as llvmlite's
    while numba compiles, or a generator closed when its last reference goes): a signal arriving
    there would be lost, and the run carry on to exit 0. It is raised again instead, at the
    main thread's next call or return past this hook (:func:`_raise_lost`, a profile function
    for that one event): a signal set pending here would be raised inside this hook, and be
    ignored once more."""
    if not isinstance(unraisable.exc_value, KeyboardInterrupt):
        _next_unraisable_hook(unraisable)
        return
    _lost[:] = [unraisable.exc_value]
    sys.setprofile(_raise_lost)


def _raise_lost(frame, event: str, arg) -> None:
    if frame.f_code is _raise_again.__code__ or not _lost:  # this hook's own return
        return
    sys.setprofile(None)
    exc = _lost.pop()
    raise Terminated() if isinstance(exc, Terminated) else KeyboardInterrupt()


def finished() -> None:
    """The command is over (its output written, its status chosen): a signal now ends the
    process at once, quietly, as it would any program's, instead of raising in Python's exit."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(signum) != signal.SIG_IGN:
            signal.signal(signum, signal.SIG_DFL)
    # CPython notes a KeyboardInterrupt that ends any exec or eval of a string (namedtuple and
    # dataclass build their methods so, at import), caught or not, and under `python -m`
    # kills the process with SIGINT at exit in place of the status chosen: a Ctrl-C that
    # landed in one of those would end a run that said "Interrupted." with -2, not 130. Every
    # string exec starts by clearing that note, and no KeyboardInterrupt can follow this one.
    exec("None")


def how_it_ended(exc: KeyboardInterrupt) -> tuple[str, int]:
    """The line to print and the exit status of a run that a signal stopped."""
    if isinstance(exc, Terminated):
        return "Terminated.", EXIT_TERMINATED
    return "Interrupted.", EXIT_INTERRUPTED


def stop(exc: KeyboardInterrupt) -> None:
    """End the process as a signal asked: one line on stderr, exit 130 or 143."""
    message, code = how_it_ended(exc)
    try:
        print(message, file=sys.stderr, flush=True)
    except (OSError, ValueError):  # stderr closed or gone: the status says it
        pass
    sys.exit(code)


class held_while_forking:  # noqa: N801 (used as a function: `with held_while_forking():`)
    """SIGINT and SIGTERM blocked in this thread while it forks workers (a pool's start), so that
    each worker is born with them blocked until :func:`quiet_worker` unblocks them.

    A signal that reached a new child before Python's own after-fork code ran was lost: that
    code clears the signals the C handler noted and had not yet handed to Python (they came in
    "just before the fork"), so a pool terminated while still starting (the tasks all done by
    its first worker) sent SIGTERM to a worker that never saw it, which then waited for a task
    forever, and the main process with it, in the pool's join. Blocked, a signal stays pending
    in the kernel, where nothing clears it. Signals to this process wait the few milliseconds
    of the forks, then arrive as usual. (A class, not contextlib's decorator: this module
    imports nothing Python has not loaded already.)"""

    def __enter__(self) -> None:
        self.old = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD) if hasattr(signal, "pthread_sigmask") else None

    def __exit__(self, *exc: object) -> None:
        if self.old is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, self.old)


_HELD = {signal.SIGINT, signal.SIGTERM}


def quiet_worker(parent: int) -> None:
    """In a worker process of the pool that ``parent`` (its pid) made, before its first task."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if hasattr(signal, "pthread_sigmask"):  # blocked since the fork (held_while_forking): now ignored or fatal
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _HELD)
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):  # no prctl to call: the worker lives on until its next task
        return
    if os.getppid() != parent:  # the parent died before the call above
        os._exit(0)
