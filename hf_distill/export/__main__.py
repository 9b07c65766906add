"""`python -m hf_distill.export STUDENT_DIR OUT_DIR ...`: the same as `hf-distill export`."""

import sys

from .cli import main

sys.exit(main(sys.argv[1:]))
