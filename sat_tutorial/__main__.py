"""`python -m sat_tutorial`: the same as the `sat-tutorial` command (hand-written: nbdev
does not generate __main__)."""

import sys

from sat_tutorial.cli import main

if __name__ == "__main__":
    sys.exit(main())
