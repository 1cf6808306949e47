"""The simdoc command, as ``simdoc`` and ``python -m simdoc``.

Signals are handled before the commands are imported (numpy, numba, click
and the stages take half a second or more): Ctrl-C or SIGTERM in that time
ends the run as it does later, with "Interrupted." (exit 130) or
"Terminated." (exit 143), not with a traceback from inside an import. See
:mod:`simdoc.interrupts`. The package's ``__init__`` imports nothing heavy,
so this runs first.
"""

from simdoc.interrupts import finished, handle_signals, stop


def main() -> None:
    handle_signals()
    try:
        from simdoc.cli import main as run_command

        run_command()
    except KeyboardInterrupt as exc:  # before or after the command proper (which says it itself)
        stop(exc)
    finally:
        finished()


if __name__ == "__main__":
    main()
