// The `tpu` device's dispatch in C++ (chosen with TESSERA_TORCH_DISPATCH=cpp): device tensors
// are plain torch tensors of PrivateUse1 (renamed `tpu`), and every ATen op on them reaches a
// boxed kernel here (the hottest ones an unboxed kernel: `kFastOps`), which calls Tessera's
// eager runtime (`tessera_device_call` in python/src/device_ffi.rs, reached through its
// address) without Python. The Python device
// (tessera/device) pays torch's `__torch_dispatch__` path, 6-8 us per op, before any work.
//
// Storage model: a storage's data pointer is a Cell holding one eager value (the runtime's
// tensor, or none yet: an `empty` storage reads as zeros); a tensor of another dtype over it
// (`view(dtype)`, torch's byte-wise storage copies) reads its bytes reinterpreted
// (device_ffi.rs `retype`). View ops are torch's own strided
// kernels over that storage, so sizes, strides, offsets and aliasing are torch's; an op reads
// a tensor through its metadata and an in-place op writes through it (device_ffi.rs).
// Ops Tessera does not lower run on torch CPU (`at::native::cpu_fallback`), counted and
// warned once per op.
#include <ATen/EmptyTensor.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_native.h>
#include <c10/util/SmallVector.h>
#include <c10/util/strides.h>
#include <torch/extension.h>
#include <torch/library.h>

#include <array>
#include <atomic>
#include <mutex>
#include <string>
#include <typeinfo>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace {

struct Value;  // the eager runtime's tensor (opaque)

// device_ffi.rs's DevArg.
struct DevArg {
  int32_t kind = 0;
  const char* name = nullptr;
  Value* value = nullptr;
  int32_t dtype = 0;
  size_t len = 0;
  const int64_t* ints = nullptr;
  const int64_t* strides = nullptr;
  int64_t i = 0;
  double f = 0;
  const double* floats = nullptr;
  const DevArg* items = nullptr;
  const char* text = nullptr;
};

enum Kind : int32_t {
  NONE = 0,
  TENSOR = 1,
  INT = 2,
  FLOAT = 3,
  BOOL = 4,
  INT_LIST = 5,
  FLOAT_LIST = 6,
  BOOL_LIST = 7,
  DTYPE = 8,
  STR = 9,
  TENSOR_LIST = 10,
  OPT_TENSOR_LIST = 11,
  OUT_LIST = 20,
};
enum Code : int32_t { OK = 0, FALLBACK = 1, ERROR = 2, MISS = 3 };

using Emit = void (*)(void*, int32_t, Value*, int32_t, size_t, const int64_t*, int64_t, double);
using Fail = void (*)(void*, const uint8_t*, size_t);
using Call = int32_t (*)(const void*, size_t, const DevArg*, const uint8_t*, void*, Emit, Fail);
using Upload = int32_t (*)(int32_t, size_t, const int64_t*, const void*, size_t, Value**, void*,
                           Fail);
using Read = int32_t (*)(const DevArg*, void*, size_t, void*, Fail);
using Write = int32_t (*)(const DevArg*, Value*, void*, Fail);
using Release = void (*)(Value*);
using AutogradThread = void (*)();
using Find = const void* (*)(const char*);  // an op's schema in Tessera's table, or null
using ValueOf = int32_t (*)(const DevArg*, Value**, void*, Fail);
// device_ffi.rs's shortcuts (see `Shortcut` below).
using FindShortcut = void* (*)(const void*, size_t, const DevArg*, int32_t*, size_t*, int64_t*);
using CallShortcut = int32_t (*)(const void*, size_t, const DevArg*, Value**, void*, Fail);
using FreeShortcut = void (*)(void*);

Call g_call = nullptr;
Upload g_upload = nullptr;
Read g_read = nullptr;
Write g_write = nullptr;
Release g_release = nullptr;
AutogradThread g_autograd_thread = nullptr;
Find g_find = nullptr;
ValueOf g_value = nullptr;
FindShortcut g_find_shortcut = nullptr;
CallShortcut g_call_shortcut = nullptr;
FreeShortcut g_free_shortcut = nullptr;

c10::Device tpu() { return c10::Device(c10::DeviceType::PrivateUse1, 0); }

// A storage's value; the cell is the storage's data pointer and its context.
struct Cell {
  Value* value = nullptr;
};

void delete_cell(void* p) {
  auto* c = static_cast<Cell*>(p);
  if (c->value != nullptr) g_release(c->value);
  delete c;
}

struct CellAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t) override {
    auto* c = new Cell();
    return {c, c, &delete_cell, tpu()};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void*, const void*, std::size_t) const override {
    TORCH_CHECK(false, "tpu: a device storage is not copied as bytes");
  }
};

CellAllocator g_alloc;

// What a call hands back: its results in order, or its error (inline up to a few results of
// rank 6: an op call allocates nothing here).
struct Out {
  int32_t kind;
  Value* value;
  int32_t dtype;
  c10::SmallVector<int64_t, 6> dims;
  int64_t i;
  double f;
};

struct Results {
  c10::SmallVector<Out, 2> outs;
  std::string error;
  ~Results() {
    for (auto& o : outs)
      if (o.value != nullptr) g_release(o.value);
  }
};

void emit(void* ctx, int32_t kind, Value* value, int32_t dtype, size_t rank, const int64_t* dims,
          int64_t i, double f) noexcept {
  try {
    Out o{kind, value, dtype, {}, i, f};
    o.dims.assign(dims, dims + rank);
    static_cast<Results*>(ctx)->outs.push_back(std::move(o));
  } catch (...) {
    g_release(value);
  }
}

void fail(void* ctx, const uint8_t* msg, size_t len) noexcept {
  try {
    static_cast<Results*>(ctx)->error.assign(reinterpret_cast<const char*>(msg), len);
  } catch (...) {
  }
}

bool is_tpu(const at::Tensor& t) { return t.device().type() == c10::DeviceType::PrivateUse1; }

Cell* cell_of(const at::Tensor& t) {
  const auto& dp = t.storage().data_ptr();
  TORCH_CHECK(dp.get_deleter() == &delete_cell,
              "tpu: a device tensor whose storage Tessera did not make (", t.sizes(), " ",
              t.scalar_type(), ", ", t.storage().nbytes(), " bytes",
              dp.get() == nullptr ? ", no memory" : "", ")");
  return static_cast<Cell*>(dp.get_context());
}

// Whether `t` is its whole storage, row-major from offset 0.
bool covers_storage(const at::Tensor& t) {
  return t.storage_offset() == 0 && t.is_contiguous() &&
         static_cast<size_t>(t.nbytes()) == t.storage().nbytes();
}

// The storage's value; an `empty` storage gets zeros first (of `t`'s shape where `t` covers
// it, so that reading `t` needs no view).
Value* value_of(const at::Tensor& t) {
  Cell* c = cell_of(t);
  if (c->value == nullptr) {
    Results r;
    std::vector<int64_t> dims{static_cast<int64_t>(t.storage().nbytes() / t.element_size())};
    if (covers_storage(t)) dims = t.sizes().vec();
    TORCH_CHECK(g_upload(static_cast<int32_t>(t.scalar_type()), dims.size(), dims.data(), nullptr,
                         0, &c->value, &r, &fail) == OK,
                r.error);
  }
  return c->value;
}

