"""The ``tuner`` command line: run sweeps from YAML specs and query them.

    tuner sweep SPEC.yaml [--name N] [--address RAY] [--database-url URL] [--set key=value ...]
    tuner submit SPEC.yaml --address http://HEAD:8265 [--database-url URL] [--wait]
    tuner resume NAME [--submit --address http://HEAD:8265]
    tuner logs NAME [-f]
    tuner stop NAME
    tuner ls
    tuner show NAME [--profile]
    tuner best NAME [--json]
    tuner export NAME --format csv|json
    tuner tensorboard NAME

Exit codes (every error is one line on stderr, ``tuner: error: ...``, never a traceback):

    0    success
    1    trials failed, or a runtime error: Ray cannot be reached at --address (checked before
         anything is written, in seconds), a database that cannot be used, ...
    2    a bad spec, flag or name (nothing run or written); ``tuner`` without a verb; the port of
         ``tuner tensorboard`` is in use
    3    another driver is running this sweep (nothing run or written): wait for it, or stop it
    130  interrupted by Ctrl-C (SIGINT): the sweep is left resumable (``tuner resume NAME``)
    143  terminated by SIGTERM (kill, docker stop, Slurm preemption): the sweep is left resumable
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Callable, Sequence

from tuner.cli.errors import EXIT_INTERRUPTED, EXIT_USAGE, CLIError

EPILOG = ("exit codes: 0 success, 1 trials failed or a runtime error (e.g. Ray unreachable at --address), "
          "2 bad spec, flag or name (nothing written), 3 another driver is running this sweep, "
          "130 interrupted by SIGINT (resumable), 143 terminated by SIGTERM (resumable). "
          "Sweeps live in --storage-path (default $TUNER_STORAGE_PATH or ~/tuner_results).")


def _database_url_default() -> str | None:
    return os.environ.get("TUNER_DATABASE_URL") or None


def _sweep_location(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--storage-path", metavar="DIR",
                        help="where sweeps are stored (default: $TUNER_STORAGE_PATH or ~/tuner_results)")
    parser.add_argument("--database-url", metavar="URL", default=_database_url_default(),
                        help="the sweep's database, when it is not the SQLite file in its run directory "
                             "(default: $TUNER_DATABASE_URL)")


def _run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--address", metavar="RAY_ADDRESS",
                        help="join this Ray cluster (default: $RAY_ADDRESS, else start a local Ray)")
    parser.add_argument("--progress", choices=("auto", "live", "plain", "none"), default="auto",
                        help="live table on a terminal, plain lines otherwise (default: auto)")


def _add_run_verbs(verbs: Any) -> None:
    sweep = verbs.add_parser("sweep", help="run a sweep from a YAML spec", epilog=EPILOG)
    sweep.add_argument("spec", metavar="SPEC.yaml", help="the sweep spec (see examples/*.yaml)")
    sweep.add_argument("--name", help="the sweep's name (default: the spec's name, else the file's name and the time)")
    sweep.add_argument("--database-url", metavar="URL", default=_database_url_default(),
                       help="store the sweep in this database (SQLAlchemy URL; default: $TUNER_DATABASE_URL)")
    sweep.add_argument("--storage-path", metavar="DIR",
                       help="store the sweep's run directory under DIR (default: the spec's storage_path, "
                            "else $TUNER_STORAGE_PATH or ~/tuner_results)")
    sweep.add_argument("--set", action="append", metavar="KEY=VALUE", default=[],
                       help="override a spec key (dotted path, YAML value), e.g. --set num_samples=2 "
                            "--set scheduler.max_t=10; repeatable")
    _run_options(sweep)
    sweep.set_defaults(handler="tuner.cli.sweep_cmd:cmd_sweep")

    resume = verbs.add_parser("resume", help="continue an interrupted sweep", epilog=EPILOG)
    resume.add_argument("name", metavar="NAME", help="sweep name, or its run directory")
    _sweep_location(resume)
    resume.add_argument("--errored-only", action="store_true", help="also retry the trials that failed")
    resume.add_argument("--submit", action="store_true",
                        help="run the resumed driver on the cluster as a Ray Job (--address: its Jobs API)")
    resume.add_argument("--wait", action="store_true", help="with --submit: follow the sweep until it ends")
    _run_options(resume)
    resume.set_defaults(handler="tuner.cli.sweep_cmd:cmd_resume")

    submit = verbs.add_parser("submit", help="run a sweep's driver on a Ray cluster as a Ray Job", epilog=EPILOG)
    submit.add_argument("spec", metavar="SPEC.yaml", help="the sweep spec; the local modules it names are shipped")
    submit.add_argument("--address", metavar="URL",
                        help="the cluster's Jobs API, e.g. http://HEAD:8265 (default: $RAY_API_SERVER_ADDRESS, "
                             "or an http $RAY_ADDRESS)")
    submit.add_argument("--name", help="the sweep's name (default: the spec's name, else the file's name and the time)")
    submit.add_argument("--database-url", metavar="URL", default=_database_url_default(),
                        help="the shared store (default: $TUNER_DATABASE_URL; SQLite only when the head is this "
                             "machine)")
    submit.add_argument("--storage-path", metavar="DIR", help="the run directory's parent on the cluster")
    submit.add_argument("--set", action="append", metavar="KEY=VALUE", default=[],
                        help="override a spec key (dotted path, YAML value); repeatable")
    submit.add_argument("--wait", action="store_true",
                        help="follow the sweep until it ends (Ctrl-C detaches; the sweep goes on)")
    submit.set_defaults(handler="tuner.cli.submit_cmd:cmd_submit")

    validate = verbs.add_parser("validate", help="retrain a sweep's best configs on held-out seeds and rank them again",
                                epilog=EPILOG)
    validate.add_argument("name", metavar="NAME", help="sweep name, or its run directory")
    validate.add_argument("--top-k", type=int, default=3, metavar="K", help="the sweep's K best configs (default: 3)")
    validate.add_argument("--seeds", type=int, default=10, metavar="N",
                          help="held-out seeds per config, none of them used by the sweep (default: 10)")
    validate.add_argument("--name", dest="as_name", metavar="VNAME",
                          help="the validation sweep's name (default: NAME-validation)")
    validate.add_argument("--metric", help="rank by this metric (default: the sweep's)")
    validate.add_argument("--json", action="store_true", help="print the report as JSON")
    validate.add_argument("--submit", action="store_true",
                          help="run the validation's driver on the cluster as a Ray Job (--address: its Jobs API)")
    _sweep_location(validate)
    _run_options(validate)
    validate.set_defaults(handler="tuner.cli.validate_cmd:cmd_validate")


def _add_query_verbs(verbs: Any) -> None:
    ls = verbs.add_parser("ls", help="list sweeps with their trial counts")
    _sweep_location(ls)
    ls.set_defaults(handler="tuner.cli.query_cmd:cmd_ls")

    show = verbs.add_parser("show", help="a sweep's trials, status and best trial")
    show.add_argument("name", metavar="NAME", help="sweep name, or its run directory")
    show.add_argument("--profile", action="store_true",
                      help="where the sweep's wall time went, summed over trials, then each trial's split")
    _sweep_location(show)
    show.set_defaults(handler="tuner.cli.query_cmd:cmd_show")

    best = verbs.add_parser("best", help="the best trial's config and result")
    best.add_argument("name", metavar="NAME", help="sweep name, or its run directory")
    best.add_argument("--json", action="store_true", help="print JSON")
    best.add_argument("--metric", help="rank by this metric (default: the sweep's)")
    best.add_argument("--mode", choices=("min", "max"), help="default: the sweep's")
    best.add_argument("--scope", choices=("last", "all", "avg", "last-5-avg", "last-10-avg"), default="last",
                      help="which results of a trial count (default: its last)")
    best.add_argument("--validated", action="store_true",
                      help="the config ranked first on held-out seeds by the sweep's validation (tuner validate)")
    _sweep_location(best)
    best.set_defaults(handler="tuner.cli.query_cmd:cmd_best")

    export = verbs.add_parser("export", help="every result (or trial) as CSV or JSON")
    export.add_argument("name", metavar="NAME", help="sweep name, or its run directory")
    export.add_argument("--format", choices=("csv", "json"), required=True)
    export.add_argument("--what", choices=("results", "trials"), default="results",
                        help="one row per result (default) or per trial")
    export.add_argument("--output", "-o", metavar="FILE", help="write here instead of stdout")
    _sweep_location(export)
    export.set_defaults(handler="tuner.cli.query_cmd:cmd_export")

    logs = verbs.add_parser("logs", help="the output of a submitted sweep's driver (its Ray Job)")
    logs.add_argument("name", metavar="NAME", help="sweep name, or its run directory")
    logs.add_argument("-f", "--follow", action="store_true", help="follow the output until the job ends")
    logs.add_argument("--address", metavar="URL", help="the Jobs API (default: the one it was submitted to)")
    _sweep_location(logs)
    logs.set_defaults(handler="tuner.cli.submit_cmd:cmd_logs")

    stop = verbs.add_parser("stop", help="stop a submitted sweep, leaving it resumable")
    stop.add_argument("name", metavar="NAME", help="sweep name, or its run directory")
    stop.add_argument("--address", metavar="URL", help="the Jobs API (default: the one it was submitted to)")
    _sweep_location(stop)
    stop.set_defaults(handler="tuner.cli.submit_cmd:cmd_stop")

    _add_agent_verbs(verbs)

    tensorboard = verbs.add_parser("tensorboard", help="start TensorBoard on a sweep's logdir")
    tensorboard.add_argument("name", metavar="NAME", help="sweep name, or its run directory")
    tensorboard.add_argument("--host", default="127.0.0.1", help="bind address (default: 127.0.0.1)")
    tensorboard.add_argument("--port", type=int, default=6006, help="default: 6006")
    tensorboard.add_argument("--rebuild", action="store_true", help="rebuild the logdir from the store first")
    _sweep_location(tensorboard)
    tensorboard.set_defaults(handler="tuner.cli.tensorboard_cmd:cmd_tensorboard")


def _add_agent_verbs(verbs: Any) -> None:
    checkpoints = verbs.add_parser("checkpoints", help="each trial's kept checkpoints with their metric")
    checkpoints.add_argument("name", metavar="NAME", help="sweep name, or its run directory")
    _sweep_location(checkpoints)
    checkpoints.set_defaults(handler="tuner.cli.agent_cmd:cmd_checkpoints")

    fetch = verbs.add_parser("fetch", help="copy a trained agent's checkpoint (the best by default) to a folder")
    fetch.add_argument("name", metavar="NAME", help="sweep name, or its run directory")
    fetch.add_argument("--trial", metavar="TRIAL", help="this trial's best checkpoint (default: the best trial's)")
    fetch.add_argument("-o", "--output", metavar="DIR", required=True, help="a new or empty folder")
    _sweep_location(fetch)
    fetch.set_defaults(handler="tuner.cli.agent_cmd:cmd_fetch")

    rollout = verbs.add_parser("rollout", help="run a trained agent on fresh env seeds (and record videos)")
    rollout.add_argument("name", metavar="NAME", help="sweep name, or its run directory")
    rollout.add_argument("--trial", metavar="TRIAL", help="this trial's best checkpoint (default: the best trial's)")
    rollout.add_argument("--episodes", type=int, default=10, help="episodes to play (default: 10)")
    rollout.add_argument("--seed", type=int, default=10_000, help="the first episode's env seed (default: 10000)")
    rollout.add_argument("--video", metavar="DIR", help="write each episode as an mp4 into DIR")
    _sweep_location(rollout)
    rollout.set_defaults(handler="tuner.cli.agent_cmd:cmd_rollout")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every verb."""
    from tuner import __version__

    parser = argparse.ArgumentParser(prog="tuner", description="Hyperparameter sweeps of RL trainers on Ray.",
                                     epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"tuner {__version__}")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB")
    _add_run_verbs(verbs)
    _add_query_verbs(verbs)
    return parser


def _handler(path: str) -> Callable[[argparse.Namespace], int]:
    import importlib

    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def _verbs(parser: argparse.ArgumentParser) -> list[str]:
    """The verbs' names, in the order --help lists them."""
    return [name for action in parser._actions if isinstance(action, argparse._SubParsersAction)
            for name in action.choices]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tuner`` console script; returns the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)  # a bad flag: argparse prints usage and one line
    except SystemExit as exc:  # --help, --version (0) or a bad flag (2)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    if args.verb is None:  # usage, as for any other missing argument
        parser.print_usage(sys.stderr)
        print(f"tuner: error: a verb is required, one of: {', '.join(_verbs(parser))} "
              f"(`tuner --help` describes them)", file=sys.stderr)
        return EXIT_USAGE
    from tuner.cluster.auth import use_cluster_token

    use_cluster_token()  # a cluster with token authentication gets this machine's token
    try:
        return _handler(args.handler)(args)
    except CLIError as exc:
        print(f"tuner: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("tuner: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `tuner export ... | head`: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


__all__ = ["EXIT_USAGE", "build_parser", "main"]
