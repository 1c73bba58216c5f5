"""``python -m dpnewton``: the ``dpnewton`` command (:func:`dpnewton.cli.main`)."""

import sys

from .cli import main

sys.exit(main())
