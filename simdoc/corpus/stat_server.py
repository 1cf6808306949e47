"""The helper process of :mod:`simdoc.corpus.stat_helper`: stat the names it is sent, in a folder.

It is run by its path, ``python -I -S stat_server.py``, and imports only the
standard library (no numpy, no simdoc): it starts in a few tens of
milliseconds, inherits none of the walk's state (a forked copy of the walk
would hold its memory, its open files and whatever numba had loaded), and
ends with its input.

It writes one byte, ``R``, when it is ready. Then, on stdin, requests, each
a length-prefixed pickle (folder, device, inode, names, fields): the folder
and names as bytes, the names joined by NUL;
``fields`` the attributes of ``os.lstat``'s result to send. On stdout, a
reply to each, a length-prefixed pickle: (rows, failed), rows the fields of
each name as native int64 bytes (zeros for a name that failed), failed the
indices of the names ``os.lstat`` refused; or None if the folder opened is
not the one named by device and inode, or anything went wrong (the walk
then stats those names itself). It ends at the end of its stdin.
"""

import os
import pickle
import signal
import struct
import sys
from array import array
from operator import attrgetter

_LENGTH = struct.Struct("<Q")


def serve(folder: bytes, dev: int, ino: int, joined: bytes, fields: tuple):
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != (dev, ino):  # replaced since the walk listed it
            return None
        get, zero = attrgetter(*fields), (0,) * len(fields)
        rows, failed = array("q"), []
        for i, name in enumerate(joined.split(b"\0")):
            try:
                rows.extend(get(os.lstat(name, dir_fd=fd)))
            except OSError:
                failed.append(i)
                rows.extend(zero)
        return rows.tobytes(), failed
    except Exception:  # noqa: BLE001 - an inode past int64, say: the walk stats these itself
        return None
    finally:
        os.close(fd)


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the process group: the walk handles it
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    out.write(b"R")
    out.flush()
    while True:
        head = inp.read(_LENGTH.size)
        if len(head) < _LENGTH.size:
            return
        request = pickle.loads(inp.read(_LENGTH.unpack(head)[0]))
        reply = pickle.dumps(serve(*request), protocol=pickle.HIGHEST_PROTOCOL)
        try:
            out.write(_LENGTH.pack(len(reply)) + reply)
            out.flush()
        except BrokenPipeError:  # the walk is gone
            return


if __name__ == "__main__":
    main()
