"""The one exception family of simdoc and the exit codes the CLI maps it to.

Every error a user can cause (a bad path, a bad option value, an index built
with other parameters, a damaged file) is raised as a subclass of
:class:`SimdocError`; the CLI prints ``Error: <message>`` on stderr and exits
with the class's ``exit_code``. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import shlex

EXIT_OK = 0
EXIT_INTERNAL = 1  # a bug: unexpected exception, traceback printed
EXIT_USAGE = 2  # bad command line or option value (click uses 2 as well)
EXIT_INPUT = 3  # the corpus is missing, empty, or has no readable document
EXIT_INDEX = 4  # the index is missing a stage, damaged, or built with other parameters
EXIT_BUSY = 5  # another simdoc run is writing the index and --wait ran out
EXIT_WRITE = 6  # stdout or the index could not be written (closed stdout, full disk); the old index stays
EXIT_CLUSTER = 7  # --scheduler: no usable worker, a worker that cannot see the corpus or index, scheduler lost
# 130 (Ctrl-C) and 143 (SIGTERM): simdoc.interrupts, which the command loads before anything else.


class SimdocError(Exception):
    """Base class of every error simdoc reports to a user.

    ``warnings`` may hold what was noticed before the error (e.g. the files
    skipped before "no readable documents"), for the CLI to show first.
    """

    exit_code = EXIT_INTERNAL
    warnings: list[str] = []

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class UsageError(SimdocError):
    """An option value breaks a rule (threshold outside (0, 1], bands*rows > num_perm, ...)."""

    exit_code = EXIT_USAGE


class CorpusError(SimdocError):
    """The corpus cannot be read as a whole (missing, empty, nothing readable)."""

    exit_code = EXIT_INPUT


class IndexError_(SimdocError):
    """The index directory is missing a stage, damaged, or holds other parameters."""

    exit_code = EXIT_INDEX


def option_name(name: str) -> str:
    """The command-line flag of a parameter: ``max_bytes`` -> ``--max-bytes``."""
    return "--" + name.replace("_", "-")


def spell_option(name: str, value: object) -> str:
    """A parameter value as it is typed on the command line.

    >>> spell_option("max_bytes", 100), spell_option("lowercase", False), spell_option("max_bytes", None)
    ('--max-bytes 100', '--no-lowercase', 'no --max-bytes')
    >>> spell_option("include", ["*.txt", "a b/*"])
    "--include '*.txt' --include 'a b/*'"
    """
    option = option_name(name)
    if isinstance(value, bool):
        return option if value else "--no-" + option[2:]
    if value is None or (isinstance(value, (list, tuple)) and not value):
        return f"no {option}"
    if isinstance(value, (list, tuple)):
        return " ".join(f"{option} {shlex.quote(str(v))}" for v in value)
    return f"{option} {shlex.quote(str(value))}"


GLOB_SETTINGS = ("include", "exclude")  # index settings that a user may take for output filters


class ParameterMismatch(IndexError_):
    """The index was built with a parameter value other than the one asked for."""

    def __init__(self, stage: str, name: str, stored: object, asked: object, index: str) -> None:
        asked_text = spell_option(name, asked)
        stored_text = spell_option(name, stored)
        built = f"without {stored_text[3:]}" if stored_text.startswith("no --") else f"with {stored_text}"
        drop = asked_text if isinstance(asked, bool) else option_name(name)
        hint = (
            f"drop {drop} to use the stored value, pass --rebuild to rebuild the index "
            "with the new value, or choose another --index"
        )
        what = ""
        if name in GLOB_SETTINGS:
            # Not an output filter: say what they are, and how to get a narrower answer.
            what = ": --include and --exclude choose the documents an index holds, they do not filter its output"
            hint = (
                f"drop {drop} to use the index as built, pass --rebuild to index the corpus again with the new "
                "globs, or choose another --index for an index of just those documents"
            )
        super().__init__(
            f"the index at {index} was built {built} ({stage} stage), but {asked_text} was asked for{what}", hint=hint
        )
        self.stage = stage
        self.name = name
        self.stored = stored
        self.asked = asked


class CorruptIndex(IndexError_):
    """A file of the index cannot be read or does not match what the manifest says."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(
            f"damaged index file {path}: {problem}",
            hint="rebuild it with --rebuild (or delete the index directory)",
        )
        self.path = path


class OutputError(SimdocError):
    """What simdoc wrote could not be stored: stdout is closed or full, or the disk under the index is full.

    Not the corpus's fault nor the index's: nothing is damaged, and the same
    command succeeds once there is room (or somewhere to write to).
    """

    exit_code = EXIT_WRITE

    def __init__(self, message: str, hint: str | None = None, stdout: bool = False) -> None:
        super().__init__(message, hint)
        self.stdout = stdout  # True: stdout failed (what is still buffered for it must be dropped)


class ClusterError(SimdocError):
    """The Dask cluster cannot do the work as asked, or went away during it.

    No worker joined in time; a worker cannot import simdoc, runs another
    version of it, or cannot see the corpus or the index at the client's
    paths; the scheduler was lost, or a task kept killing its workers. The
    corpus and the index are fine: the same command works on a sound
    cluster, or without --scheduler.
    """

    exit_code = EXIT_CLUSTER


class IndexBusy(SimdocError):
    """Another run holds the index's writer lock."""

    exit_code = EXIT_BUSY

    def __init__(self, index: str, holder: str, waited: float) -> None:
        super().__init__(
            f"the index at {index} is being written by another simdoc run ({holder})"
            + (f"; waited {waited:g} s" if waited else ""),
            hint="try again later, or pass --wait SECONDS to wait for it",
        )
