import sys

from autocomp.cli.main import main

sys.exit(main())
