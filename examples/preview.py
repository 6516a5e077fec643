"""Offline preview of the example in the current directory: `venv/bin/python ../preview.py [--config k=v ...]`.

Runs the program under Pulumi's mock runtime with this checkout's `tools.program_preview` (no Pulumi CLI, language
host or cloud account; nothing is deployed). Each example's README gives its command.
"""

import sys
from pathlib import Path

# The examples install this checkout (`-e ../..`), whose tools/ are not part of the installed package.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools.program_preview import main

sys.exit(main())
