// A kernel op's CPU implementation as a boxed C++ kernel: torch's dispatcher calls it without
// Python, and it hands the tensors' memory to Tessera's runtime (`tessera_kernel_call` in
// python/src/kernel_ffi.rs, reached through its address). On the CPU plugin an output tensor
// is made over the runtime's own buffer (no copy), which the tensor's deleter releases. Where
// the runtime does not take a call, the op's Python implementation runs it (or raises the
// kernel's own error).
#include <ATen/core/LegacyTypeDispatch.h>
#include <torch/extension.h>
#include <torch/library.h>

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

using Alloc = void* (*)(void* ctx, size_t index, int32_t dtype, size_t rank, const int64_t* dims);
using Adopt = int32_t (*)(void* ctx, size_t index, int32_t dtype, size_t rank, const int64_t* dims,
                          void* data, void* owner);
using Call = int32_t (*)(const char* kernel, const char* library, size_t n, const void* const* data,
                         const int32_t* dtypes, const size_t* ranks, const int64_t* const* dims,
                         void* ctx, Alloc alloc, Adopt adopt);
using Release = void (*)(void* owner);

struct KernelOp {
  std::string kernel;
  std::string library;  // empty: a shipped kernel
  py::object python_impl;
  // torch.library's autograd kernel of the op (from register_autograd), or None.
  py::object autograd_impl = py::none();
};

Call g_call = nullptr;
Release g_release = nullptr;

// Never destroyed: they hold Python objects, and destructors at exit run after Python's
// finalization, when a Python object may no longer be released.
std::unordered_map<std::string, KernelOp>& kernel_ops() {
  static auto* ops = new std::unordered_map<std::string, KernelOp>();
  return *ops;
}

std::vector<std::unique_ptr<torch::Library>>& libraries() {
  static auto* libs = new std::vector<std::unique_ptr<torch::Library>>();
  return *libs;
}

// Called from Rust: an exception must not unwind through it (an allocation that fails, a
// huge size, is null: the call then goes to the Python implementation, which raises).
void* alloc_output(void* ctx, size_t, int32_t dtype, size_t rank, const int64_t* dims) noexcept {
  try {
    auto* outs = static_cast<std::vector<at::Tensor>*>(ctx);
    outs->push_back(at::empty(c10::IntArrayRef(dims, rank),
                              at::TensorOptions().dtype(static_cast<c10::ScalarType>(dtype))));
    return outs->back().data_ptr();
  } catch (...) {
    return nullptr;
  }
}

// Called from Rust: the tensor over the runtime's buffer `data` owns `owner` (its deleter
// releases it); on failure `owner` is released here and nonzero returned.
int32_t adopt_output(void* ctx, size_t, int32_t dtype, size_t rank, const int64_t* dims, void* data,
                     void* owner) noexcept {
  try {
    auto* outs = static_cast<std::vector<at::Tensor>*>(ctx);
    outs->push_back(at::from_blob(
        data, c10::IntArrayRef(dims, rank), [owner](void*) { g_release(owner); },
        at::TensorOptions().dtype(static_cast<c10::ScalarType>(dtype))));
    return 0;
  } catch (...) {
    g_release(owner);
    return 1;
  }
}

// Calls the Python function `f` with `keys` first where given, then the op's arguments (a
// kernel op's schema takes tensors only), and returns the tensor or tuple of tensors it gives.
std::vector<at::Tensor> call_python(const py::object& f, std::optional<c10::DispatchKeySet> keys,
                                    c10::ArrayRef<c10::IValue> args) {
  py::gil_scoped_acquire gil;
  const size_t first = keys ? 1 : 0;
  py::tuple py_args(first + args.size());
  if (keys) py_args[0] = py::cast(*keys);
  for (size_t i = 0; i < args.size(); i++)
    py_args[first + i] = args[i].isTensor() ? py::cast(args[i].toTensor()) : py::none();
  py::object result = f(*py_args);
  std::vector<at::Tensor> outs;
  if (py::isinstance<py::tuple>(result)) {
    for (auto item : result) outs.push_back(item.cast<at::Tensor>());
  } else {
    outs.push_back(result.cast<at::Tensor>());
  }
  return outs;
}

