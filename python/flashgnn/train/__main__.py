"""``python -m flashgnn.train DATASET ...``: ``flashgnn train`` for launchers that run a module
(``torchrun --nproc-per-node 2 -m flashgnn.train ...``). The same options; an error prints one line
``flashgnn train: error: ...`` and exits 2 (an I/O error: ``flashgnn train: I/O error: ...``, exit 1), as
the ``flashgnn`` command does."""

import sys

import flashgnn
from flashgnn.train.config import TrainConfig, parser
from flashgnn.train.trainer import Trainer


def main(argv: list[str] | None = None) -> int:
    args = parser("python -m flashgnn.train").parse_args(argv)
    try:
        Trainer(TrainConfig.from_namespace(args)).fit()
    except (ValueError, flashgnn.FlashgnnError) as e:  # TrainError, the store's input/corruption errors: as the CLI
        print(f"flashgnn train: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # ENOSPC or EIO writing a checkpoint, as the CLI: one line, exit 1
        print(f"flashgnn train: I/O error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
