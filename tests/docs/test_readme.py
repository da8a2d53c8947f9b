"""The README stays a five-minute read, and its links lead to pages that exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
SYSTEMS = ("distdgl", "bytegnn", "sancus", "hp_gcn", "catgnn", "psc_gcn", "g3")


def test_readme_is_short_and_undated():
    assert len(README.splitlines()) <= 200
    # measurements (dated, with their load) live on docs/benchmarks.rst; history lives in the commits
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", README), "a dated measurement in the README"
    assert "load average" not in README.lower()
    assert not re.search(r"\bissues? #?\d+", README, re.I), "an issue number in the README"


def test_readme_names_the_two_commands_and_links_every_system_page():
    assert "make run" in README and "make test" in README
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README)
    local = [link for link in links if not re.match(r"[a-z]+://", link)]
    missing = [link for link in local if not (ROOT / link).exists()]
    assert not missing, f"README links to missing files: {missing}"
    for system in SYSTEMS:
        assert f"docs/systems/{system}.rst" in local, f"the systems table has no link to {system}'s page"


def test_the_readme_python_tour_is_what_the_docs_show():
    """The tour's snippet is repeated on docs/getting-started.rst: the two stay the same."""
    snippet = re.search(r"\*\*Python\.\*\*.*?```python\n(.*?)```", README, re.S).group(1)
    page = (ROOT / "docs" / "getting-started.rst").read_text(encoding="utf-8")
    block = re.search(r"Python\n------\n\n\.\. code-block:: python\n\n(.*?)\n\n(?=\S)", page, re.S).group(1)
    assert snippet.strip() == "\n".join(line[3:] for line in block.splitlines()).strip()


def test_the_readme_python_tour_runs_as_printed(tmp_path, monkeypatch):
    """The snippet, run as printed (its run log goes to runs/ under a temporary folder): about 10 s."""
    snippet = re.search(r"\*\*Python\.\*\*.*?```python\n(.*?)```", README, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TQDM_DISABLE", "1")
    lines = snippet.rstrip().splitlines()
    scope: dict = {}
    exec(compile("\n".join(lines[:-1]), "README.md", "exec"), scope)
    reduction = eval(lines[-1].split("#")[0], scope)
    assert 0.0 < reduction < 1.0
    assert list((tmp_path / "runs").iterdir()), "the run wrote no log"
