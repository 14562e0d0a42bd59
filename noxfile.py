"""The requests x urllib3 matrix and requests' own test suite under the shim.

    nox -s tests                                          every pair below (24 sessions)
    nox -s "tests(requests='2.30.0', urllib3='2.0.7')"    one pair
    nox -s peer                                           requests' own suite, stock vs shim

Every pair is allowed by the requests it names (urllib3 <3, >=1.21.1 or >=1.26), so none is
skipped. "Newest" means the newest release on the day the list was last updated.
"""

from __future__ import annotations

import nox

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.sessions = ["tests"]

# 2.30.0: the first to allow urllib3 2; 2.32.2: the first 2.32 not yanked, with its own
# preloaded context, as in 2.32.3 and 2.32.4 (a context given to urllib3).
REQUESTS = ["2.30.0", "2.31.0", "2.32.2", "2.32.3", "2.32.4", "2.32.5", "2.33.1", "2.34.2"]
# 2.0.7: the oldest urllib3 2 line this shim patches (its set-up takes the same inputs)
URLLIB3 = ["1.26.20", "2.0.7", "2.8.0"]
# requests' own test dependencies (its pyproject's "test" group, less coverage and xdist)
PEER_DEPS = ["pytest-httpbin==2.1.0", "httpbin~=0.10.0", "pytest-mock", "PySocks>=1.5.6,!=1.5.7"]


@nox.session
@nox.parametrize("urllib3", URLLIB3)
@nox.parametrize("requests", REQUESTS)
def tests(session: nox.Session, requests: str, urllib3: str) -> None:
    session.install("-e", ".", "--group", "test", f"requests=={requests}", f"urllib3=={urllib3}")
    session.run("python", "-m", "pytest", *session.posargs)


@nox.session
def peer(session: nox.Session) -> None:
    # pip fetches requests' sdist (uv-made environments have none of their own)
    session.install("-e", ".", "--group", "test", "pip", *PEER_DEPS)
    session.run("python", "tools/peer_suite.py")
