"""Generated samples: nn ops (composites and backward ops no OpInfo sample reaches, and
overloads OpInfo only reaches through other overloads)."""

import torch

A = torch.ops.aten
FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]


def _r(*shape, dtype=torch.float32, lo=-3.0, hi=3.0):
    return (torch.rand(*shape, dtype=torch.float64) * (hi - lo) + lo).to(dtype)


def _convolution():
    out = []
    for dt in FLOATS:
        x = _r(2, 4, 7, 6, dtype=dt)
        out.append(((x, _r(6, 2, 3, 2, dtype=dt), _r(6, dtype=dt), [2, 1], [1, 0], [1, 2], False, [0, 0], 2), {}))
        out.append(((x, _r(4, 3, 3, 3, dtype=dt), None, [2, 2], [1, 1], [1, 1], True, [1, 0], 1), {}))
        out.append(((_r(1, 2, 9, dtype=dt), _r(2, 3, 4, dtype=dt), _r(3, dtype=dt), [3], [2], [2], True, [1], 1), {}))
    i = torch.randint(-4, 5, (1, 2, 5, 5))
    out.append(((i, torch.randint(-3, 4, (3, 2, 2, 2)), None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1), {}))
    # Kernels larger than the input (ResNet's last stage on small images), which Tessera
    # lowers as a GEMM over the kernel taps (ops/src/aten/nn/conv_taps.rs): padded, strided,
    # dilated, 1x1 inputs, and 1-d.
    for dt in [torch.float32, torch.float64]:
        out.append(((_r(2, 6, 2, 2, dtype=dt), _r(5, 6, 3, 3, dtype=dt), _r(5, dtype=dt), [1, 1], [1, 1], [1, 1], False, [0, 0], 1), {}))
        out.append(((_r(2, 6, 2, 3, dtype=dt), _r(5, 6, 3, 3, dtype=dt), None, [2, 1], [2, 1], [1, 1], False, [0, 0], 1), {}))
        out.append(((_r(1, 4, 1, 1, dtype=dt), _r(3, 4, 3, 3, dtype=dt), None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1), {}))
        out.append(((_r(1, 3, 3, 3, dtype=dt), _r(4, 3, 3, 3, dtype=dt), None, [1, 1], [2, 2], [2, 2], False, [0, 0], 1), {}))
        out.append(((_r(2, 3, 3, dtype=dt), _r(4, 3, 5, dtype=dt), None, [1], [2], [1], False, [0], 1), {}))
    return out


def _convolution_backward():
    out = []
    for dt in [torch.float32, torch.float64]:
        for transposed, groups, stride, pad, dil, op in [
            (False, 1, [1, 1], [0, 0], [1, 1], [0, 0]),
            (False, 2, [2, 1], [1, 2], [1, 2], [0, 0]),
            (True, 1, [2, 2], [1, 0], [1, 1], [1, 0]),
            (True, 2, [1, 2], [0, 1], [2, 1], [0, 1]),
        ]:
            x = _r(2, 4, 7, 6, dtype=dt)
            w = _r(6, 4 // groups, 3, 2, dtype=dt) if not transposed else _r(4, 3, 3, 2, dtype=dt)
            y = A.convolution(x, w, None, stride, pad, dil, transposed, op, groups)
            g = _r(*y.shape, dtype=dt)
            out.append(((g, x, w, [w.shape[0] if not transposed else w.shape[1] * groups], stride, pad, dil, transposed, op, groups, [True, True, True]), {}))
        x = _r(1, 3, 10, dtype=dt)
        w = _r(5, 3, 4, dtype=dt)
        g = _r(1, 5, 3, dtype=dt)
        out.append(((g, x, w, None, [3], [1], [1], False, [0], 1, [True, True, True]), {}))
        # Kernels larger than the input and than the output gradient (conv_taps.rs).
        x = _r(2, 6, 2, 2, dtype=dt)
        w = _r(5, 6, 3, 3, dtype=dt)
        for stride, pad in [([1, 1], [1, 1]), ([2, 2], [1, 1])]:
            y = A.convolution(x, w, None, stride, pad, [1, 1], False, [0, 0], 1)
            g = _r(*y.shape, dtype=dt)
            out.append(((g, x, w, [5], stride, pad, [1, 1], False, [0, 0], 1, [True, True, True]), {}))
    return out


def _col2im():
    out = []
    for dt in FLOATS:
        out.append(((_r(2, 3 * 2 * 2, 12, dtype=dt), [4, 5], [2, 2], [1, 1], [0, 0], [1, 1]), {}))
        out.append(((_r(3 * 3 * 2, 9, dtype=dt), [5, 6], [3, 2], [1, 2], [1, 1], [2, 2]), {}))
    return out


def _embedding_bag():
    out = []
    for dt in FLOATS:
        w = _r(10, 3, dtype=dt)
        idx = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9])
        for mode in (0, 1, 2):
            out.append(((w, idx, torch.tensor([0, 4]), False, mode, False, None, False, -1), {}))
            out.append(((w, idx, torch.tensor([0, 3, 3, 6]), False, mode, False, None, False, 2), {}))
            out.append(((w, idx, torch.tensor([0, 2, 8]), False, mode, False, None, True, -1), {}))
        out.append(((w, idx, torch.tensor([0, 5]), False, 0, False, _r(8, dtype=dt), False, -1), {}))
        out.append(((w, idx.int(), torch.tensor([0, 1, 5]).int(), False, 1, False, None, False, -1), {}))
    return out


