"""``python -m pyro_memo.cli``."""

import sys

from . import main

sys.exit(main())
