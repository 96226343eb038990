"""``python -m ecqg.report``: a profile's results page and the README's claims table (see :mod:`ecqg.report`)."""

import sys

from ecqg.report import main

sys.exit(main())
