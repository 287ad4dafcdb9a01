"""``tuner checkpoints NAME``, ``tuner fetch NAME`` and ``tuner rollout NAME``: a sweep's trained
agents, from any machine that reaches its store and its storage (its folder, or the object store).

The agent a verb takes by default is the sweep's best: the best trial by the sweep's metric and
mode (its last result, as ``tuner best``), and of that trial's kept checkpoints the best by the
metric when its checkpoints were ranked by one, else its newest. ``--trial`` picks another trial.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

from tuner.cli.errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CLIError
from tuner.cli.live import fmt
from tuner.cli.paths import SweepRef, first_line, locate
from tuner.cli.table import format_table


def _kept(ref: SweepRef) -> tuple[Any, list[dict[str, Any]]]:
    """(the sweep's analysis, its checkpoints still kept, oldest first); the caller closes the analysis."""
    from tuner.cli.query_cmd import _analysis

    analysis = _analysis(ref)
    try:
        return analysis, analysis.checkpoints()
    except BaseException:
        analysis.close()
        raise


def _trial_of(name: str, records: list[dict[str, Any]], given: str) -> str:
    """The trial id ``given`` names (its id, or the id's ``_NNNNN`` end), among those with checkpoints."""
    ids = sorted({str(r["trial_id"]) for r in records})
    found = [t for t in ids if t == given or t.endswith(f"_{given}") or t.endswith(given)]
    if len(found) != 1:
        raise CLIError(f"--trial: {given!r} names {'no' if not found else 'more than one'} trial of sweep {name!r} "
                       f"with a checkpoint; its trials with checkpoints: {', '.join(ids) or 'none'}", EXIT_USAGE)
    return found[0]


def _choose(ref: SweepRef, trial: str | None) -> dict[str, Any]:
    """The checkpoint record a verb works on (see the module's doc); a CLIError when there is none."""
    analysis, records = _kept(ref)
    try:
        if not records:
            raise CLIError(f"sweep {ref.name!r} has no checkpoints (its trials saved none: set checkpoint_freq, "
                           f"checkpoint_at_end, or report a checkpoint)", EXIT_FAILED)
        with_checkpoints = {str(r["trial_id"]) for r in records}
        if trial is not None:
            chosen = _trial_of(ref.name, records, trial)
        else:
            best = analysis.get_best_trial() if analysis.default_metric and analysis.default_mode else None
            # no metric to rank by, or the best trial kept none: the newest checkpoint's trial
            chosen = best.trial_id if best is not None and best.trial_id in with_checkpoints else \
                str(records[-1]["trial_id"])
        path = analysis.get_best_checkpoint(chosen).path
    finally:
        analysis.close()
    return next(r for r in records if r["path"] == path)


def cmd_checkpoints(args: argparse.Namespace) -> int:
    """Each trial's kept checkpoints, with their iteration and the sweep's metric."""
    ref = locate(args.name, args.storage_path, args.database_url)
    analysis, records = _kept(ref)
    metric = analysis.default_metric
    analysis.close()
    if not records:
        print(f"sweep {ref.name} has no checkpoints")
        return EXIT_OK
    best = _choose(ref, None)
    rows = [[str(r["trial_id"]), str(r["iteration"]), fmt((r.get("metrics") or {}).get(metric)) if metric else "-",
             "*" if r["path"] == best["path"] else "", r["path"]] for r in records]
    # a path is never cut: it is what `fetch` and `load_agent` take
    print(format_table(["TRIAL", "ITER", str(metric or "METRIC").upper(), "BEST", "CHECKPOINT"], rows, max_width=4096))
    return EXIT_OK


def cmd_fetch(args: argparse.Namespace) -> int:
    """Copy a checkpoint (the sweep's best by default) into ``-o DIR``."""
    from tuner.trainable.checkpoint import Checkpoint

    ref = locate(args.name, args.storage_path, args.database_url)
    record = _choose(ref, args.trial)
    out = Path(args.output)
    if out.exists() and any(out.iterdir()):
        raise CLIError(f"-o: {out} is not empty; give a new or empty folder", EXIT_USAGE)
    try:
        Checkpoint(record["path"]).to_directory(out)
    except (OSError, ValueError) as exc:
        raise CLIError(f"cannot fetch checkpoint {record['path']} of trial {record['trial_id']}: {first_line(exc)}",
                       EXIT_FAILED) from None
    print(f"fetched {record['path']} (trial {record['trial_id']}, iteration {record['iteration']}) into {out}")
    return EXIT_OK


def cmd_rollout(args: argparse.Namespace) -> int:
    """Run the agent of a checkpoint deterministically on fresh env seeds; mean and spread of the return."""
    if args.episodes < 1:
        raise CLIError(f"--episodes: must be an int >= 1, got {args.episodes}", EXIT_USAGE)
    ref = locate(args.name, args.storage_path, args.database_url)
    record = _choose(ref, args.trial)
    from algorithms import load_agent
    from algorithms.core.agent import play

    try:
        agent = load_agent(record["path"])
    except (OSError, ValueError) as exc:
        raise CLIError(f"cannot load the agent of checkpoint {record['path']} (trial {record['trial_id']}): "
                       f"{first_line(exc)}", EXIT_FAILED) from None
    try:
        env = agent.make_env(render_mode="rgb_array" if args.video else None)
        played = play(agent, env, args.episodes, args.seed, video_dir=args.video)
    except ValueError as exc:
        raise CLIError(first_line(exc), EXIT_FAILED) from None
    finally:
        agent.stop()
    returns = [e.episode_return for e in played]
    spread = statistics.stdev(returns) if len(returns) > 1 else 0.0
    print(f"trial {record['trial_id']}, checkpoint {record['path']} (iteration {record['iteration']})")
    print(f"{len(played)} episodes from env seed {args.seed}: return {statistics.mean(returns):.2f} +- {spread:.2f} "
          f"(min {min(returns):.2f}, max {max(returns):.2f}), length {statistics.mean(e.length for e in played):.1f}")
    if args.video:
        print(f"videos: {', '.join(str(Path(args.video) / f'episode_{i}.mp4') for i in range(len(played)))}")
    return EXIT_OK
