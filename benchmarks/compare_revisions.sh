#!/usr/bin/env bash
# Run one benchmark on two revisions of this repository, alternating (A B A B ...), from the same
# venv, so that a change's before and after are measured in one sitting on one machine.
#
#   bash benchmarks/compare_revisions.sh 626dbd0 HEAD 2 ppo_cartpole.py --seeds 0,1 --no-sb3 --per-update
#
# Arguments: BASE REV, HEAD REV, rounds, the script under benchmarks/ and its arguments. Each
# revision is exported with `git archive` to a temporary folder and run with PYTHONPATH set to it;
# each run's output is printed after a line naming the revision, the time and the load average.
set -euo pipefail
if [ $# -lt 4 ]; then
  echo "usage: $0 BASE_REV HEAD_REV ROUNDS SCRIPT.py [ARGS...]" >&2
  exit 2
fi
base=$1 head=$2 rounds=$3 script=$4
shift 4
root=$(git rev-parse --show-toplevel)
python=${PYTHON:-$root/.venv/bin/python}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for rev in "$base" "$head"; do
  mkdir -p "$work/$rev"
  git -C "$root" archive "$rev" | tar -x -C "$work/$rev"
done
for round in $(seq "$rounds"); do
  for rev in "$base" "$head"; do
    echo "=== $rev (round $round) $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)"
    (cd "$work/$rev" && PYTHONPATH="$work/$rev" "$python" "benchmarks/$script" "$@")
  done
done