def _bn_no_training():
    out = []
    for dt in FLOATS:
        x = _r(3, 4, 5, dtype=dt)
        rm, rv = _r(4, dtype=dt), _r(4, dtype=dt, lo=0.5, hi=2.0)
        out.append(((x, _r(4, dtype=dt), _r(4, dtype=dt), rm, rv, 0.1, 1e-5), {}))
        out.append(((x, None, None, rm.float(), rv.float(), 0.1, 1e-3), {}))
    return out


def _batch_norm():
    out = []
    for dt in FLOATS:
        x = _r(3, 4, 5, 2, dtype=dt)
        rm, rv = _r(4, dtype=dt), _r(4, dtype=dt, lo=0.5, hi=2.0)
        out.append(((x, _r(4, dtype=dt), _r(4, dtype=dt), rm, rv, False, 0.1, 1e-5, False), {}))
        out.append(((x, None, _r(4, dtype=dt), None, None, True, 0.1, 1e-5, False), {}))
    return out


def _layer_norm():
    out = []
    for dt in FLOATS:
        x = _r(2, 3, 4, dtype=dt)
        out.append(((x, [4], _r(4, dtype=dt), _r(4, dtype=dt)), {}))
        out.append(((x, [3, 4]), {"eps": 1e-3}))
    return out


def _group_norm():
    out = []
    for dt in FLOATS:
        x = _r(2, 6, 5, dtype=dt)
        out.append(((x, 3, _r(6, dtype=dt), _r(6, dtype=dt)), {}))
        out.append(((x, 2), {"eps": 1e-3}))
    return out


def _rms_norm():
    out = []
    for dt in FLOATS:
        x = _r(2, 3, 4, dtype=dt)
        out.append(((x, [4], _r(4, dtype=dt)), {}))
        out.append(((x, [3, 4], None, 1e-3), {}))
    return out


def _layer_norm_backward():
    # f32/f64 only: for f16/bf16 inputs PyTorch's CPU kernel accumulates grad_weight and
    # grad_bias per thread in the input's precision (even with f32 parameters), so its result
    # depends on the number of threads; Tessera accumulates in f32 (grad_input agrees).
    out = []
    for dt in [torch.float32, torch.float64]:
        x, g = _r(2, 3, 4, dtype=dt), _r(2, 3, 4, dtype=dt)
        w, b = _r(4, dtype=dt), _r(4, dtype=dt)
        _, mean, rstd = A.native_layer_norm(x, [4], w, b, 1e-5)
        out.append(((g, x, [4], mean, rstd, w, b, [True, True, True]), {}))
        w2, b2 = _r(3, 4, dtype=dt), _r(3, 4, dtype=dt)
        _, mean, rstd = A.native_layer_norm(x, [3, 4], w2, b2, 1e-5)
        out.append(((g, x, [3, 4], mean, rstd, w2, b2, [True, True, True]), {}))
    return out


def _group_norm_backward():
    out = []
    for dt in FLOATS:
        x, g = _r(2, 6, 5, dtype=dt), _r(2, 6, 5, dtype=dt)
        w = _r(6, dtype=dt)
        _, mean, rstd = A.native_group_norm(x, w, None, 2, 6, 5, 3, 1e-5)
        out.append(((g, x, mean, rstd, w, 2, 6, 5, 3, [True, True, True]), {}))
        out.append(((g, x, mean, rstd, None, 2, 6, 5, 3, [True, True, True]), {}))
    return out


