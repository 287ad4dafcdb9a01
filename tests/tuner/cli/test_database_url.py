"""A sweep in PostgreSQL through --database-url: a password in the URL is never printed or saved."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa

from tests.conftest import ROOT
from tuner.cli import main

pytestmark = pytest.mark.usefixtures("ray_session")

PASSWORD = "pw-never-shown-42"
SPEC = """\
trainable: tests.tuner.cli.cli_trainables:quadratic
metric: score
mode: max
resources: {cpu: 0.5}
config: {x: {grid: [0.2, 0.6]}, iterations: 3}
"""


def test_a_password_in_the_database_url_is_never_printed_or_saved(postgres_url, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    url = sa.make_url(postgres_url).set(password=PASSWORD).render_as_string(hide_password=False)
    name = f"pw_{uuid.uuid4().hex[:8]}"
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    storage = tmp_path / "results"
    assert main(["sweep", str(spec), "--name", name, "--database-url", url, "--set", f"storage_path={storage}"]) == 0
    printed = capsys.readouterr()
    assert f"sweep {name}: 2 trials (2 TERMINATED)" in printed.out and "***" in printed.out

    for argv in (["ls"], ["show", name], ["best", name, "--json"], ["export", name, "--format", "json"]):
        assert main([*argv, "--database-url", url, "--storage-path", str(storage)]) == 0, argv
    assert main(["show", name, "--storage-path", str(storage)]) == 2  # the URL is needed again
    assert main(["resume", name, "--storage-path", str(storage)]) == 2
    printed = [printed.out, printed.err, *capsys.readouterr()]
    assert "pass the URL with --database-url" in printed[-1]
    assert name in printed[2] and "TERMINATED" in printed[2]
    assert not any(PASSWORD in text for text in printed)
    files = [p for p in (storage / name).rglob("*") if p.is_file()]
    assert (storage / name / "sweep.yaml") in files
    assert not any(PASSWORD.encode() in p.read_bytes() for p in files)
