import os
import sys

# The sweep's helpers live in python/tools (also used by check_ops.py and `make ops-coverage`).
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