void run_kernel_op(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& name = op.schema().name();
  const KernelOp& k = kernel_ops().at(name);
  const size_t n = op.schema().arguments().size();
  auto args = torch::jit::last(*stack, n);
  std::vector<at::Tensor> inputs;
  inputs.reserve(n);
  bool ours = g_call != nullptr;
  for (const auto& a : args) {
    if (!a.isTensor()) {
      ours = false;
      break;
    }
    at::Tensor t = a.toTensor();
    if (t.device().type() != c10::DeviceType::CPU) {
      ours = false;
      break;
    }
    inputs.push_back(t.is_contiguous() ? t : t.contiguous());
  }
  std::vector<at::Tensor> outputs;
  if (ours) {
    std::vector<const void*> data;
    std::vector<int32_t> dtypes;
    std::vector<size_t> ranks;
    std::vector<const int64_t*> dims;
    for (const auto& t : inputs) {
      data.push_back(t.data_ptr());
      dtypes.push_back(static_cast<int32_t>(t.scalar_type()));
      ranks.push_back(static_cast<size_t>(t.dim()));
      dims.push_back(t.sizes().data());
    }
    ours = g_call(k.kernel.c_str(), k.library.c_str(), inputs.size(), data.data(), dtypes.data(),
                  ranks.data(), dims.data(), &outputs, &alloc_output, &adopt_output) == 0;
  }
  if (!ours) outputs = call_python(k.python_impl, std::nullopt, args);
  torch::jit::drop(*stack, n);
  for (auto& t : outputs) torch::jit::push(*stack, std::move(t));
}

// Makes the boxed kernel the CPU implementation of `ns::name` (already defined), running
// kernel `kernel` of `library` ("" for a shipped kernel), else `python_impl`.
void register_cpu(const std::string& ns, const std::string& name, const std::string& kernel,
                  const std::string& library, py::object python_impl) {
  kernel_ops()[ns + "::" + name] = KernelOp{kernel, library, std::move(python_impl)};
  auto lib = std::make_unique<torch::Library>(torch::Library::IMPL, ns, c10::DispatchKey::CPU,
                                              __FILE__, __LINE__);
  lib->impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&run_kernel_op>());
  libraries().push_back(std::move(lib));
}

// A kernel op's autograd on CPU tensors. A call that needs no gradient (grad mode off, or no
// input requiring grad: most calls) goes straight to the CPU kernel below autograd, without
// Python; one that does runs torch.library's autograd kernel (the user's backward), as the
// Autograd registration this one takes precedence over would (a kernel registered for
// AutogradCPU wins over one for the Autograd alias).
void run_autograd(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size();
  bool needs_grad = false;
  if (c10::GradMode::is_enabled()) {
    for (const auto& a : torch::jit::last(*stack, n))
      needs_grad = needs_grad || (a.isTensor() && a.toTensor().requires_grad());
  }
  if (!needs_grad) {
    at::AutoDispatchBelowAutograd guard;
    op.redispatchBoxed(keys & c10::after_autograd_keyset, stack);
    return;
  }
  const KernelOp& k = kernel_ops().at(op.schema().name());
  auto outputs = call_python(k.autograd_impl, keys, torch::jit::last(*stack, n));
  torch::jit::drop(*stack, n);
  for (auto& t : outputs) torch::jit::push(*stack, std::move(t));
}

// Takes over `ns::name`'s autograd on CPU tensors (after register_cpu), calling
// `autograd_impl` (torch.library's, called as (keyset, *args)) when a gradient is needed.
void register_autograd_cpu(const std::string& ns, const std::string& name, py::object autograd_impl) {
  kernel_ops().at(ns + "::" + name).autograd_impl = std::move(autograd_impl);
  auto lib = std::make_unique<torch::Library>(torch::Library::IMPL, ns, c10::DispatchKey::AutogradCPU,
                                              __FILE__, __LINE__);
  lib->impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&run_autograd>());
  libraries().push_back(std::move(lib));
}

void set_call(uintptr_t call, uintptr_t release) {
  g_call = reinterpret_cast<Call>(call);
  g_release = reinterpret_cast<Release>(release);
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("set_call", &set_call);
  m.def("register_cpu", &register_cpu);
  m.def("register_autograd_cpu", &register_autograd_cpu);
}
