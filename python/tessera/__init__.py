"""Tessera's PyTorch bridge: ATen ops run through Tessera's StableHLO lowerings on a PJRT device
(the XLA CPU plugin by default; `TESSERA_DEVICE` picks another).

    import torch, tessera
    tessera.ops.call("aten::add.Tensor", torch.ones(2), torch.ones(2), alpha=2)

The `tpu` torch device (tensors that stay on the device, eager modes, autograd, optimizers) is
`tessera.device`, set up on import of `tessera.torch` or `tessera.device` (it renames torch's
PrivateUse1 backend to `tpu`):

    import tessera.torch as tt
    model = MyModel().to("tpu"); y = model(torch.randn(8, 16).to("tpu")); print(tt.metrics())
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
