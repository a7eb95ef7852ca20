#!/usr/bin/env python3
"""Pallas' own `pltpu.bitcast` on an array, as an independent reference for Tessera's
`pack_bitcast` (kernels/tests/pack_bitcast_tests.rs).

Usage: pallas_bitcast.py IN_FILE IN_DTYPE ROWS COLS OUT_DTYPE OUT_FILE

Reads a row-major `[ROWS, COLS]` array of IN_DTYPE (a NumPy/JAX dtype name, e.g. `bfloat16`,
`int8`) from IN_FILE's raw bytes, runs a one-block `pallas_call` whose body is
`pltpu.bitcast(x, OUT_DTYPE)` in interpret mode (JAX's own lowering of it, no TPU), and writes
the result's raw bytes to OUT_FILE. Prints the result shape. Exits 2 if jax is not importable.
"""
import sys

try:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu
except ImportError as e:  # pragma: no cover - depends on the venv
    print(f"pallas_bitcast: jax not importable: {e}", file=sys.stderr)
    sys.exit(2)


def main(argv):
    in_file, in_dtype, rows, cols, out_dtype, out_file = argv
    x = np.frombuffer(open(in_file, "rb").read(), dtype=jnp.dtype(in_dtype))
    x = x.reshape(int(rows), int(cols))
    out_dtype = jnp.dtype(out_dtype)
    shape = jax.eval_shape(lambda v: pltpu.bitcast(v, out_dtype), x).shape

    def body(x_ref, o_ref):
        o_ref[...] = pltpu.bitcast(x_ref[...], out_dtype)

    out = pl.pallas_call(
        body, out_shape=jax.ShapeDtypeStruct(shape, out_dtype), interpret=True
    )(x)
    open(out_file, "wb").write(np.asarray(out).tobytes())
    print(f"{shape[0]} {shape[1]}")


if __name__ == "__main__":
    main(sys.argv[1:])