def _cross_entropy():
    out = []
    for dt in FLOATS:
        x = _r(4, 5, dtype=dt)
        t = torch.tensor([1, 0, 4, -100])
        for red in (0, 1, 2):
            out.append(((x, t), {"reduction": red}))
            out.append(((x, t, _r(5, dtype=dt, lo=0.1, hi=2.0), red, -100, 0.2), {}))
            out.append(((x, torch.softmax(_r(4, 5), 1).to(dt), None, red, -100, 0.1), {}))
        x3 = _r(2, 3, 4, dtype=dt)
        out.append(((x3, torch.randint(0, 3, (2, 4)), None, 1, 1, 0.0), {}))
        out.append(((_r(5, dtype=dt), torch.tensor(2)), {}))
    return out


def _sdpa():
    out = []
    for dt in FLOATS:
        q, k, v = _r(2, 3, 4, 8, dtype=dt), _r(2, 3, 6, 8, dtype=dt), _r(2, 3, 6, 5, dtype=dt)
        out.append(((q, k, v), {}))
        out.append(((q, k, v), {"is_causal": True}))
        m = torch.rand(4, 6) > 0.3
        m[1] = False
        out.append(((q, k, v, m), {}))
        out.append(((q, k, v, _r(2, 1, 4, 6, dtype=dt)), {"scale": 0.3}))
        out.append(((q, _r(2, 1, 6, 8, dtype=dt), _r(2, 1, 6, 5, dtype=dt)), {"enable_gqa": True}))
    return out


def _upsample_bilinear():
    out = []
    for dt in FLOATS + [torch.uint8]:
        x = _r(2, 3, 4, 5, dtype=dt, lo=0, hi=200) if dt == torch.uint8 else _r(2, 3, 4, 5, dtype=dt)
        for align in (False, True):
            out.append(((x, [7, 3], align, None), {}))
            out.append(((x, None, align, [1.5, 2.3]), {}))
    return out


def _upsample_nearest():
    out = []
    for dt in FLOATS + [torch.uint8]:
        x = _r(2, 3, 4, 5, dtype=dt, lo=0, hi=200) if dt == torch.uint8 else _r(2, 3, 4, 5, dtype=dt)
        out.append(((x, [7, 3], None), {}))
        out.append(((x, [8, 10], None), {}))
        out.append(((x, None, [1.5, 0.7]), {}))
    return out


def _adaptive_avg_pool1d():
    return [((_r(2, 3, 10, dtype=dt), [4]), {}) for dt in FLOATS] + [((_r(3, 7, dtype=dt), [7]), {}) for dt in FLOATS]


def _adaptive_avg_pool2d_backward():
    out = []
    for dt in FLOATS:
        x = _r(2, 3, 7, 5, dtype=dt)
        out.append(((_r(2, 3, 3, 4, dtype=dt), x), {}))
        out.append(((_r(3, 2, 2, dtype=dt), _r(3, 5, 4, dtype=dt)), {}))
    return out


def _avg_pool2d_backward():
    out = []
    for dt in FLOATS:
        x = _r(2, 3, 7, 6, dtype=dt)
        for k, s, p, ceil, inc, div in [([3, 2], [2, 2], [1, 1], False, True, None), ([3, 3], [2, 1], [1, 0], True, False, None), ([2, 2], [3, 3], [0, 1], True, True, 3)]:
            y = A.avg_pool2d(x, k, s, p, ceil, inc, div)
            out.append(((_r(*y.shape, dtype=dt), x, k, s, p, ceil, inc, div), {}))
    return out


GENERATED = {
    "convolution": _convolution,
    "convolution_backward": _convolution_backward,
    "col2im": _col2im,
    "_embedding_bag": _embedding_bag,
    "_native_batch_norm_legit_no_training": _bn_no_training,
    "batch_norm": _batch_norm,
    "layer_norm": _layer_norm,
    "group_norm": _group_norm,
    "rms_norm": _rms_norm,
    "native_layer_norm_backward": _layer_norm_backward,
    "native_group_norm_backward": _group_norm_backward,
    "cross_entropy_loss": _cross_entropy,
    "scaled_dot_product_attention": _sdpa,
    "upsample_bilinear2d.vec": _upsample_bilinear,
    "upsample_nearest2d.vec": _upsample_nearest,
    "adaptive_avg_pool1d": _adaptive_avg_pool1d,
    "_adaptive_avg_pool2d_backward": _adaptive_avg_pool2d_backward,
    "avg_pool2d_backward": _avg_pool2d_backward,
}
