// `torch.autocast("tpu", dtype=...)`: torch's autocast kernels registered for the PrivateUse1
// key (torch registers them for CPU, CUDA, XPU and MPS only), with torch's own op lists and
// cast policies, as CUDA has them: matmuls and convolutions in the lower precision,
// reductions, norms and losses in float32, mixed-precision ops at the widest type. Other ops
// pass through. Loaded by the backend module when autocast first asks for the device
// (tessera/device/backend.py `get_amp_supported_dtype`), for either dispatch.
#include <ATen/autocast_mode.h>
#include <torch/extension.h>
#include <torch/library.h>

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

// In at::autocast, where the lists' signatures (`Tensor`, `Scalar`, `IntArrayRef`) resolve.
namespace at::autocast {
TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define TESSERA_LOWER(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define TESSERA_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define TESSERA_FP32_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define TESSERA_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_LOWER_PRECISION_FP(TESSERA_LOWER)
  AT_FORALL_FP32(TESSERA_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(TESSERA_FP32_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
  AT_FORALL_PROMOTE(TESSERA_PROMOTE)
}
}  // namespace at::autocast

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {}
