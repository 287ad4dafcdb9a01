"""examples/ppo_sweep.py, the README's PPO sweep: the README shows the file as it is, and it runs
(on a small budget) to a best config and a best agent that acts."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys

from tests.conftest import ROOT

EXAMPLE = ROOT / "examples" / "ppo_sweep.py"


def _code_without_docstring(path) -> str:
    source = path.read_text()
    docstring = ast.get_docstring(ast.parse(source), clean=False)
    assert docstring is not None
    return source.split('"""', 2)[2].lstrip("\n")


def test_the_readme_shows_the_example_as_it_is():
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    assert _code_without_docstring(EXAMPLE) in blocks


def test_the_example_runs_to_a_best_config_and_an_agent_that_acts(ray_session, tmp_path):
    env = {**os.environ, "RAY_ADDRESS": ray_session.get_runtime_context().gcs_address}
    done = subprocess.run([sys.executable, str(EXAMPLE), "512", "2"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "'env': 'CartPole-v1'" in done.stdout.splitlines()[-1], done.stdout[-2000:]

    import algorithms
    from tuner import tune

    analysis = tune.load(str(tmp_path / "results" / "ppo_cartpole"))
    agent = algorithms.load_agent(analysis.get_best_checkpoint().path)
    env_ = agent.make_env()
    observation, _ = env_.reset(seed=0)
    assert env_.action_space.contains(agent.act(observation, explore=False))
