"""Kernel ops' CPU implementation in C++ (`csrc/kernel_ops.cpp`): torch's dispatcher calls it
without Python and it runs the kernel through Tessera's runtime, so a cached call costs what
the runtime does instead of 15-21 us of Python (see the note of issue 14). Built once per torch
version and source with `torch.utils.cpp_extension` (g++ and ninja) into Tessera's cache
(`$TESSERA_CACHE_DIR/torch_extensions`). Where it cannot be built, kernel ops run through their
Python implementation, with a warning. `TESSERA_CPU_KERNEL_OPS=python` chooses the Python one.
"""

import os
import pathlib
import warnings

import torch

from . import _native

_state = {}


def module():
    """The built extension (its `register_cpu`), or None where kernel ops run through Python."""
    if "module" not in _state:
        _state["module"] = None
        if os.environ.get("TESSERA_CPU_KERNEL_OPS", "native") == "python":
            return None
        try:
            _state["module"] = _build()
        except Exception as e:  # a missing compiler or ninja, a torch without headers
            warnings.warn(f"tessera: kernel ops run through Python; their C++ CPU implementation "
                          f"did not build: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
    return _state["module"]


def _build():
    from torch.utils import cpp_extension

    try:  # ninja from PyPI: its binary is not on PATH outside an activated venv
        import ninja

        if ninja.BIN_DIR not in os.environ.get("PATH", "").split(os.pathsep):
            os.environ["PATH"] = ninja.BIN_DIR + os.pathsep + os.environ.get("PATH", "")
    except ImportError:
        pass

    cache = os.environ.get("TESSERA_CACHE_DIR") or os.path.expanduser("~/.cache/tessera")
    build = pathlib.Path(cache) / "torch_extensions" / f"torch-{torch.__version__}"
    build.mkdir(parents=True, exist_ok=True)
    source = pathlib.Path(__file__).parent / "csrc" / "kernel_ops.cpp"
    m = cpp_extension.load("tessera_cpu_kernel_ops", [str(source)], build_directory=str(build),
                           extra_cflags=["-O2"], verbose=False)
    m.set_call(*_native.kernel_call_address())
    return m
