"""Tessera's PyTorch bridge: ATen ops run through Tessera's StableHLO lowerings on a PJRT device
(the XLA CPU plugin by default; `TESSERA_DEVICE` picks another).

    import torch, tessera
    tessera.ops.call("aten::add.Tensor", torch.ones(2), torch.ones(2), alpha=2)
"""

from . import ops
from ._native import (
    ArgumentError,
    DeviceError,
    TesseraError,
    UnknownOpError,
    UnsupportedError,
)

__all__ = [
    "ops",
    "TesseraError",
    "UnknownOpError",
    "ArgumentError",
    "UnsupportedError",
    "DeviceError",
]
