"""examples/packed_pbt.py: PBT over packed DQN trials runs (on a small budget) to exploits inside
its packs, a best trial that is a packed member, and its agent, which acts."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from tests.conftest import ROOT


def test_the_example_runs_packed_to_exploits_and_a_best_agent_that_acts(ray_session, tmp_path):
    env = {**os.environ, "RAY_ADDRESS": ray_session.get_runtime_context().gcs_address}
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "packed_pbt.py"), "4", "4"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    last = done.stdout.splitlines()[-1]
    assert re.match(r"^[1-9]\d* exploits; best \w+ \(packed, pack of \d\): return [\d.]+ with \{.*\}; its agent acts: [01]$",
                    last), done.stdout[-2000:]
    assert "pack_trials=2: trials of DQN run packed, up to 2 to a process" in done.stdout
