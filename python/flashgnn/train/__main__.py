"""``python -m flashgnn.train DATASET ...``: ``flashgnn train`` for launchers that run a module
(``torchrun --nproc-per-node 2 -m flashgnn.train ...``). The same options; an error prints one line
``flashgnn train: error: ...`` and exits 2 (an I/O error: ``flashgnn train: I/O error: ...``, exit 1), as
the ``flashgnn`` command does."""

import os
import sys

import flashgnn
from flashgnn.train.config import TrainConfig, parser
from flashgnn.train.trainer import Trainer


def _under_torchrun() -> bool:
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def main(argv: list[str] | None = None) -> int:
    import faulthandler

    if _under_torchrun():
        # Under torchrun: a rank that aborts (SIGABRT from a C++ std::terminate) prints every thread's Python
        # stack to stderr, which torchrun's failure report carries. A two-process run was seen to abort this
        # way under a loaded full test run, with nothing else to go on.
        faulthandler.enable(all_threads=True)
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


def _exit_rank(code: int) -> None:
    """Leave a torchrun rank without the interpreter's finalization. After a complete run (every
    checkpoint fsynced, the summary printed, the process group left) a rank still aborted now and then in
    loaded full test runs: "terminate called without an active exception" with no Python frame on any
    thread, i.e. a C++ destructor at exit found a thread still joinable (the faulthandler dump above). What
    is left at that point is torch's and gloo's static teardown; ``os._exit`` skips it, after the streams
    are flushed."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    rc = main()
    if _under_torchrun():
        _exit_rank(rc)
    sys.exit(rc)
