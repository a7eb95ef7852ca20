"""A kernel crate of the user's own (examples/kernel-crate, outside the workspace) builds with
cargo, loads into Python (tessera.torch.load_library) and its kernels run as torch ops:
opcheck, results against torch's own math, torch.compile without graph breaks, bad inputs."""

import os
import subprocess

import pytest
import torch

import tessera
import tessera.torch as tt

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
CRATE = os.path.join(ROOT, "examples", "kernel-crate")
# The repository's target folder: the crate's dependencies are this workspace's crates,
# already built by `make test`.
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
LIBRARY = os.path.join(TARGET, "debug", "libmy_kernels.so")


@pytest.fixture(scope="module")
def ops():
    subprocess.run(
        ["cargo", "build", "-q", "--manifest-path", os.path.join(CRATE, "Cargo.toml")],
        check=True, env={**os.environ, "CARGO_TARGET_DIR": TARGET},
    )
    return tt.load_library(LIBRARY, namespace="my_kernels")


def rms_norm(x):
    v = x.float()
    return (v * torch.rsqrt((v * v).mean(-1, keepdim=True) + 1e-6)).to(x.dtype)


def test_the_crates_kernels_are_registered(ops):
    assert set(ops) == {"my_kernels::axpy", "my_kernels::rms_norm"}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_results_match_torch(ops, dtype):
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(24, 256, generator=g).to(dtype), torch.randn(24, 256, generator=g).to(dtype)
    tol = {torch.float32: dict(atol=1e-5, rtol=1.3e-6), torch.bfloat16: dict(atol=1e-2, rtol=1.6e-2)}[dtype]
    torch.testing.assert_close(torch.ops.my_kernels.axpy(x, y), x * 2 + y, **tol)
    torch.testing.assert_close(torch.ops.my_kernels.rms_norm(x), rms_norm(x), **tol)


def test_opcheck(ops):
    x = torch.randn(16, 128)
    torch.library.opcheck(ops["my_kernels::axpy"], (x, x + 1))
    torch.library.opcheck(ops["my_kernels::rms_norm"], (x,))


def test_compile_fullgraph(ops):
    f = lambda x, y: torch.ops.my_kernels.rms_norm(torch.ops.my_kernels.axpy(x, y).relu())
    x, y = torch.randn(16, 128), torch.randn(16, 128)
    torch.testing.assert_close(torch.compile(f, fullgraph=True, backend="aot_eager")(x, y), f(x, y))


def test_bad_inputs_name_the_kernel(ops):
    with pytest.raises(tessera.ArgumentError, match="kernel `axpy` takes 2 input"):
        torch.ops.my_kernels.axpy(torch.randn(16, 128), torch.randn(8, 128))
    with pytest.raises(tessera.ArgumentError, match="kernel `rms_norm`"):
        torch.ops.my_kernels.rms_norm(torch.randn(16))
    with pytest.raises(tessera.ArgumentError, match="no kernel `nope`"):
        tt.register("nope", library=LIBRARY)


def test_a_missing_library_is_an_error():
    with pytest.raises(tessera.ArgumentError, match="kernel library"):
        tt.load_library("/nonexistent/libnothing.so")


def test_the_crates_kernels_run_on_tpu_tensors(ops):
    # A library kernel on device tensors runs on their buffers: no value goes to the host.
    g = torch.Generator().manual_seed(2)
    x, y = torch.randn(24, 256, generator=g), torch.randn(24, 256, generator=g)
    xd, yd = tt.to_device(x), tt.to_device(y)
    tt.reset_metrics()
    z = torch.ops.my_kernels.rms_norm(torch.ops.my_kernels.axpy(xd, yd))
    assert z.device.type == "tpu" and tt.metrics()["transfers"]["to_host"] == 0
    torch.testing.assert_close(z.cpu(), rms_norm(x * 2 + y), atol=1e-5, rtol=1.3e-6)
