"""A real urllib3 older than the supported range, in a throwaway virtual environment."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support import ROOT, clean_env

SCRIPT = """
import logging, sys
logging.basicConfig(stream=sys.stdout, format="%(levelname)s %(message)s")
import requests_fastssl, requests
import urllib3.connection as connection
print(requests.__version__)
print(requests_fastssl.status())
print(type(connection.ssl_wrap_socket).__name__)  # a plain function: stock
requests_fastssl.install()  # no second warning
try:
    requests_fastssl.install(strict=True)
except requests_fastssl.UnsupportedVersionError as exc:
    print("strict:", exc)
"""


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.index
def test_urllib3_1_25_is_left_stock(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    pip = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "requests==2.29.0", "urllib3==1.25.11", "wrapt>=2.4"], check=True)
    env = clean_env("PYTHONPATH")
    # Asked of stock first, before the shim is in the venv: urllib3 1.25's vendored six has no
    # find_spec, which Python 3.12 and later need, so there it cannot import at all, and the
    # question of leaving it stock does not arise.
    stock = subprocess.run(
        [python, "-c", "import requests, urllib3.connection"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    if stock.returncode != 0:
        error = (stock.stderr.strip().splitlines() or [f"exit status {stock.returncode}"])[-1]
        pytest.skip(
            f"urllib3 1.25.11 cannot be imported on Python {sys.version.split()[0]}, stock, "
            f"without the shim ({error})"
        )
    subprocess.run([*pip, "--no-deps", str(ROOT)], check=True)
    out = subprocess.run(
        [python, "-c", SCRIPT],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=True,
    ).stdout.splitlines()
    reason = "urllib3 1.25.11 is outside 1.26.x-2.x"
    assert out == [
        f"WARNING requests_fastssl: leaving urllib3 (and requests) stock: {reason}",
        "2.29.0",
        f"unsupported: {reason}",
        "function",
        f"strict: requests_fastssl cannot patch: {reason}",
    ]
