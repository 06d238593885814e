"""`python -m precis.cli`."""

import sys

from precis.cli.app import main

sys.exit(main())
