"""`python -m flashgnn.cli` == the `flashgnn` console script."""

import sys

from flashgnn.cli import main

sys.exit(main())
