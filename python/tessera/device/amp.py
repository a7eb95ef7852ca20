"""torch.amp.GradScaler's two device ops, which torch has kernels for on CPU and CUDA only:
written as ops on device tensors (comparisons, `where`, in-place multiplies), so a float16
training step with a scaler stays on the device instead of copying every gradient to the
host and back. The same functions serve both dispatches: the Python one calls them from
`__torch_dispatch__` (dispatch._SPECIAL), the C++ one has them registered as PrivateUse1
kernels (`register`)."""

import torch


def non_finite_check_and_unscale_(grads, found_inf, inv_scale):
    """`_amp_foreach_non_finite_check_and_unscale_`: `found_inf` (float, [1]) becomes 1 if a
    gradient holds an inf or a NaN (else it keeps its value); every gradient is multiplied by
    `inv_scale` ([1]), as torch's CUDA kernel does."""
    if not grads:
        return
    finite = torch.stack([torch.isfinite(g).all() for g in grads]).all()
    found_inf.copy_(torch.where(finite, found_inf, torch.ones_like(found_inf)))
    scale = inv_scale.reshape(())  # a 0-d gradient keeps its shape
    for g in grads:
        g.mul_(scale)


def update_scale_(scale, growth_tracker, found_inf, growth_factor, backoff_factor, interval):
    """`_amp_update_scale_`: after a step with an inf or a NaN the scale backs off and the
    count of good steps restarts; after `interval` good steps in a row the scale grows (if
    the grown scale is finite) and the count restarts; otherwise the count goes up."""
    inf = found_inf > 0
    good = growth_tracker + 1
    grow = good == interval  # as torch's kernels: a count already past it never grows
    grown = scale * growth_factor
    kept = torch.where(torch.logical_and(grow, torch.isfinite(grown)), grown, scale)
    scale.copy_(torch.where(inf, scale * backoff_factor, kept))
    growth_tracker.copy_(torch.where(torch.logical_or(inf, grow), torch.zeros_like(good), good))
    return scale


# ATen overload -> implementation, for both dispatches.
OPS = {
    "_amp_foreach_non_finite_check_and_unscale_": non_finite_check_and_unscale_,
    "_amp_update_scale_": update_scale_,
}


def handler(fn):
    """The Python dispatch's handler (func, args, kwargs) for op implementation `fn`."""
    return lambda func, args, kwargs: fn(*args, **kwargs)


def register():
    """The C++ dispatch: registers the functions above as the PrivateUse1 kernels of their ops;
    returns the Library that owns the registrations."""
    lib = torch.library.Library("aten", "IMPL")
    for name, fn in OPS.items():
        lib.impl(name, fn, "PrivateUse1")
    return lib
