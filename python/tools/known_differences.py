"""Known differences between torch CPU and Tessera that are not Tessera's errors: the one place
they are documented. Each is checked as what it is, with its own oracle, and counted per op in
the sweep's JSON (`known_differences`), never skipped silently.

1. torch's own CPU result depends on the CPU (`float64_oracle`). torch's float32/bfloat16 CPU
   kernels are vectorised per instruction set (AVX2, AVX-512, ...), so the same call gives
   different answers on different machines. Measured: `gelu` (exact) on a float32 tensor of
   more than one element holding +inf returns NaN at that element on an AMD EPYC and +inf on
   the Intel machine of stop 10 (torch 2.15; float64, float16 and a lone element give +inf
   everywhere). Where Tessera's result differs from torch's in a float dtype, the sample is
   judged against torch's op run in float64 on the exactly upcast inputs and rounded to the
   dtype, with the same tolerance: a machine-independent oracle that Tessera did not write.
   Not for calls that write their arguments (the float64 run would write other tensors).

2. XLA CPU flushes subnormals to zero (`denormal_flush`): inputs and results below the
   dtype's smallest normal number become 0 on the device (`ceil(1e-45)` is 0 there, 1 in
   torch). Where a sample holds subnormal inputs or results and Tessera's result differs,
   it is judged against torch's result on the inputs with subnormals flushed, itself flushed.
   TPUs flush subnormals too; this is the platform's arithmetic, not a lowering bug.

3. Contractions in float32 (`contraction_bound`): torch's fixed float32 tolerance (1e-5 /
   1.3e-6) is below the rounding error of a long sum in another order (a `bmm` sample off by
   1.56e-5 with k = 25); judged against torch's float64 result with the k-dependent bound of
   tolerance.py.

4. torch's own float16/bfloat16 rounding (`as_accurate_as_torch`). Where torch's CPU kernel
   computes in the low-precision dtype (grid_sampler_2d's half path: 1.0e-2 from float64 on an
   OpInfo sample with reflection padding), neither torch's result nor the float64 one decides: a
   float16/bfloat16 result passes when no element is further from torch's float64 result than
   torch's own worst element is, plus the dtype's tolerance.

5. torch's out= kernel disagrees with its own functional op (`torch_out_kernel`). An out= or
   in-place overload computes its functional op into its arguments; where torch's overload
   returns something else on a sample (`binary_cross_entropy.out` with a reduction: NaN into an
   empty `out`, the elementwise mean of a mis-sized one; `binary_cross_entropy_backward.grad_input`
   and `normal.Tensor_float_out` leave an empty `out` unresized), the sample is judged against
   torch's functional op on the same arguments, its results written into the `out` arguments
   (counted in the JSON's `torch_inconsistent` and as this kind).
"""

# Ops whose torch CPU result is known to depend on the CPU's vector unit (documentation and a
# regression test: python/tests/test_sweep_policy.py); the float64 oracle applies to every op.
CPU_DEPENDENT = {
    "gelu": "float32/bfloat16 at +inf: NaN on AVX-512 machines (vectorised erf), +inf elsewhere",
}
