"""torch.amp.GradScaler on the device under either dispatch (test_device.py for the Python one,
checks.py for the C++ one): its two ops (tessera/device/amp.py) against torch CPU's kernels,
exactly (an unscale is one multiply by a power of two; the scale update is exact arithmetic),
on gradients with and without an inf or a NaN and over a run of good and bad steps; then
three SGD steps with a scaler (one of them skipped for an overflow) following the same steps
on the CPU (rtol/atol 1e-5). Nothing may fall back to the CPU."""

import torch


def _same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape, (got, want)
    assert torch.equal(got.cpu().isnan(), want.isnan()), (got, want)
    assert torch.equal(got.cpu().nan_to_num(), want.nan_to_num()), (got, want)


def check_grad_scaler(device):
    """Raises on the first difference from torch CPU; returns how many checks were made."""
    g = torch.Generator().manual_seed(11)
    checks = 0
    for poison in (None, float("inf"), float("nan")):
        for start in (0.0, 1.0):
            grads = [torch.randn(3, 4, generator=g), torch.randn(5, generator=g),
                     torch.randn((), generator=g)]
            if poison is not None:
                grads[1][2] = poison
            found, inv = torch.full((1,), start), torch.full((1,), 0.25)
            dev = [t.to(device) for t in grads]
            dfound = found.to(device)
            torch._amp_foreach_non_finite_check_and_unscale_(grads, found, inv)
            torch._amp_foreach_non_finite_check_and_unscale_(dev, dfound, inv.to(device))
            _same(dfound, found)
            for d, c in zip(dev, grads):
                _same(d, c)
            checks += 1
    for growth_at in (2, 3):
        scale, tracker = torch.full((1,), 1024.0), torch.zeros(1, dtype=torch.int32)
        dscale, dtracker = scale.to(device), tracker.to(device)
        for bad in (0, 0, 1, 0, 0, 0, 1, 1, 0, 0):
            found = torch.full((1,), float(bad))
            torch._amp_update_scale_(scale, tracker, found, 2.0, 0.5, growth_at)
            out = torch._amp_update_scale_(dscale, dtracker, found.to(device), 2.0, 0.5,
                                           growth_at)
            assert out is dscale
            _same(dscale, scale)
            _same(dtracker, tracker)
            checks += 1
    # A grown scale that is not finite is not taken (the count still restarts); a count that
    # is already past the interval only goes up, as in torch's kernels.
    for start_scale, start_count in ((3e38, 1), (8.0, 5)):
        scale = torch.full((1,), start_scale)
        tracker = torch.full((1,), start_count, dtype=torch.int32)
        dscale, dtracker = scale.to(device), tracker.to(device)
        torch._amp_update_scale_(scale, tracker, torch.zeros(1), 2.0, 0.5, 2)
        torch._amp_update_scale_(dscale, dtracker, torch.zeros(1, device=device), 2.0, 0.5, 2)
        _same(dscale, scale)
        _same(dtracker, tracker)
        checks += 1
    return checks + _scaled_training(device)


def _scaled_training(device):
    torch.manual_seed(3)
    cpu = torch.nn.Linear(6, 2)
    dev = torch.nn.Linear(6, 2)
    dev.load_state_dict(cpu.state_dict())
    dev.to(device)
    x, y = torch.randn(8, 6), torch.randn(8, 2) * 10
    runs = []
    for model, where in ((cpu, "cpu"), (dev, device)):
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        # 2**127 overflows the first scaled loss (~100) in float32: that step is skipped, the scale
        # backs off, the next steps run.
        scaler = torch.amp.GradScaler(where, init_scale=2.0 ** 127, growth_interval=1)
        scales = []
        for _ in range(3):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x.to(where)), y.to(where))
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            scales.append(scaler.get_scale())
        runs.append((scales, [p.detach().cpu() for p in model.parameters()]))
    (cpu_scales, cpu_params), (dev_scales, dev_params) = runs
    assert cpu_scales == dev_scales, (cpu_scales, dev_scales)
    assert cpu_scales[0] < 2.0 ** 127  # the overflow was seen
    for a, b in zip(dev_params, cpu_params):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    return 1
