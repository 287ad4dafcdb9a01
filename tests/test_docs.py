"""The documentation: a README that is a front door, and the site under docs/ built strictly (no
broken link, no page left out of the navigation)."""

from __future__ import annotations

import pytest

import os
import subprocess
import sys

from tests.conftest import ROOT

pytestmark = pytest.mark.slow


def test_the_readme_stays_a_front_door():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines: the rest belongs under docs/"


def test_the_site_builds_strictly(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "index.html").exists()


def test_the_readme_links_only_to_pages_that_exist():
    import re

    for target in re.findall(r"\]\(([^)#]+)", (ROOT / "README.md").read_text()):
        if "://" not in target:
            assert (ROOT / target).exists(), target