DevArg tensor_arg(const at::Tensor& t) {
  DevArg a;
  a.kind = TENSOR;
  a.value = value_of(t);
  a.dtype = static_cast<int32_t>(t.scalar_type());
  a.len = t.dim();
  a.ints = t.sizes().data();
  a.strides = t.strides().data();
  a.i = t.storage_offset();
  return a;
}

// A new value holding host tensor `host` (contiguous, of the device tensor's dtype).
Value* upload(const at::Tensor& host) {
  Value* v = nullptr;
  Results r;
  TORCH_CHECK(g_upload(static_cast<int32_t>(host.scalar_type()), host.dim(), host.sizes().data(),
                       host.data_ptr(), host.nbytes(), &v, &r, &fail) == OK,
              r.error);
  return v;
}

// Device tensor `t`'s elements (read through its metadata, row-major) into contiguous host
// tensor `host` of its sizes and dtype: a sync point.
void read_into(const at::Tensor& t, const at::Tensor& host) {
  Results r;
  DevArg a = tensor_arg(t);
  TORCH_CHECK(g_read(&a, host.data_ptr(), host.nbytes(), &r, &fail) == OK, r.error);
}

// A new device tensor over `value` (contiguous, of `dims`).
at::Tensor wrap(Value* value, int32_t dtype, c10::IntArrayRef dims) {
  auto type = static_cast<c10::ScalarType>(dtype);
  auto* c = new Cell{value};
  size_t nbytes = c10::multiply_integers(dims) * c10::elementSize(type);
  c10::Storage storage(c10::Storage::use_byte_size_t(), nbytes,
                       c10::DataPtr(c, c, &delete_cell, tpu()), &g_alloc, /*resizable=*/false);
  auto t = at::detail::make_tensor<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
      c10::scalarTypeToTypeMeta(type));
  t.unsafeGetTensorImpl()->set_sizes_contiguous(dims);
  return t;
}

// Fallbacks to torch CPU: counted per op (by overload name, `special_zeta`, as the Python
// device counts them), warned once each.
std::mutex g_fallback_lock;
std::unordered_map<std::string, int64_t>& fallback_counts() {
  static auto* counts = new std::unordered_map<std::string, int64_t>();
  return *counts;
}
std::unordered_set<std::string>& fallback_warned() {
  static auto* warned = new std::unordered_set<std::string>();
  return *warned;
}

void count_fallback(const std::string& op, const std::string& why) {
  bool first;
  {
    std::lock_guard<std::mutex> lock(g_fallback_lock);
    fallback_counts()[op.rfind("aten::", 0) == 0 ? op.substr(6) : op]++;
    first = fallback_warned().insert(op).second;
  }
  if (first) {
    TORCH_WARN("tessera: ", op,
               " runs on torch CPU (copies to and from the tpu device): ",
               why.substr(0, why.find('\n')));
  }
}

c10::TypeKind kind_of(const c10::Argument& spec) {
  c10::TypePtr t = spec.real_type();
  if (auto o = t->cast<c10::OptionalType>()) t = o->getElementType();
  return t->kind();
}

// What the boxed kernel needs of an op, computed once per op and thread.
struct OpInfo {
  std::string name;  // `aten::add.Tensor`
  const void* schema = nullptr;  // Tessera's (null: not in its op table)
  // Takes a generator: a random op, run on torch CPU so that torch's generator draws (as the
  // Python device does; Tessera's random ops take explicit seeds).
  bool random = false;
  // An arithmetic `.Scalar` overload whose `.Tensor` twin takes a complex number
  // (`complex_scalar_as_tensor`).
  bool arith_scalar = false;
};

const OpInfo& op_info(const c10::OperatorHandle& op) {
  thread_local std::unordered_map<const void*, OpInfo> infos;
  auto& info = infos[&op.schema()];
  if (info.name.empty()) {
    const auto& n = op.operator_name();
    info.name = n.name + (n.overload_name.empty() ? "" : "." + n.overload_name);
    info.schema = g_find(info.name.c_str());
    static const std::unordered_set<std::string> arith{
        "aten::add", "aten::add_", "aten::sub", "aten::sub_",
        "aten::mul", "aten::mul_", "aten::div", "aten::div_", "aten::rsub"};
    info.arith_scalar = n.overload_name == "Scalar" && arith.count(n.name) > 0;
    for (const auto& a : op.schema().arguments()) {
      info.random |= kind_of(a) == c10::TypeKind::GeneratorType;
    }
  }
  return info;
}

bool cpu_indices_ok(const std::string& name) {
  return name == "aten::index.Tensor" || name == "aten::index_put" ||
         name == "aten::index_put_" || name == "aten::_index_put_impl_";
}

// Everything the arguments point to while the call runs (reserved for one entry per
// argument at most, so the pointers into them stay valid).
struct Holder {
  Holder(size_t n, const c10::IValue* stack_args) : n(n), stack_args(stack_args) {}
  Holder(size_t n, const at::Tensor* const* tensors) : n(n), tensors(tensors) {}
  template <class T>
  T& add(std::vector<T>& v) {
    if (v.capacity() < n) v.reserve(n);
    return v.emplace_back();
  }
  // Whether a tensor argument, not a Python number, is float64 or complex128 (how a Python
  // complex number promotes).
  bool has_double() const {
    for (size_t i = 0; i < n; ++i) {
      if (stack_args != nullptr && !stack_args[i].isTensor()) continue;
      const auto& t = stack_args != nullptr ? stack_args[i].toTensor() : *tensors[i];
      if (!t.defined() || t.unsafeGetTensorImpl()->is_wrapped_number()) continue;
      if (t.scalar_type() == c10::kDouble || t.scalar_type() == c10::kComplexDouble) return true;
    }
    return false;
  }
  size_t n;
  // The op's n arguments: a boxed kernel's stack, or an unboxed kernel's tensors.
  const c10::IValue* stack_args = nullptr;
  const at::Tensor* const* tensors = nullptr;
  std::vector<std::vector<DevArg>> lists;
  std::vector<std::vector<int64_t>> ints;
  std::vector<std::vector<double>> floats;
  std::vector<at::Tensor> uploads;
};

// Runs runtime op `name` on device tensor `t` alone (read through its sizes, strides and
// offset; a conjugate or negative bit is not looked at) and returns its one result.
at::Tensor run_unary(const char* name, const at::Tensor& t) {
  DevArg a = tensor_arg(t);
  uint8_t written = 0;
  Results r;
  TORCH_CHECK(g_call(g_find(name), 1, &a, &written, &r, &emit, &fail) == OK, r.error);
  TORCH_CHECK(r.outs.size() == 1 && r.outs[0].kind == TENSOR, "tpu: ", name,
              " gave no tensor");
  Out& o = r.outs[0];
  auto out = wrap(o.value, o.dtype, o.dims);
  o.value = nullptr;
  return out;
}

// Whether `t` is one of torch's lazy views (`conj()` of a complex tensor, the negative view
// `conj().imag` makes): its storage holds the values before conjugation or negation, and
// torch lets such tensors reach backend kernels (copies, matmuls).
bool has_lazy_bits(const at::Tensor& t) { return t.is_conj() || t.is_neg(); }

