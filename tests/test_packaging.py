"""The package as a user gets it: built into a wheel and an sdist that twine accepts,
installed quietly (from the wheel, the source tree, a git URL) into a fresh virtual
environment, where it works. Needs the package index (the fresh environment installs
requests, urllib3, certifi and wrapt from it)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import ROOT, clean_env

pytestmark = [pytest.mark.index, pytest.mark.subprocess]

# pip's own chatter that has nothing to do with the package (a newer pip exists; a find-links
# location of this machine's configuration that does not exist).
_PIP_NOISE = ("[notice]", "WARNING: Location ")


def _quiet(proc: subprocess.CompletedProcess[str]) -> list[str]:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = (proc.stdout + proc.stderr).splitlines()
    return [line for line in lines if line.strip() and not line.startswith(_PIP_NOISE)]


def _env() -> dict[str, str]:
    env = clean_env()
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


_NOT_SOURCE = shutil.ignore_patterns(
    ".git", ".venv", ".nox", "build", "dist", "*.egg-info", "__pycache__", ".*_cache"
)


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the project, in a git repository of its own: the build must not depend on
    what this checkout holds besides the project (a build/ folder, caches), and the git URL
    install needs a repository even where the suite runs from an exported tree."""
    tree = tmp_path_factory.mktemp("src") / "requests-fastssl"
    shutil.copytree(ROOT, tree, ignore=_NOT_SOURCE)
    git = [
        "git",
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@localhost",
        "-c",
        "init.defaultBranch=main",
    ]
    for step in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "snapshot"]):
        subprocess.run([*git, *step], cwd=tree, check=True, capture_output=True, timeout=120)
    return tree


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory, source: Path) -> Path:
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", str(out), str(source)],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Package would be ignored" not in proc.stdout + proc.stderr
    return out


def test_build_makes_a_wheel_and_an_sdist_twine_accepts(dist: Path) -> None:
    wheels, sdists = list(dist.glob("*.whl")), list(dist.glob("*.tar.gz"))
    assert len(wheels) == 1
    assert len(sdists) == 1
    check = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *map(str, wheels + sdists)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.count("PASSED") == 2


@pytest.mark.parametrize("how", ["wheel", "path", "git"])
def test_a_fresh_venv_installs_it_quietly_and_it_works(
    dist: Path, source: Path, tmp_path: Path, how: str
) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    target = {
        "wheel": str(next(dist.glob("*.whl"))),
        "path": str(source),
        "git": f"git+file://{source}",
    }[how]
    install = subprocess.run(
        [python, "-m", "pip", "install", "-q", target],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=600,
    )
    assert _quiet(install) == []  # nothing at -q: no setuptools warning, no chatter
    doctor = subprocess.run(
        [python, "-m", "requests_fastssl", "doctor"],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=tmp_path,  # not the checkout: the installed package only
        timeout=120,
    )
    # Nothing in a fresh venv turns the shim on at start-up: doctor says so, apart from its own
    # process (where it imported the shim itself); under `run` the programs get it.
    assert doctor.returncode == 1, doctor.stdout + doctor.stderr
    assert doctor.stdout.splitlines()[-1] == (
        "result: 1 finding(s): your programs would not get the shim (nothing turns it on at "
        "start-up)"
    )
    assert "  shim in this process: active" in doctor.stdout
    under_run = subprocess.run(
        [python, "-m", "requests_fastssl", "run", "--", python, "-m", "requests_fastssl",
         "doctor", "--no-self-test"],
        capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert under_run.returncode == 0, under_run.stdout + under_run.stderr
    assert "  active, via run's start-up hook (" in under_run.stdout
    # trustme is not a run-time dependency: the self-test says what to install, by a name
    # that exists on the package index.
    assert "self-test: not run, it needs trustme: pip install trustme" in doctor.stdout
    assert "requests-fastssl[" not in doctor.stdout + doctor.stderr
    bench = subprocess.run(
        [python, "-m", "requests_fastssl", "bench", "--repeat", "1"],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=tmp_path,
        timeout=120,
    )
    assert bench.returncode == 1
    assert "needs trustme for a throw-away certificate authority: pip install trustme" in (
        bench.stderr
    )
    assert "Traceback" not in bench.stderr
