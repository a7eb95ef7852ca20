"""`tpu` as torch's PrivateUse1 backend: the rename and the backend module torch asks for
(device count, RNG state, synchronize)."""

import contextlib

import torch

NAME = "tpu"
_autocast = None  # the extension module of csrc/autocast.cpp, once loaded


class _BackendModule:
    """`torch.tpu`: what torch asks a backend module (device count, RNG state, synchronize).
    Random ops on device tensors draw from torch's CPU generator (see the fallbacks); inside
    compiled graphs from the eager runtime's generator, which `manual_seed` seeds too. The
    RNG state is empty."""

    def is_available(self):
        return True

    def is_initialized(self):
        return True

    def device_count(self):
        return 1

    def current_device(self):
        return 0

    def _is_in_bad_fork(self):
        return False

    def device(self, device=None):
        """The context torch enters to select a device (moving a storage there, as
        `torch.load` does): there is one, so nothing to switch."""
        return contextlib.nullcontext()

    # `torch.manual_seed` seeds the CPU generator and then calls these: the eager runtime's
    # generator (random ops inside compiled graphs) restarts from the same seed.
    def manual_seed(self, seed):
        from .. import _native

        _native.eager_manual_seed(seed % 2**64)

    def manual_seed_all(self, seed):
        self.manual_seed(seed)

    def get_rng_state(self, device=None):
        return torch.empty(0, dtype=torch.uint8)

    def set_rng_state(self, state, device=None):
        pass

    def get_amp_supported_dtype(self):
        """What `torch.autocast("tpu", dtype=...)` asks first: the autocast kernels of the
        device (csrc/autocast.cpp, built once) are registered then."""
        global _autocast
        if _autocast is None:
            from .. import _cpp_extension

            _autocast = _cpp_extension.build("tessera_autocast", "autocast.cpp")
        return [torch.bfloat16, torch.float16]

    def synchronize(self, device=None):
        from .tensor import sync_for_thread

        sync_for_thread()


def _rename():
    """Renames PrivateUse1 to `tpu` (once per process)."""
    if torch._C._get_privateuse1_backend_name() == "privateuseone":
        from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

        _setup_privateuseone_for_python_backend(rename=NAME, backend_module=_BackendModule())
    elif torch._C._get_privateuse1_backend_name() != NAME:
        raise RuntimeError(
            f"PrivateUse1 is already the `{torch._C._get_privateuse1_backend_name()}` backend"
        )


def _fake_tensors_never_materialize_on_the_device():
    """Under fake tensor tracing (torch.compile), treat `tpu` as torch treats a device it cannot
    initialize: `torch.tensor(data, device="tpu")` is made on the CPU and moved by a traced
    copy, and constants are not propagated onto the device. Else torch makes a real device
    tensor there and wants it as a fake constant, which a Python subclass cannot be ("Please
    convert all Tensors to FakeTensors", "fake_tensor must be a FakeTensor with a constant":
    14 zoo models failed so, from transformers' cache and MoE code). Torch's CPU-only builds
    trace CUDA code the same way."""
    from torch._subclasses import fake_tensor

    fake_tensor.FakeTensorMode.avoid_device_init = property(lambda self: True)


_rename()
_fake_tensors_never_materialize_on_the_device()
device = torch.device(NAME, 0)
