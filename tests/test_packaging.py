"""The package as a user gets it: built into a wheel and an sdist that twine accepts,
installed quietly (from the wheel, the source tree, a git URL, and editable with the newest
pip as the README's test command does) into a fresh virtual environment, where it works.
Needs the package index (the fresh environment installs requests, urllib3, certifi and wrapt
from it)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
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
    # The sdist's tests run from it: their fixtures (the root conftest) and the files they read.
    import tarfile

    with tarfile.open(sdists[0]) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    assert {"conftest.py", "tests/support.py", "docs/design.md", "tools/constraints.txt"} <= names


def test_the_wheel_holds_both_packages_whole_and_the_entry_points(dist: Path, source: Path) -> None:
    """Every file of the two packages, bootstrap/ (no __init__.py) and py.typed included,
    nothing else beside the metadata; the licence, the command and the pytest plugin."""
    with zipfile.ZipFile(next(dist.glob("*.whl"))) as wheel:
        names = set(wheel.namelist())
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        entry_points = wheel.read(f"{info}/entry_points.txt").decode()
    tree = {
        path.relative_to(source).as_posix()
        for package in ("requests_fastssl", "_requests_fastssl")
        for path in (source / package).rglob("*")
        if path.is_file()
    }
    assert {n for n in names if not n.startswith(f"{info}/")} == tree
    for member in (
        "requests_fastssl/py.typed",
        "_requests_fastssl/py.typed",
        "_requests_fastssl/bootstrap/sitecustomize.py",
        "_requests_fastssl/_layouts.py",
        "_requests_fastssl/cli/__init__.py",
        f"{info}/licenses/LICENSE",
    ):
        assert member in names
    assert "requests-fastssl = _requests_fastssl.cli:main" in entry_points
    assert "[pytest11]\nrequests_fastssl = _requests_fastssl.pytest_plugin" in entry_points


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
    assert _quiet(install) == []  # nothing at -q: no build backend warning, no chatter
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


def test_an_editable_install_is_quiet_and_runs_the_checkout(source: Path, tmp_path: Path) -> None:
    """The README's test set-up in miniature: the newest pip, then ``pip install -q -e``. What
    runs is the checkout, through ``run``'s start-up hook, and through the pytest plugin's
    entry point in a session where any warning is an error (as in this project's)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    for args in (["-U", "pip"], ["-e", str(source), "pytest"]):
        install = subprocess.run(
            [python, "-m", "pip", "install", "-q", *args],
            capture_output=True,
            text=True,
            env=_env(),
            timeout=600,
        )
        assert _quiet(install) == []
    elsewhere = tmp_path / "elsewhere"  # (not the checkout: its directory would be on sys.path)
    elsewhere.mkdir()

    def child(*argv: str) -> subprocess.CompletedProcess[str]:
        env = _env()
        env.pop("PYTHONPATH", None)
        return subprocess.run(
            [python, *argv], capture_output=True, text=True, env=env, cwd=elsewhere, timeout=120
        )

    code = (
        "import sys, urllib3, requests_fastssl\n"
        "print(sys.modules['sitecustomize'].__file__)\n"
        "print(requests_fastssl.__file__, requests_fastssl.status().state.value)\n"
    )
    proc = child("-m", "requests_fastssl", "run", "--", python, "-c", code)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    hook, package = proc.stdout.splitlines()
    assert hook == str(source / "_requests_fastssl" / "bootstrap" / "sitecustomize.py")
    assert package == f"{source / 'requests_fastssl' / '__init__.py'} active"

    (elsewhere / "test_it.py").write_text(
        "def test_it(fastssl):\n    assert fastssl.status().state.value == 'active'\n"
    )
    tests = child("-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error", "test_it.py")
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert "1 passed" in tests.stdout
    assert "warning" not in (tests.stdout + tests.stderr).lower()
