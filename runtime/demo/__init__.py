"""`rewards demo` (and `make demo`): a realistic project on a running server, to look at in the console.

program.py draws the program and its people from a seed; run.py makes the project in the state store and builds
the rest through the HTTP API (client.py). docs/demo.md says what it makes."""

from runtime.demo.client import DemoError
from runtime.demo.run import run

__all__ = ["DemoError", "run"]
