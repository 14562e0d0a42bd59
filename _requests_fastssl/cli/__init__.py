"""The command line: ``python -m requests_fastssl bench | doctor | run`` (also
``requests-fastssl``). One job per module:

- ``main``: the parser and dispatch; every argument is checked before any work
- ``output``: the program name, the error line, versions and machine facts
- ``bench``: the benchmark's orchestration; ``engine``: its plan and runs; ``child``: what
  runs in each fresh interpreter; ``table``: the printed table and verdicts
- ``doctor``: the diagnosis; ``programs``: its question, whether the user's programs get the
  shim, asked of fresh interpreters; ``pytest_here``: the same for pytest; ``request``: its
  ``--url`` request; ``report``: its lines, JSON and exit status
- ``run``: the command with the shim in every Python it starts
- ``server``: the embedded HTTPS server; ``pki``: the throw-away CA and certifi-plus bundle;
  ``loads``: the one counter of CA loads (benchmarks and tests)

The CLI is the only part of the package that prints: results to stdout, progress to stderr
(and the core's one at-exit line that ``REQUESTS_FASTSSL_REPORT`` asks for).
"""

from __future__ import annotations

from .main import main

__all__ = ["main"]
