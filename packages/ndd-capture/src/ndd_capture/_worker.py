"""Entry point of a capture worker process: ``python -m ndd_capture._worker FD J K SHM_FD``."""

import sys
from multiprocessing.connection import Connection

from ._processes import child_main

if __name__ == "__main__":
    fd, j, k, shm = (int(a) for a in sys.argv[1:5])
    child_main(Connection(fd), j, k, shm)
