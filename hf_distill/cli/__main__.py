"""`python -m hf_distill.cli ...` (and `torchrun -m hf_distill.cli ...`): the `hf-distill` command."""

import sys

from .dispatch import main

if __name__ == "__main__":
    sys.exit(main())
