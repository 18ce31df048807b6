"""The tests never fetch data: a test that points SAT_TUTORIAL_DATA at an empty folder
gets the offline stand-in, not a download (tests/test_mnist.py fakes the network)."""

import os

os.environ.setdefault("SAT_TUTORIAL_OFFLINE", "1")