// The values device tensor `t` reads, its lazy bits applied, as a plain device tensor.
at::Tensor resolved(const at::Tensor& t) {
  at::Tensor out = t;
  if (t.is_conj()) out = run_unary("aten::conj_physical", out);
  if (t.is_neg()) out = run_unary("aten::neg", out);
  return out;
}

// A tensor argument; a CPU tensor only where torch takes one with device tensors (a 0-dim
// scalar; the indices of `index`), uploaded. A lazy view is read resolved.
DevArg tensor_or_upload(const at::Tensor& t, const std::string& name, Holder& h) {
  if (is_tpu(t) && has_lazy_bits(t)) {
    h.uploads.push_back(resolved(t));
    return tensor_arg(h.uploads.back());
  }
  if (is_tpu(t)) return tensor_arg(t);
  TORCH_CHECK(t.device().is_cpu() && (t.dim() == 0 || cpu_indices_ok(name)),
              "Expected all tensors to be on the same device, but found at least two devices, ",
              tpu(), " and ", t.device(), "! (when checking arguments for ", name, ")");
  // A Python number is a wrapped 0-dim tensor (int64, float64, complex128) that promotes as
  // the default dtype of its kind (`int_tensor * 2.5` is float32). The runtime has no wrapped
  // numbers: a plain 0-dim tensor of that default dtype promotes the same (next to a float64
  // or complex128 tensor the number keeps its precision: it promotes the same there too).
  auto type = t.scalar_type();
  if (t.unsafeGetTensorImpl()->is_wrapped_number() &&
      (type == c10::kDouble || type == c10::kComplexDouble) && !h.has_double()) {
    auto d = c10::get_default_dtype_as_scalartype();
    type = type == c10::kDouble ? d : c10::toComplexType(d);
  }
  h.uploads.push_back(t.to(tpu(), type));
  return tensor_arg(h.uploads.back());
}

// Gives `self` the sizes `size` (contiguous); a storage too small is replaced by a new one
// when `self` holds nothing yet (an `out=` tensor of torch's CPU fallback, `empty(0)`).
void resize_to(const at::Tensor& self, c10::IntArrayRef size) {
  // torch's checks: no negative size, no byte count that overflows (from the storage offset).
  at::detail::check_size_nonnegative(size);
  size_t nbytes = at::detail::computeStorageNbytesContiguous(size, self.element_size(),
                                                             self.storage_offset());
  auto* impl = self.unsafeGetTensorImpl();
  if (nbytes > self.storage().nbytes()) {
    TORCH_CHECK(self.numel() == 0, "tpu: a device tensor is not resized beyond its storage (",
                self.sizes(), " to ", size, ")");
    impl->set_storage_keep_dtype(c10::Storage(c10::Storage::use_byte_size_t(), nbytes,
                                              &g_alloc, /*resizable=*/false));
    impl->set_storage_offset(0);
  }
  impl->set_sizes_contiguous(size);
}

// Converts stack value `v` of argument `spec`; false if the runtime takes no such value.
bool convert(const c10::IValue& v, const c10::Argument& spec, const std::string& name, DevArg& a,
             Holder& h) {
  if (v.isNone()) {
    a.kind = NONE;
  } else if (v.isTensor()) {
    const auto& t = v.toTensor();
    if (!t.defined()) {
      a.kind = NONE;
    } else {
      auto name_ = a.name;
      a = tensor_or_upload(t, name, h);
      a.name = name_;
    }
  } else if (v.isTensorList() || v.isOptionalTensorList()) {
    bool optional = v.isOptionalTensorList();
    auto& items = h.add(h.lists);
    if (optional) {
      for (const auto& x : v.toOptionalTensorList()) {
        std::optional<at::Tensor> o = x;
        items.push_back(o && o->defined() ? tensor_or_upload(*o, name, h) : DevArg{});
      }
    } else {
      for (const auto& x : v.toTensorList()) items.push_back(tensor_or_upload(x, name, h));
    }
    a.kind = optional ? OPT_TENSOR_LIST : TENSOR_LIST;
    a.items = items.data();
    a.len = items.size();
  } else if (v.isBool()) {
    a.kind = BOOL;
    a.i = v.toBool();
  } else if (v.isInt()) {
    switch (kind_of(spec)) {
      case c10::TypeKind::ScalarTypeType:
        a.kind = DTYPE;
        a.dtype = static_cast<int32_t>(v.toInt());
        break;
      case c10::TypeKind::LayoutType:
      case c10::TypeKind::MemoryFormatType:
        a.kind = NONE;  // dense, row-major: ignored, as the Python device does
        break;
      default:
        a.kind = INT;
        a.i = v.toInt();
    }
  } else if (v.isDouble()) {
    a.kind = FLOAT;
    a.f = v.toDouble();
  } else if (v.isIntList()) {
    auto& items = h.add(h.ints) = v.toIntVector();
    a.kind = INT_LIST;
    a.ints = items.data();
    a.len = items.size();
  } else if (v.isDoubleList()) {
    auto& items = h.add(h.floats) = v.toDoubleVector();
    a.kind = FLOAT_LIST;
    a.floats = items.data();
    a.len = items.size();
  } else if (v.isBoolList()) {
    auto& items = h.add(h.ints);
    for (bool b : v.toBoolList()) items.push_back(b);
    a.kind = BOOL_LIST;
    a.ints = items.data();
    a.len = items.size();
  } else if (v.isString()) {
    a.kind = STR;
    a.text = v.toStringRef().c_str();
  } else if (v.isDevice() || v.isGenerator()) {
    a.kind = NONE;
  } else {
    return false;  // a complex number, a storage, ...
  }
  return true;
}

// The argument a return aliases (in-place and `out=` overloads), or -1.
int written_argument(const c10::FunctionSchema& schema, const c10::Argument& ret) {
  const auto* r = ret.alias_info();
  if (r == nullptr || !r->isWrite()) return -1;
  const auto& args = schema.arguments();
  for (size_t j = 0; j < args.size(); ++j) {
    const auto* a = args[j].alias_info();
    if (a != nullptr && a->isWrite() && a->beforeSets() == r->beforeSets()) return j;
  }
  return -1;
}

void run_on_cpu(const c10::OperatorHandle& op, torch::jit::Stack* stack, const std::string& why) {
  count_fallback(op_info(op).name, why);
  at::native::cpu_fallback(op, stack);
}

// ATen ops dispatched here (`metrics()["ops"]`).
std::atomic<int64_t> g_ops{0};

// Arithmetic `.Scalar` overloads with a Python complex number (`grad * 1j` in the backward of
// `torch.polar`) run as their `.Tensor` twin with the number as a wrapped number, as torch's
// Python binding passes it (the runtime's scalars are real); false for any other call.
bool complex_scalar_as_tensor(const c10::OperatorHandle& op, const OpInfo& info,
                              torch::jit::Stack* stack, size_t base) {
  if (!info.arith_scalar) return false;
  auto& other = (*stack)[base + 1];
  if (!other.isComplexDouble()) return false;
  auto number = at::scalar_to_tensor(other.toScalar());
  number.unsafeGetTensorImpl()->set_wrapped_number(true);
  other = number;
  auto twin = c10::Dispatcher::singleton().findSchemaOrThrow(
      op.operator_name().name.c_str(), "Tensor");
  twin.callBoxed(stack);  // below autograd: nothing is recorded twice
  return true;
}

void tpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  g_ops.fetch_add(1, std::memory_order_relaxed);
  const auto& schema = op.schema();
  const auto& specs = schema.arguments();
  const OpInfo& info = op_info(op);
  const std::string& name = info.name;
  if (info.random) {
    return run_on_cpu(op, stack,
                      "Tessera draws random numbers from explicit seeds, torch from its generator");
  }
  size_t n = specs.size();
  size_t base = stack->size() - n;
  if (complex_scalar_as_tensor(op, info, stack, base)) return;
  if (info.schema == nullptr) return run_on_cpu(op, stack, "not in Tessera's op table");
  std::vector<DevArg> args(n);
  std::vector<uint8_t> written(n, 0);
  Holder h(n, &(*stack)[base]);
  // Arguments at their defaults are left out, as torch's Python dispatch leaves them out
  // (`alpha=1` of `add`): the runtime then takes the op's plain form.
  auto at_default = [&](size_t i) {
    const auto& d = specs[i].default_value();
    return d.has_value() && c10::_fastEqualsForContainer(*d, (*stack)[base + i]);
  };
  size_t given = 0;  // positional arguments up to the last one not at its default
  while (given < n && !specs[given].kwarg_only()) ++given;
  while (given > 0 && at_default(given - 1)) --given;
  size_t m = 0;
  for (size_t i = 0; i < n; ++i) {
    if (specs[i].kwarg_only() ? at_default(i) : i >= given) continue;
    DevArg& a = args[m];
    written[m] = specs[i].alias_info() != nullptr && specs[i].alias_info()->isWrite();
    const auto& v = (*stack)[base + i];
    TORCH_CHECK(!written[m] || !v.isTensor() || !has_lazy_bits(v.toTensor()), "tpu: ", name,
                " writes into a conjugate or negative view; resolve_conj()/resolve_neg() it "
                "first");
    if (specs[i].kwarg_only()) a.name = specs[i].name().c_str();
    if (!convert((*stack)[base + i], specs[i], name, a, h)) {
      return run_on_cpu(op, stack, "an argument Tessera does not take");
    }
    ++m;
  }
  Results r;
  int32_t code = g_call(info.schema, m, args.data(), written.data(), &r, &emit, &fail);
  if (code == FALLBACK) return run_on_cpu(op, stack, r.error);
  TORCH_CHECK(code == OK, r.error);

  std::vector<c10::IValue> inputs(stack->begin() + base, stack->end());
  torch::jit::drop(*stack, n);
  size_t k = 0;
  for (const auto& ret : schema.returns()) {
    TORCH_CHECK(k < r.outs.size(), "tpu: ", name, " gave fewer results than it returns");
    int j = written_argument(schema, ret);
    Out& o = r.outs[k++];
    if (o.kind == OUT_LIST) {
      std::vector<at::Tensor> ts;
      for (int64_t m = 0; m < o.i; ++m) {
        Out& x = r.outs[k++];
        ts.push_back(wrap(x.value, x.dtype, x.dims));
        x.value = nullptr;
      }
      if (j >= 0) {
        stack->push_back(inputs[j]);
      } else {
        stack->push_back(c10::IValue(ts));
      }
    } else if (j >= 0) {
      // Written already (the runtime's copy is released), unless it is an empty `out=`
      // tensor, which takes the result's size as torch resizes it.
      const auto& t = inputs[j].toTensor();
      if (o.kind == TENSOR && t.sizes() != c10::IntArrayRef(o.dims)) {
        TORCH_CHECK(t.numel() == 0, "tpu: ", name, " would resize its out= tensor from ",
                    t.sizes(), " to ", c10::IntArrayRef(o.dims),
                    "; a device tensor is not resized: pass one of the result's shape");
        resize_to(t, o.dims);
        cell_of(t)->value = o.value;
        o.value = nullptr;
      }
      stack->push_back(inputs[j]);
    } else if (o.kind == TENSOR) {
      stack->push_back(wrap(o.value, o.dtype, o.dims));
      o.value = nullptr;
    } else if (o.kind == INT) {
      stack->push_back(o.i);
    } else if (o.kind == BOOL) {
      stack->push_back(o.i != 0);
    } else if (o.kind == FLOAT) {
      stack->push_back(o.f);
    } else {
      stack->push_back(c10::IValue());
    }
  }
}

// Unboxed kernels of the hottest ops. A boxed kernel gets a stack of copies of its tensors,
// and torch keeps a tensor's Python object alive while C++ shares it (intrusive_ptr's
// kHasPyObject): each copy and its release take the GIL, which torch's binding has released
// (four GIL round trips for `a + b`). These take the tensors by reference, as torch's CPU
// kernels do; anything but the plain call goes through the boxed kernel.
constexpr const char* kFastOps[][2] = {
    {"aten::add", "Tensor"}, {"aten::sub", "Tensor"}, {"aten::mul", "Tensor"},
    {"aten::div", "Tensor"}, {"aten::neg", ""},       {"aten::exp", ""},
    {"aten::relu", ""},      {"aten::tanh", ""},      {"aten::sigmoid", ""},
    {"aten::rsqrt", ""},     {"aten::add_", "Tensor"}, {"aten::sub_", "Tensor"},
    {"aten::mul_", "Tensor"}, {"aten::div_", "Tensor"}, {"aten::abs", ""},
    {"aten::sqrt", ""},      {"aten::log", ""},        {"aten::sin", ""},
    {"aten::cos", ""},       {"aten::silu", ""},       {"aten::erf", ""},
    {"aten::reciprocal", ""}, {"aten::mm", ""},        {"aten::bmm", ""},
    {"aten::maximum", ""},   {"aten::minimum", ""},    {"aten::eq", "Tensor"},
    {"aten::ne", "Tensor"},  {"aten::lt", "Tensor"},   {"aten::le", "Tensor"},
    {"aten::gt", "Tensor"},  {"aten::ge", "Tensor"},   {"aten::pow", "Tensor_Tensor"},
    {"aten::where", "self"}, {"aten::eq", "Scalar"},   {"aten::ne", "Scalar"},
    {"aten::lt", "Scalar"},  {"aten::le", "Scalar"},   {"aten::gt", "Scalar"},
    {"aten::ge", "Scalar"},  {"aten::pow", "Tensor_Scalar"},
};

template <int I>
const c10::OperatorHandle& fast_handle() {
  static const c10::OperatorHandle h =
      c10::Dispatcher::singleton().findSchemaOrThrow(kFastOps[I][0], kFastOps[I][1]);
  return h;
}

// The boxed kernel's stack for op I: `tensors`, then the arguments `rest`.
template <size_t N, class... Rest>
torch::jit::Stack stack_of(const std::array<const at::Tensor*, N>& tensors, const Rest&... rest) {
  torch::jit::Stack stack;
  for (const auto* t : tensors) stack.emplace_back(*t);
  (stack.emplace_back(rest), ...);
  return stack;
}

