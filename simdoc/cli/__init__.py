"""The ``simdoc`` command: click commands that parse options and call the library.

Exit status: 0 success (with or without pairs), 1 internal error (a bug),
2 usage error, 3 corpus error, 4 index error, 5 index busy, 6 output could
not be written (stdout or the index), 7 cluster error (--scheduler: no usable
worker, a worker that cannot see the corpus or index, the scheduler lost),
130 interrupted (Ctrl-C), 143 terminated (SIGTERM).
"""

from __future__ import annotations

import gc
import importlib
import logging
import sys

import click

from simdoc.cli.options import MAX_WARNINGS, reader_went_away
from simdoc.cli.stdio import discard_stdout, guarded_stdout, open_closed_descriptors
from simdoc.errors import OutputError, SimdocError
from simdoc.interrupts import how_it_ended
from simdoc.memory import return_freed_blocks
from simdoc.output import visible_text
from simdoc.version import __version__
from simdoc.wording import plural

log = logging.getLogger("simdoc")


# Every command: its name, the module that defines it, and its function there. A module is
# imported when one of its commands is asked for (run, or listed by --help): `simdoc pairs`
# does not import the reports, show, tuning and cache commands and what only they use
# (~0.035 CPU-s of a nightly run that finds nothing changed, issue 29).
COMMANDS = {
    "shingle": ("simdoc.cli.stages", "shingle"),
    "signature": ("simdoc.cli.stages", "signature"),
    "index": ("simdoc.cli.stages", "index_cmd"),
    "pairs": ("simdoc.cli.stages", "pairs"),
    "query": ("simdoc.cli.lookup", "query"),
    "check": ("simdoc.cli.lookup", "check"),
    "clusters": ("simdoc.cli.reports", "clusters"),
    "dedup": ("simdoc.cli.reports", "dedup"),
    "tune": ("simdoc.cli.tuning", "tune_cmd"),
    "stats": ("simdoc.cli.tuning", "stats"),
    "show": ("simdoc.cli.show", "show"),
    "cache": ("simdoc.cli.cache", "cache"),
}


class _Group(click.Group):
    """Turns SimdocError into `Error: ...` on stderr and its exit code; no traceback. Its
    commands are registered as they are asked for (:data:`COMMANDS`)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.commands) | set(COMMANDS))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        # A name that is no command: all are registered, as click suggests the closest among those.
        for wanted in [cmd_name] if cmd_name in COMMANDS else list(COMMANDS):
            if wanted not in self.commands:
                module, name = COMMANDS[wanted]
                self.add_command(getattr(importlib.import_module(module), name), wanted)
        return super().get_command(ctx, cmd_name)

    def main(self, *args, **kwargs):
        # The guard spans --help and --version too, and the last flush after the command.
        try:
            with guarded_stdout():
                return super().main(*args, **kwargs)
        except OutputError as exc:
            _say_error(exc)
            sys.exit(exc.exit_code)

    def make_context(self, *args, **kwargs) -> click.Context:
        # A signal while the options are parsed would be click's "Aborted!" and exit 1.
        try:
            return super().make_context(*args, **kwargs)
        except KeyboardInterrupt as exc:
            message, code = how_it_ended(exc)
            click.echo(message, err=True)
            sys.exit(code)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except SimdocError as exc:
            _say_error(exc)
            ctx.exit(exc.exit_code)
        except BrokenPipeError:
            reader_went_away()
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (simdoc.interrupts): cleaned up on the way here
            message, code = how_it_ended(exc)
            click.echo(message, err=True)
            ctx.exit(code)


def _say_error(exc: SimdocError) -> None:
    if isinstance(exc, OutputError) and exc.stdout:
        discard_stdout()
    warnings = getattr(exc, "warnings", [])
    for w in warnings[:MAX_WARNINGS]:
        click.echo(f"warning: {visible_text(w)}", err=True)
    if len(warnings) > MAX_WARNINGS:
        more = len(warnings) - MAX_WARNINGS
        click.echo(f"warning: ... and {more} more {plural(more, 'warning')}", err=True)
    click.echo(f"Error: {visible_text(str(exc))}", err=True)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="simdoc")
def cli() -> None:
    """Find near-duplicate documents: shingles, MinHash, LSH, exact Jaccard.

    \b
    Examples:
    The one command most people need:
      simdoc pairs my_corpus/            # build the index, print pairs
    or stage by stage, with the index where you want it:
      simdoc shingle my_corpus/ --index idx
      simdoc signature --index idx
      simdoc index --index idx --threshold 0.8
      simdoc pairs --index idx
    """




def main() -> None:
    # A command keeps a few objects per document alive to its end and makes no cycles
    # worth collecting; the cycle collector would walk them all again and again, and
    # once more at exit (~0.2 s of a 7 s run at 10^5 documents, perf). Frozen objects
    # are left out of that last collection.
    gc.disable()
    return_freed_blocks()  # freed arrays leave the process (simdoc.memory)
    open_closed_descriptors()
    try:
        cli.main(prog_name="simdoc")
    finally:
        gc.freeze()


if __name__ == "__main__":  # pragma: no cover
    main()

