"""``postflightd schema``: the JSON Schema of the metadata file."""

from __future__ import annotations

import argparse
import json
import sys

from postflightd.errors import ExitCode
from postflightd.models.metadata import json_schema


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``schema`` takes no options."""


def run(args: argparse.Namespace) -> int:
    return run_schema()


def run_schema() -> int:
    json.dump(json_schema(), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return int(ExitCode.OK)
