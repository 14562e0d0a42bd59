"""The requests x urllib3 matrix and requests' own test suite under the shim.

    nox -s tests                                          every pair below (24 sessions)
    nox -s "tests(requests='2.30.0', urllib3='2.0.7')"    one pair
    nox -s peer                                           requests' own suite, stock vs shim
    nox -s known                                          the sharing tests on one release of
                                                          each urllib3 variant the table holds

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
# One release of each variant in _known.TABLE (tools/known_code.py --representatives): a
# variant enters the table only once these pass on it.
KNOWN = [
    "2.0.6",
    "2.0.7",
    "2.1.0",
    "2.2.1",
    "2.2.2",
    "2.2.3",
    "2.3.0",
    "2.4.0",
    "2.5.0",
    "2.6.3",
    "2.8.0",
]
# Test environments take urllib3 no newer than the table's newest (tools/known_code.py writes it).
CONSTRAINTS = "tools/constraints.txt"
# requests' own suite needs these and the package alone: not our test group, whose gevent
# (greenlet >= 3) makes pip fall back to an httpbin that Werkzeug 3 breaks (httpbin 0.10.2+
# wants greenlet < 3 on CPython 3.11).
PEER_DEPS = ["pytest>=8", "trustme>=1.1", "pytest-httpbin==2.1.0", "httpbin~=0.10.0",
             "pytest-mock", "PySocks>=1.5.6,!=1.5.7"]  # fmt: skip


@nox.session
@nox.parametrize("urllib3", URLLIB3)
@nox.parametrize("requests", REQUESTS)
def tests(session: nox.Session, requests: str, urllib3: str) -> None:
    session.install("-e", ".", "--group", "test", f"requests=={requests}", f"urllib3=={urllib3}")
    session.run("python", "-m", "pytest", *session.posargs)


@nox.session
@nox.parametrize("urllib3", KNOWN)
def known(session: nox.Session, urllib3: str) -> None:
    session.install("-e", ".", "--group", "test", f"urllib3=={urllib3}")
    tests = ["tests/test_known_code.py", "tests/test_equivalence.py", "tests/test_point_of_use.py"]
    session.run("python", "-m", "pytest", *tests, "-m", "not slow and not index", *session.posargs)


@nox.session
def newest(session: nox.Session) -> None:
    """Whether the newest urllib3 release is tabled (non-blocking in CI: until a reviewed
    commit tables it, users who upgrade get stock and one warning)."""
    session.install("pip")
    session.run("python", "tools/known_code.py", "--check")


@nox.session
def peer(session: nox.Session) -> None:
    # pip fetches requests' sdist (uv-made environments have none of their own)
    session.install("-e", ".", "pip", *PEER_DEPS, "-c", CONSTRAINTS)
    session.run("python", "tools/peer_suite.py")
