#!/usr/bin/env python3
"""Print the launch structure of Mosaic kernels as JSON, for comparing Tessera with Pallas.

Usage:
  pallas_structure.py [--add M N BM BN] [--matmul M N K B] [--softmax M N BM]
                      [--gather N_OUT V] [--bmm B M K N] [--gmm M K N G] [--dma N_OUT V]
                      [--paged BATCH WIDTH POOL] [--scoped N_OUT V] [--buffered M N BM]
                      [--element STEPS STRIDE ROWS] [--dtype D]
      Lowers the Pallas equivalents of Tessera's add, matmul (f32 VMEM accumulator, k axis
      `arbitrary`), row softmax, a row-block gather by scalar-prefetched indices
      (`PrefetchScalarGridSpec`), a batched matmul with a squeezed (`None`) batch dim and a
      grouped matmul over ragged groups (group offsets by scalar prefetch, 8x128 output
      blocks) and a manual-DMA row copy (input and output in HBM via `pl.ANY`, rows at
      scalar-prefetched offsets copied by `make_async_copy`) and a paged-attention decode step
      (K/V pages in HBM copied by double-buffered DMA) and the row copy with `run_scoped`
      scratch and a row-times-weight product with `pl.Buffered` windows and a sliding-window
      row sum over overlapping `pl.Element` row windows (step i sums rows [STRIDE*i,
      STRIDE*i + ROWS)), for TPU -- no TPU needed -- and prints one JSON object
      {"add": S, "matmul": S, "softmax": S, "gather": S, "bmm": S, "gmm": S, "dma": S,
       "paged": S, "scoped": S, "buffered": S, "element": S}.
  pallas_structure.py --module FILE [FILE ...]
      Prints {FILE: S} for Mosaic modules as text (serialized or readable), e.g. Tessera's.

S = {"iteration_bounds": [..], "dimension_semantics": [..], "scratch_operands": n,
     "scalar_prefetch": n,
     "arg_types": [..kernel func argument types..],
     "window_params": [{"window_bounds": [..], "index_map": [["arg", i] | ["const", c] | ["expr", op]],
                        "pipeline_mode": m (only where given),
                        "window_kind": k (only where given: "element_window<[..], [..]>")} | {}]}
({} for an operand left in HBM: Pallas gives it no window).
where `index_map` says, per block dim, what the transform function returns: a grid index,
a constant, or (anything else) the op that computes it.
"""
import argparse
import base64
import json
import re
import sys

import jax
import jax.numpy as jnp
from jax._src.interpreters import mlir as jax_mlir
from jax._src.lib import tpu
from jax._src.lib.mlir import ir, passmanager
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def parallel(n):
    # Tessera's launches default to all-parallel; Pallas' default is "arbitrary", so the
    # equivalent Pallas kernels say it explicitly.
    return pltpu.CompilerParams(dimension_semantics=("parallel",) * n)


