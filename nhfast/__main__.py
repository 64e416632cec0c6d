"""``python -m nhfast``: the ``nhfast`` command."""

import sys

from nhfast.cli import main

sys.exit(main())
