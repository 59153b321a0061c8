import os

# Before numpy and onnxruntime load (engram/supervisor.py sets the same for its children):
# one BLAS thread per process, the thread pools size the concurrency.
for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import sys  # noqa: E402

from server.main import main  # noqa: E402

# Guarded: with ENGRAM_API_PROCESSES > 1 the children are spawned and import this module again.
if __name__ == "__main__":
    # Exit explicitly: the Temporal SDK's runtime can abort during interpreter teardown.
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
