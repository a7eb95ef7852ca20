"""The `tpu` device dispatched in C++ (`TESSERA_TORCH_DISPATCH=cpp`, csrc/device.cpp): the
checks of cpp_dispatch/checks.py, in a process of their own per eager mode (the dispatch is
chosen at import; a crash there would take the test runner down)."""

import os
import pathlib
import subprocess
import sys

import pytest

CHECKS = pathlib.Path(__file__).parent / "cpp_dispatch" / "checks.py"
EXPECTED = ["ops", "views", "in-place through views", "copies", "lazy views", "print", "numbers",
            "unboxed kernels", "in-place views", "grad scaler", "autocast", "storages",
            "autograd and AdamW", "parameters moved in place", "compiled", "fallback", "errors"]


@pytest.mark.parametrize("mode", ["strict", "defer"])
def test_cpp_dispatch_matches_torch_cpu(mode):
    env = {**os.environ, "TESSERA_TORCH_DISPATCH": "cpp",
           "TESSERA_DEFER_AND_FUSE": "1" if mode == "defer" else "0"}
    out = subprocess.run([sys.executable, str(CHECKS)], capture_output=True, text=True,
                         timeout=900, env=env)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-6000:]
    done = [l[3:] for l in out.stdout.splitlines() if l.startswith("ok ")]
    assert done == EXPECTED, out.stdout
    assert f"mode {mode}" in out.stderr


def test_an_unknown_dispatch_choice_is_refused():
    env = {**os.environ, "TESSERA_TORCH_DISPATCH": "fortran"}
    out = subprocess.run([sys.executable, "-c", "import tessera.torch"], capture_output=True,
                         text=True, timeout=600, env=env)
    assert out.returncode != 0 and "TESSERA_TORCH_DISPATCH='fortran'" in out.stderr, out.stderr[-2000:]
