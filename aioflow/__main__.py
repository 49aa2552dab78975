"""``python -m aioflow info``: see :mod:`aioflow.info`."""
import sys

from .info import main

if __name__ == "__main__":
    sys.exit(main())
