"""Generated samples for table ops that no OpInfo sample reaches. Each family keeps its own
file `samples_<family>.py` with a dict `GENERATED`: op name -> a function returning
[(args, kwargs), ...]; this module merges them. In-place and `.out` overloads need none: the
sweep derives their samples from the functional op's (see sweep.sweep_variants)."""

import glob
import importlib
import os

GENERATED = {}
for _path in sorted(glob.glob(os.path.join(os.path.dirname(__file__), "samples_*.py"))):
    _mod = importlib.import_module(os.path.basename(_path)[:-3])
    GENERATED.update(_mod.GENERATED)
