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


@pytest.mark.parametrize("url", ["mysq://u@h/db", "foo"])
def test_a_malformed_database_url_is_a_bad_flag_exit_2_in_one_line(url, tmp_path):
    from tests.tuner.cli.conftest import cli

    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    storage = tmp_path / "results"
    for argv in (["sweep", str(spec), "--name", "bad", "--set", f"storage_path={storage}"], ["ls"], ["show", "bad"],
                 ["best", "bad"], ["export", "bad", "--format", "csv"], ["resume", "bad"]):
        proc = cli(*argv, "--database-url", url, *([] if argv[0] == "sweep" else ["--storage-path", str(storage)]))
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2, (argv, proc.returncode, proc.stderr)
        assert len(lines) == 1 and lines[0].startswith("tuner: error: ") and "database" in lines[0], (argv, lines)
        assert "postgresql+psycopg://" in lines[0] and "Traceback" not in proc.stderr  # the allowed forms
    assert not storage.exists()


def test_an_unreachable_database_is_one_line_exit_1_and_nothing_is_written(postgres_url, tmp_path):
    from tests.tuner.cli.conftest import cli

    url = sa.make_url(postgres_url).set(database="tuner_no_such_db_16", password=PASSWORD)
    url = url.render_as_string(hide_password=False)
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    storage = tmp_path / "results"
    for argv in (["sweep", str(spec), "--name", "gone", "--set", f"storage_path={storage}"],
                 ["show", "gone", "--storage-path", str(storage)], ["ls"]):
        proc = cli(*argv, "--database-url", url)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 1, (argv, proc.returncode, proc.stderr)
        assert len(lines) == 1 and 'database "tuner_no_such_db_16" does not exist' in lines[0], (argv, lines)
        assert PASSWORD not in proc.stderr and "Traceback" not in proc.stderr
    assert not storage.exists()