// A real Scalar as the runtime takes it (as `convert` passes a stack's number).
DevArg scalar_arg(const c10::Scalar& v) {
  DevArg a;
  if (v.isBoolean()) {
    a.kind = BOOL;
    a.i = v.toBool();
  } else if (v.isIntegral(false)) {
    a.kind = INT;
    a.i = v.toLong();
  } else {
    a.kind = FLOAT;
    a.f = v.toDouble();
  }
  return a;
}

// A call site's shortcut (device_ffi.rs `tessera_device_shortcut`): the runtime's entry for
// the op on tensors of the types it last saw there, called while they keep those types. It
// skips the runtime's binding, memo lookup and result list (~0.1 us of ~1.1 us per deferred
// op). A site whose types keep changing backs off from making new ones.
template <size_t N>
struct Shortcut {
  void* handle = nullptr;
  std::array<c10::ScalarType, N> dtypes{};
  std::array<c10::SmallVector<int64_t, 6>, N> sizes;
  int32_t out_dtype = 0;
  c10::SmallVector<int64_t, 6> out_dims;
  int64_t uses = 0;
  int backoff = 0;

  ~Shortcut() { reset(); }
  void reset() {
    if (handle != nullptr) g_free_shortcut(handle);
    handle = nullptr;
  }
  // Whether `tensors` are device tensors of the shortcut's types, each its storage's whole
  // value (contiguous from offset 0; the runtime checks the stored values' types).
  bool matches(const std::array<const at::Tensor*, N>& tensors) const {
    if (handle == nullptr) return false;
    for (size_t i = 0; i < N; ++i) {
      const at::Tensor& t = *tensors[i];
      if (!is_tpu(t) || t.scalar_type() != dtypes[i] || t.sizes() != c10::IntArrayRef(sizes[i]) ||
          t.storage_offset() != 0 || !t.is_contiguous() || t.is_conj() || t.is_neg())
        return false;
    }
    return true;
  }
  // Calls it: the result, or an undefined tensor when it does not apply (`*error` set when
  // the op failed).
  at::Tensor call(const std::array<const at::Tensor*, N>& tensors, std::string* error) {
    std::array<DevArg, N> args;
    for (size_t i = 0; i < N; ++i) args[i] = tensor_arg(*tensors[i]);
    Value* v = nullptr;
    Results r;
    int32_t code = g_call_shortcut(handle, N, args.data(), &v, &r, &fail);
    if (code == OK) {
      ++uses;
      return wrap(v, out_dtype, out_dims);
    }
    if (code == ERROR) *error = r.error;
    // A site that alternates between types would make a shortcut per call: wait a while.
    if (uses < 4) backoff = 64;
    reset();
    return at::Tensor();
  }
  // After a general call on `tensors` (`args` as passed): a shortcut for the next calls.
  void make(const void* schema, const std::array<const at::Tensor*, N>& tensors,
            const DevArg* args) {
    if (backoff > 0) {
      --backoff;
      return;
    }
    if (handle != nullptr) {  // the types at this site changed
      bool churn = uses < 4;
      reset();
      if (churn) {
        backoff = 64;
        return;
      }
    }
    for (const auto* t : tensors)
      if (!is_tpu(*t) || t->is_conj() || t->is_neg()) return;
    std::array<int64_t, 8> dims{};
    size_t rank = 0;
    handle = g_find_shortcut(schema, N, args, &out_dtype, &rank, dims.data());
    if (handle == nullptr) {
      // Not an op a shortcut takes (or not memoized): asking again costs a lookup per call.
      backoff = 256;
      return;
    }
    out_dims.assign(dims.begin(), dims.begin() + rank);
    for (size_t i = 0; i < N; ++i) {
      dtypes[i] = tensors[i]->scalar_type();
      sizes[i].assign(tensors[i]->sizes().begin(), tensors[i]->sizes().end());
    }
    uses = 0;
  }
};

// Calls op I on `tensors` (its tensor arguments; `scalar`, when not null, its number after
// them; `rest`: its other arguments, for the boxed kernel's stack, which the runtime leaves
// out as at their defaults) and returns its one result; an in-place op (`InPlace`: it writes
// its first argument) returns nothing, its kernel returns the written tensor itself (a copy of
// it would cost what the boxed kernel does). A call that is not `plain` (an `alpha` other than
// 1, a complex number) takes the boxed kernel.
template <int I, bool InPlace, size_t N, class... Rest>
at::Tensor call_fast_with(const std::array<const at::Tensor*, N>& tensors,
                          const c10::Scalar* scalar, bool plain, const Rest&... rest) {
  const auto& op = fast_handle<I>();
  // op_info's map keeps its entries in place: found once per op and thread.
  thread_local const OpInfo* found = nullptr;
  if (found == nullptr) found = &op_info(op);
  const OpInfo& info = *found;
  auto boxed = [&](bool on_cpu, const std::string& why) {
    auto stack = stack_of(tensors, rest...);
    if (on_cpu) {
      run_on_cpu(op, &stack, why);
    } else {
      tpu_fallback(op, &stack);
    }
    return InPlace ? at::Tensor() : std::move(stack.back()).toTensor();
  };
  if (!plain || info.schema == nullptr) return boxed(false, "");
  g_ops.fetch_add(1, std::memory_order_relaxed);
  const at::Tensor& first = *tensors[0];
  TORCH_CHECK(!InPlace || !has_lazy_bits(first), "tpu: ", info.name,
              " writes into a conjugate or negative view; resolve_conj()/resolve_neg() it first");
  // Tensors alone (`rest` is at its defaults here), nothing written: a call site's
  // shortcut (one per kernel and thread).
  constexpr bool kShortcut = !InPlace;
  thread_local Shortcut<N> shortcut;
  if (kShortcut && scalar == nullptr && shortcut.matches(tensors)) {
    std::string error;
    at::Tensor out = shortcut.call(tensors, &error);
    TORCH_CHECK(error.empty(), error);
    if (out.defined()) return out;
  }
  std::array<DevArg, N + 1> args;
  std::array<uint8_t, N + 1> written{};
  written[0] = InPlace;
  Holder h(N, tensors.data());
  for (size_t i = 0; i < N; ++i) args[i] = tensor_or_upload(*tensors[i], info.name, h);
  size_t m = N;
  if (scalar != nullptr) args[m++] = scalar_arg(*scalar);
  Results r;
  int32_t code = g_call(info.schema, m, args.data(), written.data(), &r, &emit, &fail);
  if (code == FALLBACK) return boxed(true, r.error);
  TORCH_CHECK(code == OK, r.error);
  if (kShortcut && scalar == nullptr) shortcut.make(info.schema, tensors, args.data());
  TORCH_CHECK(r.outs.size() == 1 && r.outs[0].kind == TENSOR, "tpu: ", info.name,
              " gave no tensor");
  Out& o = r.outs[0];
  if (InPlace) {
    // Written already, as the boxed kernel's written arguments are.
    TORCH_CHECK(first.sizes() == c10::IntArrayRef(o.dims), "tpu: ", info.name,
                " would resize the tensor it writes from ", first.sizes(), " to ",
                c10::IntArrayRef(o.dims));
    return at::Tensor();
  }
  auto out = wrap(o.value, o.dtype, o.dims);
  o.value = nullptr;
  return out;
}

