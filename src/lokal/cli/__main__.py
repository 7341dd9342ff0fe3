"""``python -m lokal.cli ...``: the ``lokal`` command (what the console script runs)."""

import sys

from lokal.cli import main

sys.exit(main())
