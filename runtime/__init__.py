"""The composition root, above the three services and the shared library: it alone imports them all.

- wiring.py: which adapter serves each port, picked from the scheme of its engine's URL. Every process opens its
  engines there and nowhere else: `rewards serve` (the embedded shape), the production services and workers, and
  the command line.
- serve.py: `rewards serve`, the embedded default (every router and the worker in one process).
- production.py: the production shape's two HTTP apps (ingest-api, query-api).
- commands/: the `rewards` command line's commands. The command line itself (rewards/cli.py) is the shared
  library's and imports nothing of this package: it collects the commands of the `rewards.commands` entry points
  (pyproject.toml), as Flask's `flask` command collects `flask.commands`.
"""