// Calls op I on its tensors alone (see call_fast_with).
template <int I, bool InPlace, size_t N>
at::Tensor call_fast(const std::array<const at::Tensor*, N>& tensors) {
  return call_fast_with<I, InPlace, N>(tensors, nullptr, true);
}

// Whether `alpha` is at its default (1), which the runtime leaves out as the boxed kernel does.
bool alpha_is_one(const c10::Scalar& alpha) {
  return alpha.isIntegral(false) && alpha.toLong() == 1;
}

template <int I>
at::Tensor fast_unary(const at::Tensor& self) {
  return call_fast<I, false, 1>({&self});
}

template <int I>
at::Tensor fast_binary(const at::Tensor& self, const at::Tensor& other) {
  return call_fast<I, false, 2>({&self, &other});
}

template <int I>
at::Tensor& fast_binary_(at::Tensor& self, const at::Tensor& other) {
  call_fast<I, true, 2>({&self, &other});
  return self;
}

template <int I>
at::Tensor fast_ternary(const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
  return call_fast<I, false, 3>({&a, &b, &c});
}

// A tensor and a real number (a complex one takes the boxed kernel, which runs it on CPU).
template <int I>
at::Tensor fast_tensor_scalar(const at::Tensor& self, const c10::Scalar& other) {
  return call_fast_with<I, false, 1>({&self}, &other, !other.isComplex(), other);
}

template <int I>
at::Tensor fast_binary_alpha(const at::Tensor& self, const at::Tensor& other,
                             const c10::Scalar& alpha) {
  return call_fast_with<I, false, 2>({&self, &other}, nullptr, alpha_is_one(alpha), alpha);
}

template <int I>
at::Tensor& fast_binary_alpha_(at::Tensor& self, const at::Tensor& other,
                               const c10::Scalar& alpha) {
  call_fast_with<I, true, 2>({&self, &other}, nullptr, alpha_is_one(alpha), alpha);
  return self;
}

// Dtypes the runtime has no type for, by their Python names (as the Python device says them).
void check_dtype(c10::ScalarType t) {
  const char* name = nullptr;
  switch (t) {
    case c10::ScalarType::ComplexHalf: name = "complex32"; break;
    case c10::ScalarType::QInt8: name = "qint8"; break;
    case c10::ScalarType::QUInt8: name = "quint8"; break;
    case c10::ScalarType::QInt32: name = "qint32"; break;
    case c10::ScalarType::QUInt4x2: name = "quint4x2"; break;
    case c10::ScalarType::QUInt2x4: name = "quint2x4"; break;
    default: return;
  }
  TORCH_CHECK_TYPE(false, "tpu: dtype torch.", name, " is not supported by Tessera");
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout>, std::optional<c10::Device>,
                               std::optional<bool>, std::optional<c10::MemoryFormat> format) {
  auto type = dtype.value_or(c10::get_default_dtype_as_scalartype());
  check_dtype(type);
  return at::detail::empty_generic(
      size, &g_alloc, c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), type, format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<c10::ScalarType> dtype, std::optional<c10::Layout>,
                         std::optional<c10::Device>, std::optional<bool>) {
  auto type = dtype.value_or(c10::get_default_dtype_as_scalartype());
  check_dtype(type);
  return at::detail::empty_strided_generic(
      size, stride, &g_alloc, c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), type);
}

// `dst.copy_(src)` where either is on the device.
// Lazy bits (`has_lazy_bits`): torch's copy_ leaves them to this kernel for a device it does
// not know, so a source is read resolved and a destination with bits stores the values that
// read back as the source's.
at::Tensor copy_from(const at::Tensor& src_, const at::Tensor& dst_, bool) {
  if (dst_.numel() == 0) return dst_;
  at::Tensor src = src_, dst = dst_;
  if (is_tpu(dst) && has_lazy_bits(dst)) {
    if (dst.is_conj()) {
      src = src.conj();
      dst = dst.conj();
    }
    if (dst.is_neg()) {
      src = src.neg();
      dst = dst._neg_view();
    }
  }
  if (is_tpu(dst) && !is_tpu(src)) {
    auto host = src.to(dst.scalar_type()).resolve_conj().resolve_neg();
    Value* v = upload(host.expand(dst.sizes()).contiguous());
    Cell* c = cell_of(dst);
    if (c->value == nullptr && covers_storage(dst)) {
      c->value = v;  // the whole storage: no zeros first
      return dst_;
    }
    Results r;
    DevArg a = tensor_arg(dst);
    TORCH_CHECK(g_write(&a, v, &r, &fail) == OK, r.error);
  } else if (is_tpu(src) && !is_tpu(dst)) {
    auto host = at::empty(src.sizes(), src.options().device(c10::kCPU));
    read_into(src, host);
    if (src.is_conj()) host = host.conj();  // raw storage values: the bits apply on the host
    if (src.is_neg()) host = host._neg_view();
    dst.copy_(host);
  } else {
    // Both on the device: the runtime's `copy_` (dtype conversion, broadcasting).
    static auto copy = c10::Dispatcher::singleton().findSchemaOrThrow("aten::copy_", "");
    torch::jit::Stack stack{dst, src, false};
    tpu_fallback(copy, &stack);
  }
  return dst_;
}

// `copy_` itself, not torch's composite: that one passes `_copy_from` through torch's
// conjugate fallback, which hands it a resolved clone of a conjugate destination (the write
// would be lost); here the lazy bits of both sides arrive as they are.
at::Tensor& copy_(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  if (!self.is_same(src)) copy_from(src, self, non_blocking);
  return self;
}

at::Tensor copy_from_and_resize(const at::Tensor& src, const at::Tensor& dst) {
  if (dst.sizes() != src.sizes()) resize_to(dst, src.sizes());
  return copy_from(src, dst, false);
}

// `fill_` of a tensor that covers its storage (what `ones`, `zeros_like`, `full` and autograd's
// initial gradient do after `empty`) gets a new value uploaded, not a program: on the CPU
// plugin a program that small runs on the calling thread, after whatever the device is still
// running (measured: a 1-element fill waited 2.6 ms for a training step's forward program).
at::Tensor& fill_scalar(at::Tensor& self, const c10::Scalar& value) {
  if (covers_storage(self) && self.numel() > 0) {
    Value* v = upload(at::full(self.sizes(), value, self.options().device(c10::kCPU)));
    Cell* c = cell_of(self);
    if (c->value != nullptr) g_release(c->value);
    c->value = v;
    return self;
  }
  static auto fill = c10::Dispatcher::singleton().findSchemaOrThrow("aten::fill_", "Scalar");
  torch::jit::Stack stack{self, value};
  tpu_fallback(fill, &stack);
  return self;
}

at::Tensor& zero_(at::Tensor& self) { return fill_scalar(self, 0); }

c10::Scalar local_scalar_dense(const at::Tensor& self) {
  TORCH_CHECK(self.numel() == 1, "a Tensor with ", self.numel(),
              " elements cannot be converted to Scalar");
  auto host = at::empty({}, self.options().device(c10::kCPU));
  read_into(self, host);
  return host.item();
}

const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<c10::MemoryFormat>) {
  resize_to(self, size);
  return self;
}

