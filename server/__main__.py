"""``python -m autocomp.server``: the same as ``autocomp lsp``."""

import sys

from autocomp.server import main

sys.exit(main())
