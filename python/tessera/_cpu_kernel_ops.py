"""Kernel ops' CPU implementation in C++ (`csrc/kernel_ops.cpp`): torch's dispatcher calls it
without Python and it runs the kernel through Tessera's runtime, so a cached call costs what
the runtime does instead of 15-21 us of Python (see the note of issue 14). Built by
`_cpp_extension`. Where it cannot be built, kernel ops run through their
Python implementation, with a warning. `TESSERA_CPU_KERNEL_OPS=python` chooses the Python one.
"""

import os
import warnings

from . import _cpp_extension, _native

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
    m = _cpp_extension.build("tessera_cpu_kernel_ops", "kernel_ops.cpp")
    m.set_call(*_native.kernel_call_address())
    return m