// `t.set_(storage, offset, size, stride)` over a device storage: torch.load rebuilds its
// tensors so, and torch's storage copies (`storage.cpu()`, deepcopy) view storages as bytes
// so (a storage used as another dtype is reinterpreted when read: device_ffi.rs `retype`).
at::Tensor& set_storage(at::Tensor& self, c10::Storage source, int64_t offset,
                        c10::IntArrayRef size, c10::IntArrayRef stride) {
  TORCH_CHECK(source.device().type() == c10::DeviceType::PrivateUse1,
              "Attempted to set the storage of a tensor on device \"", self.device(),
              "\" to a storage on different device \"", source.device(),
              "\".  This is no longer allowed; the devices must match.");
  TORCH_CHECK(offset >= 0, "Tensor: invalid storage offset ", offset);
  at::detail::check_size_nonnegative(size);
  c10::DimVector strides = stride.empty() ? c10::contiguous_strides(size)
                                          : c10::DimVector(stride.begin(), stride.end());
  TORCH_CHECK(strides.size() == size.size(), "set_: ", size.size(), " sizes but ",
              strides.size(), " strides");
  size_t needed = at::detail::computeStorageNbytes(size, strides, self.element_size(), offset);
  TORCH_CHECK(needed <= source.nbytes(), "setStorage: sizes ", size, ", strides ", strides,
              ", storage offset ", offset, ", and itemsize ", self.element_size(),
              " requiring a storage size of ", needed, " are out of bounds for storage of size ",
              source.nbytes());
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_storage_keep_dtype(std::move(source));
  impl->set_storage_offset(offset);
  impl->set_sizes_and_strides(size, strides);
  return self;
}

at::Tensor& set_whole_storage(at::Tensor& self, c10::Storage source) {
  int64_t n = static_cast<int64_t>(source.nbytes() / self.element_size());
  return set_storage(self, std::move(source), 0, {n}, {});
}

at::Tensor& set_tensor(at::Tensor& self, const at::Tensor& source) {
  if (self.is_same(source)) return self;
  return set_storage(self, source.storage(), source.storage_offset(), source.sizes(),
                     source.strides());
}

// The device guard: one device, one stream (the Python backend's guard costs a call into
// Python at every guard an op takes).
struct Guard final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return c10::DeviceType::PrivateUse1; }
  c10::Device exchangeDevice(c10::Device) const override { return tpu(); }
  c10::Device getDevice() const override { return tpu(); }
  // Autograd's engine sets the device once, when its device thread starts (ops take guards
  // through exchangeDevice): that thread does not defer.
  void setDevice(c10::Device) const override { g_autograd_thread(); }
  void uncheckedSetDevice(c10::Device) const noexcept override {}
  c10::Stream getStream(c10::Device) const noexcept override {
    return c10::Stream(c10::Stream::DEFAULT, tpu());
  }
  c10::Stream exchangeStream(c10::Stream) const noexcept override {
    return c10::Stream(c10::Stream::DEFAULT, tpu());
  }
  c10::DeviceIndex deviceCount() const noexcept override { return 1; }
  void record(void**, const c10::Stream&, const c10::DeviceIndex, const c10::EventFlag)
      const override {}
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  void destroyEvent(void*, const c10::DeviceIndex) const noexcept override {}
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream&) const override {}
};

// Whether `from`'s data may be given to `self` in place (`param.data = t`): as torch answers
// for CPU and CUDA, plain tensors of the CPU and this device are compatible, so that
// `model.to("tpu")` keeps each parameter's identity (optimizers built before the move, tied
// weights) instead of replacing it with a new Parameter.
bool compatible_shallow_copy(const at::Tensor& self, const at::Tensor& from) {
  auto plain = [](const at::Tensor& t) {
    return typeid(*t.unsafeGetTensorImpl()) == typeid(c10::TensorImpl) &&
           t.layout() == c10::kStrided && (t.device().is_cpu() || is_tpu(t)) &&
           !t.key_set().has(c10::DispatchKey::Python);
  };
  return (plain(self) && plain(from)) ||
         self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set());
}

// Ops whose kernel for every backend is a composite get the boxed kernel registered directly
// (unless they have a kernel of their own below), so that the runtime gets the op itself:
// - structured ops (`add.Tensor`, `mul_`): their default kernel computes the result's
//   metadata with a TensorIterator, allocates it and calls the `out=` overload;
// - composites of ops Tessera lowers (`convolution`: its composite calls
//   `convolution_overrideable` off CPU and CUDA), except views and in-place views (torch's
//   strided composites keep the aliasing) and ops taking a device (moves and factories keep
//   torch's kernels).
std::vector<std::unique_ptr<torch::Library>> g_libraries;

bool takes_the_op_itself(const c10::OperatorHandle& op, const std::string& name) {
  using c10::DispatchKey;
  // `copy` takes a source on any device (its composite reaches `copy_` below).
  if (name == "aten::copy") return false;
  if (op.hasKernelForDispatchKey(DispatchKey::PrivateUse1)) return false;
  // In-place views (`squeeze_`, `t_`, `as_strided_`) change the tensor's own metadata only:
  // torch's strided composites do that (FunctionalTensor runs them on its wrappers, whose
  // storages hold no value, when torch.compile traces a model on the device).
  if (op.hasTag(at::Tag::inplace_view)) return false;
  if (op.hasKernelForDispatchKey(DispatchKey::CompositeExplicitAutogradNonFunctional)) return true;
  if (!op.hasKernelForDispatchKey(DispatchKey::CompositeExplicitAutograd) ||
      g_find(name.c_str()) == nullptr)
    return false;
  const auto& schema = op.schema();
  for (const auto& r : schema.returns()) {
    if (r.alias_info() != nullptr && !r.alias_info()->isWrite()) return false;
  }
  for (const auto& a : schema.arguments()) {
    if (kind_of(a) == c10::TypeKind::DeviceObjType) return false;
  }
  return true;
}

