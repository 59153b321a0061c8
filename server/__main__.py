import os
import sys

from server.main import main

# Exit explicitly: the Temporal SDK's runtime can abort during interpreter teardown.
code = main()
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
