#!/usr/bin/env bash
# Issue 48 item 5's check on a lent CUDA machine, as one prepared command (well inside one call's
# 10 minutes): the CUDA tests of packs and of GPU learners, then the pack learner's CUDA row.
#
#   here, once:  bash ../shared/tools/device_bundle.sh
#   there:       device `run` with carry [".devbundle"] and the command  bash benchmarks/device_packs.sh
#
# With .devbundle/ (the device machine) it installs the bundle first; without it (this machine) it
# runs on .venv, where every CUDA test skips and the CUDA row is left out: a dry run of the script.
# Logs go to $OUT (what the device tool brings back), else to a temporary folder.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-$(mktemp -d)}
if [ -d .devbundle ]; then
  bash .devbundle/setup.sh && . .devbundle/env.sh || exit 1
  python=python3
else
  python=.venv/bin/python
fi
export PYTHONUNBUFFERED=1
$python -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())" | tee "$out/device.log"
timeout 420 $python -m pytest -q -rs -p no:cacheprovider tests/algorithms/test_learner_device.py \
  tests/algorithms/ppo/test_population_mlp_torch.py tests/algorithms/dqn/test_population.py \
  tests/algorithms/sac/test_population.py 2>&1 | tee "$out/pytest.log"
tests=${PIPESTATUS[0]}
timeout 120 $python benchmarks/pack_learner.py --members 16 --iterations 3 --repeat 2 2>&1 | tee "$out/pack_learner.log"
bench=${PIPESTATUS[0]}
echo "pytest rc=$tests pack_learner rc=$bench (logs in $out)"
[ "$tests" -eq 0 ] && [ "$bench" -eq 0 ]
