"""Faults a user meets from Python: a forked child, a broken plugin, outputs larger than
memory. Each ends in a clean tessera exception; what could crash or hang runs in its own
process, with a timeout."""

import os
import signal
import subprocess
import sys
import time

import pytest
import torch

import tessera
from tessera import _native, ops


def _wait(pid, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return status
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    pytest.fail(f"the forked child hung (killed after {timeout} s)")


def test_a_forked_child_gets_a_device_error_not_a_hang():
    x = torch.randn(4)
    torch.testing.assert_close(ops.call("abs", x), x.abs())  # the parent's first call
    pid = os.fork()
    if pid == 0:
        code = 3
        try:
            ops.call("abs", x)
            code = 1
        except tessera.DeviceError as e:
            code = 0 if "forked subprocess" in str(e) and "spawn" in str(e) else 2
        except BaseException:
            code = 4
        os._exit(code)
    status = _wait(pid)
    assert os.WIFEXITED(status), f"child died of signal {os.WTERMSIG(status)}"
    assert os.WEXITSTATUS(status) == 0, f"child check failed with code {os.WEXITSTATUS(status)}"
    torch.testing.assert_close(ops.call("abs", x), x.abs())  # the parent carries on


def _python(code, env=None, timeout=180):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", code], env=e, capture_output=True, text=True, timeout=timeout
    )


_CATCH = """
import torch, tessera
try:
    print("result", {call})
except tessera.TesseraError as e:
    print(type(e).__name__ + ":", e)
"""


def test_plugin_path_follows_the_env_var_and_names_what_is_missing(tmp_path, monkeypatch):
    path = _native.plugin_path("cpu")
    assert os.path.isfile(path), path
    monkeypatch.setenv("TESSERA_PJRT_PLUGIN_CPU", path)
    assert _native.plugin_path("cpu") == path
    missing = str(tmp_path / "missing.so")
    monkeypatch.setenv("TESSERA_PJRT_PLUGIN_CPU", missing)
    with pytest.raises(tessera.DeviceError, match="missing.so.*does not exist"):
        _native.plugin_path("cpu")
    with pytest.raises(tessera.DeviceError, match="gpu9"):
        _native.plugin_path("gpu9")
    with pytest.raises(tessera.DeviceError, match="no PJRT plugin"):
        _native.plugin_path("interp")


def test_a_truncated_plugin_is_a_device_error_not_a_sigbus(tmp_path):
    fake = tmp_path / "xla_cpu_pjrt.so"
    with open(_native.plugin_path("cpu"), "rb") as f:
        fake.write_bytes(f.read(1 << 20))
    r = _python(
        _CATCH.format(call="tessera.ops.call('abs', torch.ones(2))"),
        {"TESSERA_PJRT_PLUGIN_CPU": str(fake)},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("DeviceError:") and "truncated" in r.stdout, r.stdout


@pytest.mark.parametrize(
    "call, size",
    [
        ("tessera.ops.call('aten::randn', [100000, 100000])", "40000000000 bytes"),
        ("tessera.ops.call('add.Tensor', torch.ones(100000, 1), torch.ones(1, 100000))", "40000000000 bytes"),
        ("tessera.ops.call('mm', torch.ones(100000, 1), torch.ones(1, 100000))", "40000000000 bytes"),
        ("tessera.ops.call('aten::randperm', 2**40)", "8796093022208 bytes"),
    ],
)
def test_outputs_larger_than_memory_are_errors_not_aborts(call, size):
    r = _python(_CATCH.format(call=call))
    assert r.returncode == 0, f"{call}: exit {r.returncode}\n{r.stderr[-2000:]}"
    assert r.stdout.startswith("DeviceError:") and size in r.stdout, r.stdout
