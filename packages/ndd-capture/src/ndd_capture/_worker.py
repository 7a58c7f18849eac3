"""Entry point of a capture worker process: ``python -m ndd_capture._worker FD J K``."""

import sys
from multiprocessing.connection import Connection

from ._processes import child_main

if __name__ == "__main__":
    fd, j, k = (int(a) for a in sys.argv[1:4])
    child_main(Connection(fd), j, k)
