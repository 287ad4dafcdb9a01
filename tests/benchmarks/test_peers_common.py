"""The peers' copy of the slow simulator: ``benchmarks/peers/common.make_slow_cartpole`` builds
``SlowCartPole`` from its source file alone, in a process that has not imported ``algorithms``
(SB3's and RLlib's simulator processes must not pay for torch and Ray)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import sys
from benchmarks.peers.common import make_slow_cartpole
env = make_slow_cartpole(fast_ms=0.0, slow_ms=0.0, slow_prob=0.0)
obs, _ = env.reset(seed=3)
_, reward, terminated, truncated, _ = env.step(0)
assert env._max_episode_steps == 500, env._max_episode_steps
assert obs.shape == (4,) and reward == 1.0, (obs, reward)
assert "algorithms" not in sys.modules and "torch" not in sys.modules, sorted(m for m in sys.modules if m.split('.')[0] in ('algorithms', 'torch'))
print(type(env.unwrapped).__name__)
"""


def test_make_slow_cartpole_builds_the_simulator_without_importing_algorithms():
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "SlowCartPole", proc.stdout
