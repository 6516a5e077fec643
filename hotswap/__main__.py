"""``python -m gke_tpu_priority.hotswap`` and the ``hotswap`` console script."""

from __future__ import annotations

import sys

from gke_tpu_priority.hotswap.cli import main as cli_main


def main() -> None:
    sys.exit(cli_main())


if __name__ == "__main__":
    main()
