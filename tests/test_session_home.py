"""The test session writes only under temporary folders: every default that lives in the home
(tune.run's ~/tuner_results, the CLI's index of sweep locations, Ray's token) lands in the
session's own temporary home, in this process and in Ray's workers."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from tests.conftest import SESSION_HOME


def _home() -> str:
    return str(Path.home())


def test_the_home_of_the_test_session_is_a_temporary_folder():
    from tuner.cli.paths import _index_path, default_storage_path

    assert Path.home() == SESSION_HOME
    assert SESSION_HOME.is_relative_to(Path(tempfile.gettempdir()))
    assert Path(default_storage_path()).expanduser().is_relative_to(SESSION_HOME)
    assert _index_path().is_relative_to(SESSION_HOME)


@pytest.mark.usefixtures("ray_session")
def test_rays_workers_share_the_temporary_home():
    import ray

    assert ray.get(ray.remote(_home).remote()) == str(SESSION_HOME)


def _bytecode_settings() -> tuple[bool, str | None]:
    import sys

    return sys.dont_write_bytecode, sys.pycache_prefix


@pytest.mark.usefixtures("ray_session")
def test_rays_workers_keep_the_bytecode_they_compile_beside_the_sources_or_in_the_temporary_home():
    """A worker that may not write bytecode compiles every module it imports again; where the
    environment forbids it beside the sources, the session's processes keep it in its home."""
    import ray

    dont_write, prefix = ray.get(ray.remote(_bytecode_settings).remote())
    assert not dont_write
    assert prefix is None or Path(prefix).is_relative_to(SESSION_HOME)