def add(m, n, bm, bn, dtype):
    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...]

    spec = pl.BlockSpec((bm, bn), lambda i, j: (i, j))
    call = pl.pallas_call(kernel, grid=(m // bm, n // bn), in_specs=[spec, spec], out_specs=spec,
                          out_shape=jax.ShapeDtypeStruct((m, n), dtype), compiler_params=parallel(2))
    return call, [jax.ShapeDtypeStruct((m, n), dtype)] * 2


def matmul(m, n, k, b, dtype):
    def kernel(x_ref, y_ref, o_ref, acc_ref):
        @pl.when(pl.program_id(2) == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

        @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
        def _():
            o_ref[...] = acc_ref[...].astype(o_ref.dtype)

    call = pl.pallas_call(
        kernel,
        grid=(m // b, n // b, k // b),
        in_specs=[pl.BlockSpec((b, b), lambda i, j, kk: (i, kk)), pl.BlockSpec((b, b), lambda i, j, kk: (kk, j))],
        out_specs=pl.BlockSpec((b, b), lambda i, j, kk: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), dtype),
        scratch_shapes=[pltpu.VMEM((b, b), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
    )
    return call, [jax.ShapeDtypeStruct((m, k), dtype), jax.ShapeDtypeStruct((k, n), dtype)]


def softmax(m, n, bm, dtype):
    def kernel(x_ref, o_ref):
        v = x_ref[...].astype(jnp.float32)
        e = jnp.exp(v - jnp.max(v, axis=1, keepdims=True))
        o_ref[...] = (e / jnp.sum(e, axis=1, keepdims=True)).astype(o_ref.dtype)

    spec = pl.BlockSpec((bm, n), lambda i: (i, 0))
    call = pl.pallas_call(kernel, grid=(m // bm,), in_specs=[spec], out_specs=spec,
                          out_shape=jax.ShapeDtypeStruct((m, n), dtype), compiler_params=parallel(1))
    return call, [jax.ShapeDtypeStruct((m, n), dtype)]


def gather(n_out, v, dtype):
    # Output block i is row block idx[i] of x: the index map reads the prefetched indices.
    def kernel(idx_ref, x_ref, o_ref):
        o_ref[...] = x_ref[...]

    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1,
        grid=(n_out,),
        in_specs=[pl.BlockSpec((8, 128), lambda i, idx: (idx[i], 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i, idx: (i, 0)),
    )
    call = pl.pallas_call(kernel, grid_spec=grid_spec, out_shape=jax.ShapeDtypeStruct((n_out * 8, 128), dtype),
                          compiler_params=parallel(1))
    return call, [jax.ShapeDtypeStruct((n_out,), jnp.int32), jax.ShapeDtypeStruct((v * 8, 128), dtype)]


def bmm(b, m, k, n, dtype):
    # One batch per grid step along axis 0; the batch dim is squeezed out of every block.
    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32).astype(o_ref.dtype)

    call = pl.pallas_call(
        kernel,
        grid=(b, 1),
        in_specs=[pl.BlockSpec((None, m, k), lambda bi, i: (bi, i, 0)), pl.BlockSpec((None, k, n), lambda bi, i: (bi, 0, 0))],
        out_specs=pl.BlockSpec((None, m, n), lambda bi, i: (bi, i, 0)),
        out_shape=jax.ShapeDtypeStruct((b, m, n), dtype),
        compiler_params=parallel(2),
    )
    return call, [jax.ShapeDtypeStruct((b, m, k), dtype), jax.ShapeDtypeStruct((b, k, n), dtype)]


def gmm(m, k, n, groups, dtype):
    # Rows offs[g]..offs[g+1] of x times w[g]; each (row block, column block) visits every
    # group along the last, sequential axis and takes the rows of the groups it overlaps.
    bm, bn = 8, 128

    def kernel(offs_ref, x_ref, w_ref, o_ref, acc_ref):
        g = pl.program_id(2)

        @pl.when(g == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        lo, hi = offs_ref[g], offs_ref[g + 1]
        first = pl.program_id(0) * bm

        @pl.when((lo < first + bm) & (hi > first))
        def _():
            rows = jax.lax.broadcasted_iota(jnp.int32, (bm, bn), 0) + first
            mine = (rows >= lo) & (rows < hi)
            prod = jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)
            acc_ref[...] = jnp.where(mine, prod, acc_ref[...])

        @pl.when(g == pl.num_programs(2) - 1)
        def _():
            o_ref[...] = acc_ref[...].astype(o_ref.dtype)

    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1,
        grid=(m // bm, n // bn, groups),
        in_specs=[pl.BlockSpec((bm, k), lambda i, j, g, offs: (i, 0)),
                  pl.BlockSpec((None, k, bn), lambda i, j, g, offs: (g, 0, j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, g, offs: (i, j)),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
    )
    call = pl.pallas_call(kernel, grid_spec=grid_spec, out_shape=jax.ShapeDtypeStruct((m, n), dtype),
                          compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")))
    return call, [jax.ShapeDtypeStruct((groups + 1,), jnp.int32), jax.ShapeDtypeStruct((m, k), dtype),
                  jax.ShapeDtypeStruct((groups, k, n), dtype)]


def dma(n_out, v, dtype):
    # Input and output left in HBM (pl.ANY); step i copies rows starts[i]..+8 into a VMEM
    # buffer, adds 1 and copies it to rows 8i..+8 of the output, one DMA semaphore each way.
    def kernel(starts_ref, x_hbm, o_hbm, buf, sems):
        i = pl.program_id(0)
        load = pltpu.make_async_copy(x_hbm.at[pl.ds(starts_ref[i], 8)], buf, sems.at[0])
        load.start()
        load.wait()
        buf[...] = buf[...] + 1
        back = pltpu.make_async_copy(buf, o_hbm.at[pl.ds(i * 8, 8)], sems.at[1])
        back.start()
        back.wait()

    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1,
        grid=(n_out,),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        scratch_shapes=[pltpu.VMEM((8, 128), dtype), pltpu.SemaphoreType.DMA((2,))],
    )
    call = pl.pallas_call(kernel, grid_spec=grid_spec, out_shape=jax.ShapeDtypeStruct((n_out * 8, 128), dtype),
                          compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)))
    return call, [jax.ShapeDtypeStruct((n_out,), jnp.int32), jax.ShapeDtypeStruct((v, 128), dtype)]


def paged(batch, width, pool, dtype):
    # A paged-attention decode step: one sequence per step; its K/V pages (left in HBM) are
    # copied into two VMEM slots by DMA, page j + 1 in flight while page j is used; online
    # softmax masked by the sequence length. Page table and lengths are scalar-prefetched.
    h, d, p = 8, 128, 128

    def kernel(pages_ref, lens_ref, q_ref, k_hbm, v_hbm, o_ref, kbuf, vbuf, sems):
        b = pl.program_id(0)
        length = lens_ref[b]
        # lax.div/rem (truncating, as Tessera's): jnp's floor forms need a TPU's info to lower.
        n = jax.lax.div(length + p - 1, p)

        def copies(j, slot):
            page = pages_ref[b * width + j]
            return (pltpu.make_async_copy(k_hbm.at[pl.ds(page, 1)], kbuf.at[pl.ds(slot, 1)], sems.at[2 * slot]),
                    pltpu.make_async_copy(v_hbm.at[pl.ds(page, 1)], vbuf.at[pl.ds(slot, 1)], sems.at[2 * slot + 1]))

        for c in copies(0, 0):
            c.start()
        q = q_ref[...] * (1.0 / d ** 0.5)

        def body(j, carry):
            m, l, acc = carry
            slot = jax.lax.rem(j, 2)

            @pl.when(j + 1 < n)
            def _():
                for c in copies(j + 1, jax.lax.rem(j + 1, 2)):
                    c.start()

            for c in copies(j, slot):
                c.wait()
            k = kbuf[pl.ds(slot, 1)].reshape(p, d)
            v = vbuf[pl.ds(slot, 1)].reshape(p, d)
            live = jax.lax.broadcasted_iota(jnp.int32, (h, p), 1) + j * p < length
            s = jax.lax.dot_general(q, k, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32)
            s = jnp.where(live, s, -1e30)
            m_new = jnp.maximum(m, s.max(axis=1, keepdims=True))
            alpha = jnp.exp(m - m_new)
            e = jnp.where(live, jnp.exp(s - m_new), 0.0)
            return (m_new, alpha * l + e.sum(axis=1, keepdims=True),
                    alpha * acc + jnp.dot(e, v, preferred_element_type=jnp.float32))

        init = (jnp.full((h, 1), -1e30, jnp.float32), jnp.zeros((h, 1), jnp.float32), jnp.zeros((h, d), jnp.float32))
        _, l, acc = jax.lax.fori_loop(0, n, body, init)
        o_ref[...] = (acc / l).astype(o_ref.dtype)

    row = pl.BlockSpec((None, h, d), lambda b, pages, lens: (b, 0, 0))
    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=2,
        grid=(batch,),
        in_specs=[row, pl.BlockSpec(memory_space=pl.ANY), pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=row,
        scratch_shapes=[pltpu.VMEM((2, p, d), dtype), pltpu.VMEM((2, p, d), dtype), pltpu.SemaphoreType.DMA((4,))],
    )
    call = pl.pallas_call(kernel, grid_spec=grid_spec, out_shape=jax.ShapeDtypeStruct((batch, h, d), dtype),
                          compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)))
    return call, [jax.ShapeDtypeStruct((batch * width,), jnp.int32), jax.ShapeDtypeStruct((batch,), jnp.int32),
                  jax.ShapeDtypeStruct((batch, h, d), dtype), jax.ShapeDtypeStruct((pool, p, d), dtype),
                  jax.ShapeDtypeStruct((pool, p, d), dtype)]


def scoped(n_out, v, dtype):
    # Like `dma`, with a blocked output and the VMEM buffer and DMA semaphore allocated by
    # run_scoped inside the body (no scratch operands).
    def kernel(starts_ref, x_hbm, o_ref):
        row = starts_ref[pl.program_id(0)]

        def body(buf, sem):
            copy = pltpu.make_async_copy(x_hbm.at[pl.ds(row, 8)], buf, sem)
            copy.start()
            copy.wait()
            o_ref[...] = buf[...] + 1

        pl.run_scoped(body, pltpu.VMEM((8, 128), dtype), pltpu.SemaphoreType.DMA)

    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1,
        grid=(n_out,),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec((8, 128), lambda i, starts: (i, 0)),
    )
    call = pl.pallas_call(kernel, grid_spec=grid_spec, out_shape=jax.ShapeDtypeStruct((n_out * 8, 128), dtype),
                          compiler_params=parallel(1))
    return call, [jax.ShapeDtypeStruct((n_out,), jnp.int32), jax.ShapeDtypeStruct((v, 128), dtype)]


def buffered(m, n, bm, dtype):
    # Rows of x (explicitly double-buffered) times one weight tile that every step reuses
    # (single-buffered; Pallas also forces that for a whole-array window at block 0).
    def kernel(x_ref, w_ref, o_ref):
        o_ref[...] = x_ref[...] * w_ref[...]

    x_spec = pl.BlockSpec((bm, n), lambda i: (i, 0), pipeline_mode=pl.Buffered(2))
    w_spec = pl.BlockSpec((bm, n), lambda i: (0, 0), pipeline_mode=pl.Buffered(1))
    call = pl.pallas_call(kernel, grid=(m // bm,), in_specs=[x_spec, w_spec],
                          out_specs=pl.BlockSpec((bm, n), lambda i: (i, 0)),
                          out_shape=jax.ShapeDtypeStruct((m, n), dtype), compiler_params=parallel(1))
    return call, [jax.ShapeDtypeStruct((m, n), dtype), jax.ShapeDtypeStruct((bm, n), dtype)]


def element(steps, stride, rows, dtype):
    # Step i sees rows [stride*i, stride*i + rows) of x (overlapping where stride < rows) and
    # writes their column sums to every row of output block i. Mosaic's element windows take
    # element offsets in every dim, so Pallas needs `pl.Element` in all of them.
    def kernel(x_ref, o_ref):
        s = jnp.sum(x_ref[...], axis=0, keepdims=True)
        o_ref[...] = jnp.broadcast_to(s, o_ref.shape)

    call = pl.pallas_call(
        kernel, grid=(steps,),
        in_specs=[pl.BlockSpec((pl.Element(rows), pl.Element(128)), lambda i: (i * stride, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((steps * 8, 128), dtype), compiler_params=parallel(1))
    return call, [jax.ShapeDtypeStruct(((steps - 1) * stride + rows, 128), dtype)]


def mosaic_body(call, args):
    """The Mosaic module bytes inside the lowered tpu_custom_call."""
    text = jax.jit(call).trace(*args).lower(lowering_platforms=("tpu",)).as_text()
    m = re.search(r'backend_config = "(.*?)", ', text)
    config = re.sub(r"\\([0-9A-Fa-f]{2})", lambda h: chr(int(h.group(1), 16)), m.group(1))
    return base64.b64decode(json.loads(config)["custom_call_config"]["body"])


def parse(source):
    """A deserialized module from Mosaic bytecode or text (serialized or readable)."""
    ctx = jax_mlir.make_ir_context()
    tpu.register_dialect(ctx)
    ctx.allow_unregistered_dialects = True
    with ctx:
        module = ir.Module.parse(source)
        # Pallas' bytecode is always serialized; text is when its ops are renamed.
        if isinstance(source, bytes) or '"stable_mosaic.' in source:
            passmanager.PassManager.parse("builtin.module(mosaic-serde{serialize=false})").run(module.operation)
        # Keep the context alive with the module.
        return ctx, module


def ints(attr):
    return [int(v) for v in re.findall(r"-?\d+", str(attr).split(":", 1)[-1])] if ":" in str(attr) else []


def structure(source):
    ctx, module = parse(source)
    with ctx:
        funcs = {str(op.attributes["sym_name"]).strip('"'): op for op in module.body.operations}
        kernel = next(op for op in funcs.values() if "window_params" in op.attributes)
        windows = []
        for w in kernel.attributes["window_params"]:
            w = ir.DictAttr(w)
            if "transform_indices" not in w:
                # An operand left in HBM (pl.ANY): no window, no transform.
                windows.append({})
                continue
            transform = funcs[str(w["transform_indices"]).lstrip("@")]
            window = {"window_bounds": ints(w["window_bounds"]), "index_map": index_map(transform)}
            if "pipeline_mode" in w:
                # pl.Buffered(n): "synchronous" (1) or "double_buffered" (2).
                window["pipeline_mode"] = re.search(r"<(\w+)>", str(w["pipeline_mode"])).group(1)
            if "window_kind" in w:
                # pl.Element: "element_window<[pad low..], [pad high..]>".
                window["window_kind"] = re.sub(r"^#tpu\.", "", str(w["window_kind"]))
            windows.append(window)
        ftype = ir.FunctionType(ir.TypeAttr(kernel.attributes["function_type"]).value)
        return {
            "iteration_bounds": ints(kernel.attributes["iteration_bounds"]),
            "dimension_semantics": re.findall(r"dimension_semantics<(\w+)>", str(kernel.attributes["dimension_semantics"])),
            "scratch_operands": ir.IntegerAttr(kernel.attributes["scratch_operands"]).value,
            "scalar_prefetch": ir.IntegerAttr(kernel.attributes["scalar_prefetch"]).value,
            "arg_types": [str(t) for t in ftype.inputs],
            "window_params": windows,
        }


def index_map(func):
    """What each returned block index is: a grid index, a constant, or another op."""
    block = func.regions[0].blocks[0]
    ret = list(block.operations)[-1]
    out = []
    for v in ret.operands:
        if isinstance(v.owner, ir.Block):
            out.append(["arg", ir.BlockArgument(v).arg_number])
        elif v.owner.name == "arith.constant":
            out.append(["const", ir.IntegerAttr(v.owner.attributes["value"]).value])
        else:
            out.append(["expr", v.owner.name])
    return out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--add", nargs=4, type=int, default=[256, 512, 128, 256], metavar=("M", "N", "BM", "BN"))
    ap.add_argument("--matmul", nargs=4, type=int, default=[256, 256, 384, 128], metavar=("M", "N", "K", "B"))
    ap.add_argument("--softmax", nargs=3, type=int, default=[64, 256, 16], metavar=("M", "N", "BM"))
    ap.add_argument("--gather", nargs=2, type=int, default=[4, 6], metavar=("N_OUT", "V"))
    ap.add_argument("--bmm", nargs=4, type=int, default=[3, 128, 256, 128], metavar=("B", "M", "K", "N"))
    ap.add_argument("--gmm", nargs=4, type=int, default=[64, 128, 256, 4], metavar=("M", "K", "N", "G"))
    ap.add_argument("--dma", nargs=2, type=int, default=[4, 64], metavar=("N_OUT", "V"))
    ap.add_argument("--scoped", nargs=2, type=int, default=[4, 40], metavar=("N_OUT", "V"))
    ap.add_argument("--paged", nargs=3, type=int, default=[2, 4, 6], metavar=("BATCH", "WIDTH", "POOL"))
    ap.add_argument("--buffered", nargs=3, type=int, default=[64, 256, 16], metavar=("M", "N", "BM"))
    ap.add_argument("--element", nargs=3, type=int, default=[8, 4, 8], metavar=("STEPS", "STRIDE", "ROWS"))
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--module", nargs="+", metavar="FILE")
    a = ap.parse_args(argv)
    if a.module:
        out = {f: structure(open(f, encoding="utf-8").read()) for f in a.module}
    else:
        dtype = jnp.dtype(a.dtype)
        kernels = {"add": add(*a.add, dtype), "matmul": matmul(*a.matmul, dtype), "softmax": softmax(*a.softmax, dtype),
                   "gather": gather(*a.gather, dtype), "bmm": bmm(*a.bmm, dtype), "gmm": gmm(*a.gmm, dtype), "dma": dma(*a.dma, dtype), "paged": paged(*a.paged, dtype),
                   "scoped": scoped(*a.scoped, dtype), "buffered": buffered(*a.buffered, dtype),
                   "element": element(*a.element, dtype)}
        out = {name: structure(mosaic_body(call, args)) for name, (call, args) in kernels.items()}
    print(json.dumps(out, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
