"""Entry point of the source-based Pulumi plugin (`pulumi package add …/components`)."""

import sys
from pathlib import Path

# The host runs `python components/`, which puts this folder, not the repository root, on sys.path.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from components.provider import main

main()
