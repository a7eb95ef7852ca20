"""Tessera's C++ parts for torch (`csrc/`), built once per torch version and source with
`torch.utils.cpp_extension` (g++ and ninja) into Tessera's cache
(`$TESSERA_CACHE_DIR/torch_extensions`)."""

import os
import pathlib


def build(name, source):
    """The extension module `name` built from `csrc/<source>` (raises where it cannot be built:
    no compiler or ninja, a torch without headers)."""
    import torch
    from torch.utils import cpp_extension

    try:  # ninja from PyPI: its binary is not on PATH outside an activated venv
        import ninja

        if ninja.BIN_DIR not in os.environ.get("PATH", "").split(os.pathsep):
            os.environ["PATH"] = ninja.BIN_DIR + os.pathsep + os.environ.get("PATH", "")
    except ImportError:
        pass

    cache = os.environ.get("TESSERA_CACHE_DIR") or os.path.expanduser("~/.cache/tessera")
    out = pathlib.Path(cache) / "torch_extensions" / f"torch-{torch.__version__}"
    out.mkdir(parents=True, exist_ok=True)
    path = pathlib.Path(__file__).parent / "csrc" / source
    return cpp_extension.load(name, [str(path)], build_directory=str(out),
                              extra_cflags=["-O2"], verbose=False)