void register_direct_ops() {
  auto lib = std::make_unique<torch::Library>(torch::Library::IMPL, "aten",
                                              c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  auto& d = c10::Dispatcher::singleton();
  for (const auto& name : d.getAllOpNames()) {
    if (name.name.rfind("aten::", 0) != 0) continue;
    auto op = d.findOp(name);
    std::string full = name.name;
    if (!name.overload_name.empty()) full += "." + name.overload_name;
    if (!op || !takes_the_op_itself(*op, full)) continue;
    lib->impl(full.substr(6).c_str(),
              torch::CppFunction::makeFromBoxedFunction<&tpu_fallback>());
  }
  g_libraries.push_back(std::move(lib));
}

// Registers `kernel` for op I under the name kFastOps gives it (`abs`, `add.Tensor`).
template <int I, class Kernel>
void fast_impl(torch::Library& m, Kernel* kernel) {
  std::string name = std::string(kFastOps[I][0]).substr(6);  // without `aten::`
  if (*kFastOps[I][1] != '\0') name += std::string(".") + kFastOps[I][1];
  m.impl(name.c_str(), kernel);
}

}  // namespace

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&tpu_fallback>());
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", &empty_memory_format);
  m.impl("empty_strided", &empty_strided);
  m.impl("as_strided", &at::native::as_strided_tensorimpl);
  m.impl("view", &at::native::view);
  m.impl("_reshape_alias", &at::native::_reshape_alias);
  m.impl("unfold", &at::native::unfold);
  m.impl("copy_", &copy_);
  m.impl("_copy_from", &copy_from);
  m.impl("_copy_from_and_resize", &copy_from_and_resize);
  m.impl("_local_scalar_dense", &local_scalar_dense);
  m.impl("fill_.Scalar", &fill_scalar);
  m.impl("zero_", &zero_);
  m.impl("resize_", &resize_);
  m.impl("set_.source_Storage_storage_offset", &set_storage);
  m.impl("set_.source_Storage", &set_whole_storage);
  m.impl("set_.source_Tensor", &set_tensor);
  m.impl("_has_compatible_shallow_copy_type", &compatible_shallow_copy);
  fast_impl<0>(m, &fast_binary_alpha<0>);  // add.Tensor
  fast_impl<1>(m, &fast_binary_alpha<1>);  // sub.Tensor
  fast_impl<2>(m, &fast_binary<2>);  // mul.Tensor
  fast_impl<3>(m, &fast_binary<3>);  // div.Tensor
  fast_impl<4>(m, &fast_unary<4>);  // neg
  fast_impl<5>(m, &fast_unary<5>);  // exp
  fast_impl<6>(m, &fast_unary<6>);  // relu
  fast_impl<7>(m, &fast_unary<7>);  // tanh
  fast_impl<8>(m, &fast_unary<8>);  // sigmoid
  fast_impl<9>(m, &fast_unary<9>);  // rsqrt
  fast_impl<10>(m, &fast_binary_alpha_<10>);  // add_.Tensor
  fast_impl<11>(m, &fast_binary_alpha_<11>);  // sub_.Tensor
  fast_impl<12>(m, &fast_binary_<12>);  // mul_.Tensor
  fast_impl<13>(m, &fast_binary_<13>);  // div_.Tensor
  fast_impl<14>(m, &fast_unary<14>);  // abs
  fast_impl<15>(m, &fast_unary<15>);  // sqrt
  fast_impl<16>(m, &fast_unary<16>);  // log
  fast_impl<17>(m, &fast_unary<17>);  // sin
  fast_impl<18>(m, &fast_unary<18>);  // cos
  fast_impl<19>(m, &fast_unary<19>);  // silu
  fast_impl<20>(m, &fast_unary<20>);  // erf
  fast_impl<21>(m, &fast_unary<21>);  // reciprocal
  fast_impl<22>(m, &fast_binary<22>);  // mm
  fast_impl<23>(m, &fast_binary<23>);  // bmm
  fast_impl<24>(m, &fast_binary<24>);  // maximum
  fast_impl<25>(m, &fast_binary<25>);  // minimum
  fast_impl<26>(m, &fast_binary<26>);  // eq.Tensor
  fast_impl<27>(m, &fast_binary<27>);  // ne.Tensor
  fast_impl<28>(m, &fast_binary<28>);  // lt.Tensor
  fast_impl<29>(m, &fast_binary<29>);  // le.Tensor
  fast_impl<30>(m, &fast_binary<30>);  // gt.Tensor
  fast_impl<31>(m, &fast_binary<31>);  // ge.Tensor
  fast_impl<32>(m, &fast_binary<32>);  // pow.Tensor_Tensor
  fast_impl<33>(m, &fast_ternary<33>);  // where.self
  fast_impl<34>(m, &fast_tensor_scalar<34>);  // eq.Scalar
  fast_impl<35>(m, &fast_tensor_scalar<35>);  // ne.Scalar
  fast_impl<36>(m, &fast_tensor_scalar<36>);  // lt.Scalar
  fast_impl<37>(m, &fast_tensor_scalar<37>);  // le.Scalar
  fast_impl<38>(m, &fast_tensor_scalar<38>);  // gt.Scalar
  fast_impl<39>(m, &fast_tensor_scalar<39>);  // ge.Scalar
  fast_impl<40>(m, &fast_tensor_scalar<40>);  // pow.Tensor_Scalar
}

// Autograd's key comes first for tensors outside inference mode.
TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", &compatible_shallow_copy);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("set_calls", [](uintptr_t call, uintptr_t upload, uintptr_t read, uintptr_t write,
                        uintptr_t release, uintptr_t autograd_thread, uintptr_t find,
                        uintptr_t value, uintptr_t find_shortcut, uintptr_t call_shortcut,
                        uintptr_t free_shortcut) {
    g_call = reinterpret_cast<Call>(call);
    g_upload = reinterpret_cast<Upload>(upload);
    g_read = reinterpret_cast<Read>(read);
    g_write = reinterpret_cast<Write>(write);
    g_release = reinterpret_cast<Release>(release);
    g_autograd_thread = reinterpret_cast<AutogradThread>(autograd_thread);
    g_find = reinterpret_cast<Find>(find);
    g_value = reinterpret_cast<ValueOf>(value);
    g_find_shortcut = reinterpret_cast<FindShortcut>(find_shortcut);
    g_call_shortcut = reinterpret_cast<CallShortcut>(call_shortcut);
    g_free_shortcut = reinterpret_cast<FreeShortcut>(free_shortcut);
    static c10::impl::DeviceGuardImplRegistrar guard(c10::DeviceType::PrivateUse1, new Guard());
    // Storages torch makes for the device by itself (not through the kernels below) are cells
    // too.
    c10::SetAllocator(c10::DeviceType::PrivateUse1, &g_alloc);
    static bool registered = (register_direct_ops(), true);
    (void)registered;
  });
  // torch.compile's programs: device tensors' values (raw, for `_native.eager_from_raws`), or
  // None when one of them is no device tensor; and new device tensors over raw values (from
  // `_native.eager_into_raws`). Lists: a program passes dozens of tensors each way per call.
  m.def("values", [](const std::vector<at::Tensor>& ts) -> std::optional<std::vector<uintptr_t>> {
    for (const auto& t : ts) {
      if (!is_tpu(t)) return std::nullopt;
    }
    std::vector<uintptr_t> out;
    out.reserve(ts.size());
    for (const auto& t : ts) {
      DevArg a = tensor_arg(t);
      Value* v = nullptr;
      Results r;
      TORCH_CHECK(g_value(&a, &v, &r, &fail) == OK, r.error);
      out.push_back(reinterpret_cast<uintptr_t>(v));
    }
    return out;
  });
  m.def("wrap_all",
        [](const std::vector<std::tuple<uintptr_t, int32_t, std::vector<int64_t>>>& values) {
          std::vector<at::Tensor> out;
          out.reserve(values.size());
          for (const auto& [value, dtype, dims] : values) {
            out.push_back(wrap(reinterpret_cast<Value*>(value), dtype, dims));
          }
          return out;
        });
  m.def("fallbacks", [] {
    std::lock_guard<std::mutex> lock(g_fallback_lock);
    return fallback_counts();
  });
  m.def("ops", [] { return g_ops.load(); });
  m.def("reset_counts", [] {
    std::lock_guard<std::mutex> lock(g_fallback_lock);
    fallback_counts().clear();
    g_ops = 0;
  });
  m.def("reset_warnings", [] {
    std::lock_guard<std::mutex> lock(g_fallback_lock);
    fallback_warned().clear();
  });
}
