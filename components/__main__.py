"""Entry point of the source-based Pulumi plugin (`pulumi package add …/components`)."""

import sys
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent

# The host runs `python components/`, which puts this folder first on sys.path, where platform.py would shadow the
# standard library's `platform` module.
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != HERE]

# The host's virtualenv has components/requirements.txt but not this package. The checkout's root holds the package's
# folders under their installed names (components, hotswap, policies), so it is the search path of the
# `gke_tpu_priority` namespace, and the plugin runs the checkout's code.
_namespace = types.ModuleType("gke_tpu_priority")
_namespace.__path__ = [str(HERE.parent)]
sys.modules.setdefault("gke_tpu_priority", _namespace)

from gke_tpu_priority.components.provider import main  # noqa: E402

main()
