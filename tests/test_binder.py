"""Static checks of binder/ (never installed here): pins agree with pyproject.toml, scripts are sane."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
BINDER = ROOT / "binder"


def _requirements(lines):
    out: dict[str, set[str]] = {}
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        req = Requirement(line)
        specs = {str(s).replace("+cpu", "") for s in req.specifier}
        out.setdefault(req.name.lower().replace("_", "-"), set()).update(specs)
    return out


def test_pins_match_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    wanted = _requirements(project["dependencies"] + extras["views"] + extras["lab"])
    dgl_env = _requirements(extras["dgl"])
    for name in ("torch", "numpy"):  # the default environment narrows these (torch 2.2.1 needs numpy 1.x)
        wanted[name] = wanted.get(name, set()) | dgl_env[name]
    binder = _requirements((BINDER / "requirements.txt").read_text().splitlines())
    for name, specs in wanted.items():
        assert name in binder, f"binder/requirements.txt lacks {name}"
        if name == "torch":  # pyproject's core range is narrowed to the default environment's exact pin
            assert "==2.2.1" in binder[name] and "==2.2.1" in specs
            continue
        assert binder[name] == specs, f"{name}: binder {sorted(binder[name])} != pyproject {sorted(specs)}"
    assert "dgl" not in binder


def test_binder_scripts():
    assert (BINDER / "runtime.txt").read_text().strip() == "python-3.11"
    start = (BINDER / "start").read_text().strip().splitlines()
    assert start[0].startswith("#!") and start[-1] == 'exec "$@"'
    post = (BINDER / "postBuild").read_text()
    assert post.startswith("#!/bin/bash") and "set -euo pipefail" in post and "-e ." in post
    assert not (ROOT / ".binder").exists()  # repo2docker refuses both folders
