"""Entry point for ``python -m suite``."""

from suite.cli import main

raise SystemExit(main())
