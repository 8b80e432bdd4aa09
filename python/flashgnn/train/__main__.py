import sys

from flashgnn.train.trainer import main

sys.exit(main())
