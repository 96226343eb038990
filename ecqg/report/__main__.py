"""``python -m ecqg.report``: the README's results section of a profile (see :mod:`ecqg.report`)."""

import sys

from ecqg.report import main

sys.exit(main())
