import sys

from nhfast.cli import main

sys.exit(main())
