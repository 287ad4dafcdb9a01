"""The ``tuner`` command line."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence


def build_parser() -> argparse.ArgumentParser:
    from tuner import __version__

    parser = argparse.ArgumentParser(prog="tuner", description="Hyperparameter sweeps of RL trainers on Ray.")
    parser.add_argument("--version", action="version", version=f"tuner {__version__}")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tuner`` console script; returns the exit code."""
    parser = build_parser()
    parser.parse_args(argv)
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
