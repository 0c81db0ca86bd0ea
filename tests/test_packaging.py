"""The built wheel, as a new user installs it: no top-level `jobs` package, the spark-submit jobs and the default
configuration inside `indexlib`, and `skipindex demo` working in an empty directory with its data under the data
location. The wheel is built from a copy of this checkout and installed `--no-deps` into a fresh venv; the
dependencies come from the running interpreter's site-packages through a `.pth` path line (which does not process
that directory's own `.pth` files, so the checkout's editable install is not seen)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
NOT_SOURCES = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".skipindex", ".*_cache", "spark-warehouse"
)


def _run(*args: str | Path, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=600, **kwargs)
    assert done.returncode == 0, f"{' '.join(map(str, args))} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    return done


def _built_wheel(tmp_path: Path) -> Path:
    source = tmp_path / "source"  # a copy: building in place would leave build/ and *.egg-info in the checkout
    shutil.copytree(REPO, source, ignore=NOT_SOURCES)
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", tmp_path / "wheels", source)
    (wheel,) = (tmp_path / "wheels").glob("skipindex-*.whl")
    return wheel


def _fresh_venv(tmp_path: Path, wheel: Path) -> tuple[Path, dict[str, str]]:
    """A venv with only the wheel installed, the running interpreter's packages on its path, and an environment
    without any of this checkout's settings."""
    venv = tmp_path / "venv"
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "SKIPINDEX_CONF", "SKIPINDEX_HOME", "XDG_DATA_HOME")  # (pip too: a checkout
    }  # on PYTHONPATH would make it see skipindex as installed already)
    env["HOME"] = str(tmp_path / "home")
    env["PATH"] = os.pathsep.join((str(venv / "bin"), str(Path(sys.executable).parent), env.get("PATH", "")))
    _run(sys.executable, "-m", "venv", "--without-pip", venv, env=env)
    python = venv / "bin" / "python"
    _run(sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-deps", wheel, env=env)
    site = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", env=env).stdout.strip())
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    imported = _run(python, "-c", "import indexlib; print(indexlib.__file__)", env=env, cwd=tmp_path).stdout.strip()
    assert Path(imported).is_relative_to(site), f"the wheel's indexlib is tested, not the checkout's: {imported}"
    return venv, env


@pytest.mark.slow
def test_the_wheel_has_no_top_level_jobs_package_and_ships_the_jobs_and_the_default(tmp_path):
    names = zipfile.ZipFile(_built_wheel(tmp_path)).namelist()
    top_level = {name.split("/")[0] for name in names}
    assert top_level == {"indexlib", "skipindex-0.1.0.dist-info"}, f"only indexlib is installed: {top_level}"
    for shipped in (
        "indexlib/defaults/local.toml",
        "indexlib/jobs/build_index.py",
        "indexlib/jobs/backfill.py",
        "indexlib/jobs/verify.py",
    ):
        assert shipped in names, f"{shipped} is in the wheel"


@pytest.mark.slow
@pytest.mark.spark
def test_pip_install_of_the_wheel_then_demo_in_an_empty_directory_works(tmp_path):
    venv, env = _fresh_venv(tmp_path, _built_wheel(tmp_path))
    empty = tmp_path / "empty"
    empty.mkdir()
    no_jobs = subprocess.run([venv / "bin" / "python", "-c", "import jobs"], env=env, cwd=empty, capture_output=True)
    assert no_jobs.returncode != 0, "no `jobs` package to collide with users' own code"
    job = _run(venv / "bin" / "python", "-m", "indexlib.jobs.build_index", "--help", env=env, cwd=empty)
    assert "--table" in job.stdout, "the build job runs as a module of the installed package"

    done = _run(
        venv / "bin" / "skipindex",
        "demo",
        "--scale",
        "0.01",
        "--snapshots",
        "2",
        "--files-per-snapshot",
        "2",
        env=env,
        cwd=empty,
    )
    assert "service = 'metadata'" in done.stdout, f"the demo ran its queries:\n{done.stdout[-2000:]}"
    data = tmp_path / "home" / ".local" / "share" / "skipindex"
    assert (data / "catalog.db").is_file() and (data / "warehouse" / "demo").is_dir(), (
        "the packaged default keeps its catalog and warehouse under the data location"
    )
    assert not any(empty.iterdir()), f"nothing is written to the working directory: {list(empty.iterdir())}"
