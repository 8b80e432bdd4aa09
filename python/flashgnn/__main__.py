"""`python -m flashgnn` == the `flashgnn` console script."""

import sys

from flashgnn.cli import main

sys.exit(main())
