// splitkv._splitkv: the torch-free binding of splitkv's public API (nanobind).
//
// Tensors cross this boundary as plain descriptors: a tuple (data pointer as int, DType code,
// shape, strides in elements), or None for an absent optional tensor. Building one from a torch
// tensor costs a few attribute reads in Python; importing it through DLPack would cost several
// times more per tensor (docs/PYTHON.md has the measurement). Device memory is never touched
// here: run_decode/run_prefill forward to the C++ entry points, which launch on the given stream
// and return at once.
//
// Host memory (numpy arrays, CPU tensors) goes to the CPU backend (cpu_run_decode) or the fp64
// reference (reference_decode/reference_prefill), which validate like the GPU entry points and
// additionally check lengths, page ids and offsets on the host. Quantized KV caches take their
// scales in k_scales / v_scales (INT4 code descriptors count nibbles, as TensorRef does);
// quantize_cache / dequantize_cache expose the host quantizer (src/quant/kv_quant_host.*).
//
// A failed Status raises splitkv.InvalidArgumentError (a ValueError), UnsupportedError (a
// NotImplementedError), WorkspaceTooSmallError (a ValueError), CudaError or NoDeviceError (both
// RuntimeError), with the C++ message unchanged and the offending argument in `.argument`.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "validate/tensor_checks.hpp"
#include "validate/validate.hpp"
#include "common/formats.hpp"
#include "common/host_tensor.hpp"
#include "common/parallel_for.hpp"
#include "cpu/cpu_backend.hpp"
#include "plan/plan_options_table.hpp"
#include "quant/kv_quant_host.hpp"
#include "quant/kv_quant_kc.hpp"
#include "quant/kv_rows.hpp"
#include "reference/reference.hpp"
#include "splitkv/splitkv.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace splitkv::python {
namespace {

// ---- errors ------------------------------------------------------------------------------------

PyObject* g_error_types[6] = {};  // indexed by StatusCode

PyObject* error_type(StatusCode code) {
  const int i = static_cast<int>(code);
  if (i <= 0 || i >= 6 || g_error_types[i] == nullptr) return PyExc_RuntimeError;
  return g_error_types[i];
}

void check(const Status& status) {
  if (!status.ok()) throw Error(status);
}

void translate_error(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const Error& e) {
    PyObject* type = error_type(e.status().code());
    nb::object instance = nb::steal(PyObject_CallFunction(type, "s", e.what()));
    if (!instance.is_valid()) return;  // the call set a Python error already
    nb::setattr(instance, "argument", nb::str(e.status().argument().c_str()));
    nb::setattr(instance, "code", nb::str(to_string(e.status().code())));
    PyErr_SetObject(type, instance.ptr());
  }
}

// ---- tensor descriptors ------------------------------------------------------------------------

int64_t as_int64(PyObject* o, const char* what) {
  const long long v = PyLong_AsLongLong(o);
  if (v == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    throw nb::type_error((std::string("splitkv: ") + what + ": expected an int").c_str());
  }
  return v;
}

// Reads up to TensorRef::kMaxRank ints of a tuple (fast path) or any sequence into `dst`.
int read_dims(nb::handle seq, std::array<int64_t, TensorRef::kMaxRank>& dst, const char* name, const char* what) {
  PyObject* o = seq.ptr();
  const bool tuple = PyTuple_Check(o);
  const Py_ssize_t n = tuple ? PyTuple_Size(o) : PySequence_Size(o);
  if (n < 0) {
    PyErr_Clear();
    throw nb::type_error((std::string("splitkv: ") + name + "." + what + ": expected a sequence of ints").c_str());
  }
  if (n > TensorRef::kMaxRank) {
    // A rank the API never takes: report it through the C++ validation's wording.
    return static_cast<int>(n);
  }
  for (Py_ssize_t i = 0; i < n; ++i) {
    nb::object item;
    PyObject* value;
    if (tuple) {
      value = PyTuple_GetItem(o, i);  // borrowed
    } else {
      item = nb::steal(PySequence_GetItem(o, i));
      if (!item.is_valid()) throw nb::python_error();
      value = item.ptr();
    }
    const long long v = PyLong_AsLongLong(value);
    if (v == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      throw nb::type_error((std::string("splitkv: ") + name + "." + what + ": expected a sequence of ints").c_str());
    }
    dst[i] = v;
  }
  return static_cast<int>(n);
}

constexpr int kNumDTypes = 8;  // DType::kF16 .. DType::kI64

// (ptr, dtype, shape, strides) -> TensorRef; None -> an empty TensorRef (an absent optional).
// strides None: row-major (contiguous) strides of the shape. The torch front sends None for
// contiguous tensors: t.is_contiguous() costs about half of t.stride() per call.
TensorRef tensor_ref(nb::handle desc, const char* name) {
  TensorRef t;
  if (desc.is_none()) return t;
  PyObject* o = desc.ptr();
  if (!PyTuple_Check(o) || PyTuple_Size(o) != 4) {
    throw nb::type_error(("splitkv: " + std::string(name) +
                          ": expected a descriptor (data_ptr, dtype, shape, strides) or None").c_str());
  }
  t.data = reinterpret_cast<void*>(static_cast<uintptr_t>(as_int64(PyTuple_GetItem(o, 0), "data_ptr")));
  const int64_t code = as_int64(PyTuple_GetItem(o, 1), "dtype");
  if (code < 0 || code >= kNumDTypes) {
    throw nb::value_error(("splitkv: invalid argument '" + std::string(name) + ".dtype': expected a splitkv.DType code, got " +
                           std::to_string(code)).c_str());
  }
  t.dtype = static_cast<DType>(code);
  std::array<int64_t, TensorRef::kMaxRank> shape{}, stride{};
  const int rank = read_dims(nb::handle(PyTuple_GetItem(o, 2)), shape, name, "shape");
  nb::handle strides(PyTuple_GetItem(o, 3));
  int stride_rank = rank;
  if (strides.is_none()) {
    int64_t step = 1;
    for (int i = std::min(rank, TensorRef::kMaxRank) - 1; i >= 0; --i) {
      stride[size_t(i)] = step;
      step *= std::max<int64_t>(shape[size_t(i)], 1);
    }
  } else {
    stride_rank = read_dims(strides, stride, name, "stride");
  }
  if (rank > TensorRef::kMaxRank || stride_rank != rank) {
    t.rank = -1;  // validation reports "<name>.rank: expected N, got -1"
    return t;
  }
  t.rank = rank;
  t.shape = shape;
  t.stride = stride;
  return t;
}

DecodeTensors decode_tensors(nb::handle q, nb::handle k, nb::handle v, nb::handle seq_lens, nb::handle block_table,
                             nb::handle out, nb::handle lse, nb::handle k_scales, nb::handle v_scales) {
  DecodeTensors t;
  t.q = tensor_ref(q, "q");
  t.k = tensor_ref(k, "k");
  t.v = tensor_ref(v, "v");
  t.seq_lens = tensor_ref(seq_lens, "seq_lens");
  t.block_table = tensor_ref(block_table, "block_table");
  t.out = tensor_ref(out, "out");
  t.lse = tensor_ref(lse, "lse");
  t.k_scales = tensor_ref(k_scales, "k_scales");
  t.v_scales = tensor_ref(v_scales, "v_scales");
  return t;
}

// A shard of a longer context (docs/CONTEXT_SHARDS.md): keys after it, and partial outputs.
void add_shard_tensors(nb::handle keys_after, nb::handle partial_o, nb::handle partial_lse, DecodeTensors* t) {
  t->keys_after = tensor_ref(keys_after, "keys_after");
  t->partial_o = tensor_ref(partial_o, "partial_o");
  t->partial_lse = tensor_ref(partial_lse, "partial_lse");
}

PrefillTensors prefill_tensors(nb::handle q, nb::handle k, nb::handle v, nb::handle cu_seqlens_q,
                               nb::handle cu_seqlens_k, nb::handle out, nb::handle lse) {
  PrefillTensors t;
  t.q = tensor_ref(q, "q");
  t.k = tensor_ref(k, "k");
  t.v = tensor_ref(v, "v");
  t.cu_seqlens_q = tensor_ref(cu_seqlens_q, "cu_seqlens_q");
  t.cu_seqlens_k = tensor_ref(cu_seqlens_k, "cu_seqlens_k");
  t.out = tensor_ref(out, "out");
  t.lse = tensor_ref(lse, "lse");
  return t;
}

// Chunked prefill over a KV cache (PrefillProblem::kv_cache): the cache's lengths, block table,
// scales and *_kc tail, as decode takes them.
void add_cache_tensors(nb::handle seq_lens, nb::handle block_table, nb::handle k_scales, nb::handle v_scales,
                       nb::handle k_tail, nb::handle tail_slots, PrefillTensors* t) {
  t->seq_lens = tensor_ref(seq_lens, "seq_lens");
  t->block_table = tensor_ref(block_table, "block_table");
  t->k_scales = tensor_ref(k_scales, "k_scales");
  t->v_scales = tensor_ref(v_scales, "v_scales");
  t->k_tail = tensor_ref(k_tail, "k_tail");
  t->tail_slots = tensor_ref(tail_slots, "tail_slots");
}

// Host copies of the int32 index tensors, for the host-side checks of the CPU paths. Only dense
// 1-d tensors qualify (the C++ checks index them densely); the block table's row stride is read.
const int32_t* host_int32(const TensorRef& t) {
  if (t.data == nullptr || t.dtype != DType::kI32 || t.rank < 1 || t.stride[t.rank - 1] != 1) return nullptr;
  return static_cast<const int32_t*>(t.data);
}

// ---- the host quantizer ------------------------------------------------------------------------------

Status check_rank4(const TensorRef& t, const std::string& name) {
  if (t.data == nullptr) return Status::invalid(name + ".data", "a non-null pointer", "nullptr");
  if (t.rank != 4) return Status::invalid(name + ".rank", "4 ([blocks, slots, Hkv, D])", std::to_string(t.rank));
  return Status::success();
}

// A K or V cache of one quantized element type and its scales, checked for the host quantizer:
// values [blocks, slots, Hkv, D] (fp16/bf16/fp32), codes of the same shape (FP8 / INT8 bytes, INT4
// nibbles: the descriptor counts elements), scales fp32 [Hkv] (FP8) or fp16 pairs [blocks, Hkv, slots, 2].
Status check_host_cache(const TensorRef& values, const std::string& values_name, bool values_out,
                        const TensorRef& codes, const std::string& codes_name, const TensorRef& scales,
                        const std::string& scales_name) {
  if (Status s = check_rank4(values, values_name); !s) return s;
  const bool float_type = values.dtype == DType::kF32 || (!values_out && (values.dtype == DType::kF16 ||
                                                                          values.dtype == DType::kBF16));
  if (!float_type) {
    return Status::invalid(values_name + ".dtype", values_out ? "fp32" : "fp16, bf16 or fp32", to_string(values.dtype));
  }
  if (Status s = check_rank4(codes, codes_name); !s) return s;
  if (codes.dtype != DType::kFP8E4M3 && codes.dtype != DType::kI8 && codes.dtype != DType::kI4) {
    return Status::invalid(codes_name + ".dtype", "fp8_e4m3, int8 or int4 codes", to_string(codes.dtype));
  }
  for (int i = 0; i < 4; ++i) {
    if (codes.shape[i] != values.shape[i]) {
      return Status::invalid(codes_name + ".shape[" + std::to_string(i) + "]", std::to_string(values.shape[i]) +
                                 " (the shape of " + values_name + ")", std::to_string(codes.shape[i]));
    }
    if (codes.stride[i] < 0 || values.stride[i] < 0) {
      return Status::invalid((codes.stride[i] < 0 ? codes_name : values_name) + ".stride[" + std::to_string(i) + "]",
                             ">= 0", std::to_string(std::min(codes.stride[i], values.stride[i])));
    }
  }
  const int64_t d = codes.shape[3];
  if (d < 1) return Status::invalid(codes_name + ".shape[3]", ">= 1", std::to_string(d));
  if (codes.stride[3] != 1 && d > 1) {
    return Status::invalid(codes_name + ".stride[3]", "1 (the codes of a row are contiguous)",
                           std::to_string(codes.stride[3]));
  }
  const int64_t hkv = codes.shape[2];
  if (codes.dtype == DType::kFP8E4M3) {
    if (scales.data == nullptr) return Status::invalid(scales_name + ".data", "a non-null pointer", "nullptr");
    if (scales.dtype != DType::kF32) return Status::invalid(scales_name + ".dtype", "fp32", to_string(scales.dtype));
    if (scales.rank != 1 || scales.shape[0] != hkv) {
      return Status::invalid(scales_name + ".shape", "[" + std::to_string(hkv) + "] (one scale per KV head)",
                             "rank " + std::to_string(scales.rank) + ", size " + std::to_string(scales.shape[0]));
    }
    for (int64_t h = 0; h < hkv; ++h) {
      const float scale = static_cast<const float*>(scales.data)[h * scales.stride[0]];
      if (!quant::check_fp8_row(static_cast<int>(d), scale)) {
        return Status::invalid(scales_name + "[" + std::to_string(h) + "]", "a positive finite scale",
                               std::to_string(scale));
      }
    }
    return Status::success();
  }
  const int bits = codes.dtype == DType::kI4 ? 4 : 8;
  if (Status s = quant::check_int_row(static_cast<int>(d), bits); !s) {
    return Status::invalid(codes_name + ".shape[3]",
                           bits == 4 ? "an even head dim (INT4 packs two codes a byte)" : ">= 1", std::to_string(d));
  }
  if (bits == 4) {
    for (int i = 0; i < 3; ++i) {
      if (codes.stride[i] % 2 != 0) {
        return Status::invalid(codes_name + ".stride[" + std::to_string(i) + "]",
                               "an even stride in nibbles (INT4 rows start on a byte)",
                               std::to_string(codes.stride[i]));
      }
    }
  }
  if (scales.data == nullptr) return Status::invalid(scales_name + ".data", "a non-null pointer", "nullptr");
  if (scales.dtype != DType::kF16) return Status::invalid(scales_name + ".dtype", "fp16", to_string(scales.dtype));
  const int64_t want[4] = {codes.shape[0], hkv, codes.shape[1], 2};
  if (scales.rank != 4) return Status::invalid(scales_name + ".rank", "4", std::to_string(scales.rank));
  for (int i = 0; i < 4; ++i) {
    if (scales.shape[i] != want[i]) {
      return Status::invalid(scales_name + ".shape[" + std::to_string(i) + "]", std::to_string(want[i]),
                             std::to_string(scales.shape[i]));
    }
    if (scales.stride[i] < 0) {
      return Status::invalid(scales_name + ".stride[" + std::to_string(i) + "]", ">= 0",
                             std::to_string(scales.stride[i]));
    }
  }
  if (scales.stride[3] != 1) {
    return Status::invalid(scales_name + ".stride[3]", "1 (the (scale, min) pair is contiguous)",
                           std::to_string(scales.stride[3]));
  }
  return Status::success();
}

// Quantizes every row of `values` into `codes` (and, for INT formats, its (scale, min) pair into
// `scales`) with the host quantizer (src/quant/kv_quant_host.*): the bytes a quantized cache holds.
void quantize_cache(const TensorRef& values, const TensorRef& codes, const TensorRef& scales) {
  const int64_t blocks = values.shape[0], slots = values.shape[1], hkv = values.shape[2];
  const int d = static_cast<int>(values.shape[3]);
  const bool fp8 = codes.dtype == DType::kFP8E4M3;
  const quant::IntCacheView view = fp8 ? quant::IntCacheView{} : quant::int_cache_view(codes, scales);
  detail::parallel_for(blocks * slots, [&](int64_t task) {
    const int64_t b = task / slots, s = task % slots;
    std::vector<float> row(d);
    for (int64_t h = 0; h < hkv; ++h) {
      const int64_t at = detail::element_offset(values, b, s, h);
      for (int j = 0; j < d; ++j) row[j] = detail::load_float(values, at + j * values.stride[3]);
      if (fp8) {
        const float scale = static_cast<const float*>(scales.data)[h * scales.stride[0]];
        quant::quantize_row_fp8(row.data(), d, scale,
                                static_cast<uint8_t*>(codes.data) + detail::element_offset(codes, b, s, h));
      } else {
        quant::write_cache_row(view, b, s, h, row.data());
      }
    }
  });
}

// The values a quantized cache stands for, as fp32 (what the reference and the CPU backend read).
void dequantize_cache(const TensorRef& codes, const TensorRef& scales, const TensorRef& values) {
  const int64_t blocks = codes.shape[0], slots = codes.shape[1], hkv = codes.shape[2];
  const int d = static_cast<int>(codes.shape[3]);
  const KvFormat format = codes.dtype == DType::kFP8E4M3 ? KvFormat::kFP8E4M3
                          : codes.dtype == DType::kI8    ? KvFormat::kInt8
                                                         : KvFormat::kInt4;
  const quant::KvRowReader reader(format, false, codes, scales, d);
  float* out = static_cast<float*>(values.data);
  detail::parallel_for(blocks * slots, [&](int64_t task) {
    const int64_t b = task / slots, s = task % slots;
    std::vector<float> row(d);
    for (int64_t h = 0; h < hkv; ++h) {
      reader.read(b, s, h, row.data());
      const int64_t at = detail::element_offset(values, b, s, h);
      for (int j = 0; j < d; ++j) out[at + j * values.stride[3]] = row[j];
    }
  });
}

// ---- device guard --------------------------------------------------------------------------------

// Makes `device` current for the duration of a launch (the runtime's current device decides where
// run_*() launch), restoring the previous one. No-op when it is already current.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (device < 0) return;
    if (cudaGetDevice(&previous_) != cudaSuccess) {
      cudaGetLastError();
      throw Error(Status(StatusCode::kNoDevice, "", "no CUDA device is available"));
    }
    if (previous_ != device) {
      if (cudaSetDevice(device) != cudaSuccess) {
        cudaGetLastError();
        throw Error(Status::invalid("device", "a valid CUDA device index", std::to_string(device)));
      }
      switched_ = true;
    }
  }
  ~DeviceGuard() {
    if (switched_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
  bool switched_ = false;
};

Stream as_stream(uintptr_t stream) { return reinterpret_cast<Stream>(stream); }

// ---- results of the reference ----------------------------------------------------------------

nb::bytes as_bytes(const std::vector<double>& v) {
  return nb::bytes(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(double));
}

std::string plan_repr(const Plan& p) {
  std::string s = p.kind() == Plan::Kind::kDecode ? "<splitkv.Plan decode" : "<splitkv.Plan prefill";
  s += std::string(" strategy=") + to_string(p.strategy());
  s += " family=" + p.family();
  s += " splits=" + std::to_string(p.num_splits()) + " workspace=" + std::to_string(p.workspace_bytes()) + ">";
  return s;
}

}  // namespace
}  // namespace splitkv::python

NB_MODULE(_splitkv, m) {
  using namespace splitkv;
  using namespace splitkv::python;
  m.doc() = "splitkv: torch-free binding of the split-KV attention API (see docs/PYTHON.md)";
  // Plans stay alive in the Python-level plan caches (and torch keeps the operators) until the
  // interpreter is torn down, after nanobind's leak check: not leaks, so no warning.
  nb::set_leak_warnings(false);

  // Exceptions: built-in bases, so callers can catch ValueError / NotImplementedError.
  struct ErrorSpec {
    StatusCode code;
    const char* name;
    PyObject* base;
    const char* doc;
  };
  const ErrorSpec specs[] = {
      {StatusCode::kInvalidArgument, "splitkv.InvalidArgumentError", PyExc_ValueError,
       "A value splitkv can never accept; the message and .argument name the argument."},
      {StatusCode::kUnsupported, "splitkv.UnsupportedError", PyExc_NotImplementedError,
       "Valid in principle but not supported (by this build, this device, or splitkv at all)."},
      {StatusCode::kWorkspaceTooSmall, "splitkv.WorkspaceTooSmallError", PyExc_ValueError,
       "The workspace is smaller than plan.workspace_bytes."},
      {StatusCode::kCudaError, "splitkv.CudaError", PyExc_RuntimeError, "The CUDA runtime reported an error."},
      {StatusCode::kNoDevice, "splitkv.NoDeviceError", PyExc_RuntimeError, "No usable CUDA device."},
  };
  // splitkv.Error: the common base of every splitkv exception.
  PyObject* base_error = PyErr_NewExceptionWithDoc("splitkv.Error", "Base class of splitkv's errors.",
                                                   PyExc_Exception, nullptr);
  if (base_error == nullptr) throw nb::python_error();
  m.attr("Error") = nb::steal(base_error);
  for (const ErrorSpec& s : specs) {
    nb::object bases = nb::make_tuple(nb::handle(base_error), nb::handle(s.base));
    PyObject* type = PyErr_NewExceptionWithDoc(s.name, s.doc, bases.ptr(), nullptr);
    if (type == nullptr) throw nb::python_error();
    g_error_types[static_cast<int>(s.code)] = type;
    const char* short_name = s.name + std::string("splitkv.").size();
    m.attr(short_name) = nb::steal(type);  // the module keeps the reference
  }
  nb::register_exception_translator(translate_error);

  nb::enum_<DType>(m, "DType", "Element types (the codes of the tensor descriptors)")
      .value("fp16", DType::kF16)
      .value("bf16", DType::kBF16)
      .value("fp32", DType::kF32)
      .value("int32", DType::kI32)
      .value("int8", DType::kI8)
      .value("int4", DType::kI4)
      .value("fp8_e4m3", DType::kFP8E4M3)
      .value("int64", DType::kI64);

  nb::enum_<KvFormat>(m, "KvFormat", "How the KV cache stores keys and values (native: in the Q/O dtype)")
      .value("native", KvFormat::kNative)
      .value("fp16", KvFormat::kF16)
      .value("bf16", KvFormat::kBF16)
      .value("fp8_e4m3", KvFormat::kFP8E4M3)
      .value("int8", KvFormat::kInt8)
      .value("int4", KvFormat::kInt4)
      .value("k8v4", KvFormat::kK8V4)
      .value("int8_kc", KvFormat::kInt8Kc)
      .value("int4_kc", KvFormat::kInt4Kc)
      .value("k8v4_kc", KvFormat::kK8V4Kc);

  nb::enum_<Strategy>(m, "Strategy")
      .value("auto", Strategy::kAuto)
      .value("split_q", Strategy::kSplitQ)
      .value("split_kv", Strategy::kSplitKV)
      .value("split_v", Strategy::kSplitV)
      .value("two_pass", Strategy::kTwoPass);

  nb::class_<DeviceInfo>(m, "DeviceInfo", "What the planner knows about a GPU")
      .def(nb::init<>())
      .def_static("h200", &DeviceInfo::h200, "The card the defaults were tuned on (for planning without a GPU)")
      .def_rw("sm_count", &DeviceInfo::sm_count)
      .def_rw("smem_per_sm_bytes", &DeviceInfo::smem_per_sm_bytes)
      .def_rw("smem_per_block_bytes", &DeviceInfo::smem_per_block_bytes)
      .def_rw("l2_bytes", &DeviceInfo::l2_bytes)
      .def_rw("cc_major", &DeviceInfo::cc_major)
      .def_rw("cc_minor", &DeviceInfo::cc_minor)
      .def("__repr__", [](const DeviceInfo& d) {
        return "<splitkv.DeviceInfo sm_" + std::to_string(d.cc_major) + std::to_string(d.cc_minor) + ", " +
               std::to_string(d.sm_count) + " SMs>";
      });

  nb::class_<DecodeProblem>(m, "DecodeProblem", "Decode shapes (the planner's input)")
          .def(
              "__init__",
              [](DecodeProblem* p, int batch, int num_q_heads, int num_kv_heads, int head_dim, int q_len,
                 int max_kv_len, int page_size, bool causal, DType dtype, float softmax_scale, KvFormat kv_format) {
                new (p) DecodeProblem();
                p->kv_format = kv_format;
                p->batch = batch;
                p->num_q_heads = num_q_heads;
                p->num_kv_heads = num_kv_heads;
                p->head_dim = head_dim;
                p->q_len = q_len;
                p->max_kv_len = max_kv_len;
                p->page_size = page_size;
                p->causal = causal;
                p->dtype = dtype;
                p->softmax_scale = softmax_scale;
              },
              "batch"_a = 0, "num_q_heads"_a = 0, "num_kv_heads"_a = 0, "head_dim"_a = 0, "q_len"_a = 1,
              "max_kv_len"_a = 0, "page_size"_a = 0, "causal"_a = false, "dtype"_a = DType::kBF16,
              "softmax_scale"_a = 0.f, "kv_format"_a = KvFormat::kNative)
          .def_rw("batch", &DecodeProblem::batch)
          .def_rw("num_q_heads", &DecodeProblem::num_q_heads)
          .def_rw("num_kv_heads", &DecodeProblem::num_kv_heads)
          .def_rw("head_dim", &DecodeProblem::head_dim)
          .def_rw("q_len", &DecodeProblem::q_len)
          .def_rw("max_kv_len", &DecodeProblem::max_kv_len)
          .def_rw("page_size", &DecodeProblem::page_size)
          .def_rw("causal", &DecodeProblem::causal)
          .def_rw("dtype", &DecodeProblem::dtype)
          .def_rw("softmax_scale", &DecodeProblem::softmax_scale)
          .def_rw("kv_format", &DecodeProblem::kv_format)
          .def_rw("window_left", &DecodeProblem::window_left, "sliding window: keys before the query (-1: all)")
          .def_rw("window_right", &DecodeProblem::window_right, "sliding window: keys after the query (-1: all)")
          .def_rw("softcap", &DecodeProblem::softcap, "logit softcap (0: off)")
          .def_rw("sinks", &DecodeProblem::sinks, "a sink logit per query head (tensor `sinks`)")
          .def_rw("tree_mask", &DecodeProblem::tree_mask, "a tree mask over the draft tokens (tensor `tree_mask`)");

  nb::class_<PrefillProblem>(m, "PrefillProblem", "Prefill shapes (the planner's input)")
          .def(
              "__init__",
              [](PrefillProblem* p, int batch, int num_q_heads, int num_kv_heads, int head_dim, int max_q_len,
                 int max_kv_len, bool varlen, bool causal, DType dtype, float softmax_scale, KvFormat kv_format,
                 bool kv_cache, int page_size) {
                new (p) PrefillProblem();
                p->kv_format = kv_format;
                p->kv_cache = kv_cache;
                p->page_size = page_size;
                p->batch = batch;
                p->num_q_heads = num_q_heads;
                p->num_kv_heads = num_kv_heads;
                p->head_dim = head_dim;
                p->max_q_len = max_q_len;
                p->max_kv_len = max_kv_len;
                p->varlen = varlen;
                p->causal = causal;
                p->dtype = dtype;
                p->softmax_scale = softmax_scale;
              },
              "batch"_a = 0, "num_q_heads"_a = 0, "num_kv_heads"_a = 0, "head_dim"_a = 0, "max_q_len"_a = 0,
              "max_kv_len"_a = 0, "varlen"_a = false, "causal"_a = false, "dtype"_a = DType::kBF16,
              "softmax_scale"_a = 0.f, "kv_format"_a = KvFormat::kNative, "kv_cache"_a = false, "page_size"_a = 0)
          .def_rw("batch", &PrefillProblem::batch)
          .def_rw("num_q_heads", &PrefillProblem::num_q_heads)
          .def_rw("num_kv_heads", &PrefillProblem::num_kv_heads)
          .def_rw("head_dim", &PrefillProblem::head_dim)
          .def_rw("max_q_len", &PrefillProblem::max_q_len)
          .def_rw("max_kv_len", &PrefillProblem::max_kv_len)
          .def_rw("varlen", &PrefillProblem::varlen)
          .def_rw("causal", &PrefillProblem::causal)
          .def_rw("dtype", &PrefillProblem::dtype)
          .def_rw("softmax_scale", &PrefillProblem::softmax_scale)
          .def_rw("kv_format", &PrefillProblem::kv_format)
          .def_rw("window_left", &PrefillProblem::window_left, "sliding window: keys before the query (-1: all)")
          .def_rw("window_right", &PrefillProblem::window_right, "sliding window: keys after the query (-1: all)")
          .def_rw("softcap", &PrefillProblem::softcap, "logit softcap (0: off)")
          .def_rw("sinks", &PrefillProblem::sinks, "a sink logit per query head (tensor `sinks`)")
          .def_rw("kv_cache", &PrefillProblem::kv_cache,
                  "chunked prefill over a decode cache: k/v are the cache, key counts come from seq_lens")
          .def_rw("page_size", &PrefillProblem::page_size, "kv_cache: 0 (contiguous) or the cache's page size");

  // PlanTuning: one attribute per switch of the options table (src/plan/plan_options_table.hpp).
  auto tuning = nb::class_<PlanTuning>(m, "PlanTuning", "The planner's rule switches, each on by default (docs/TUNING.md)")
                    .def(nb::init<>());
  for (const plan::TuningSwitch& t : plan::kTuningSwitches) {
    const auto field = t.field;
    tuning.def_prop_rw(
        t.name, [field](const PlanTuning& x) { return x.*field; }, [field](PlanTuning& x, bool on) { x.*field = on; },
        t.help);
  }
  tuning.def_rw("l2_prefetch_keys", &PlanTuning::l2_prefetch_keys,
                "decode on sm_90: keys of its split each block prefetches into L2 before its "
                "programmatic-dependent-launch wait (-1: the planner's rule, 0: none)");

  auto merge_of = [](const std::string& name) {
    Merge merge = Merge::kAuto;
    if (!plan::merge_of(name, &merge)) {
      throw nb::value_error(("merge: expected one of " + plan::merge_names() + ", got " + name).c_str());
    }
    return merge;
  };
  nb::class_<PlanOptions>(m, "PlanOptions", "Planner options")
      .def(
          "__init__",
          [merge_of](PlanOptions* o, Strategy strategy, int num_splits, int max_splits, int split_tokens,
                     const std::string& merge, std::string family) {
            new (o) PlanOptions();
            o->family = std::move(family);
            o->strategy = strategy;
            o->num_splits = num_splits;
            o->max_splits = max_splits;
            o->split_tokens = split_tokens;
            o->merge = merge_of(merge);
          },
          "strategy"_a = Strategy::kAuto, "num_splits"_a = 0, "max_splits"_a = 0, "split_tokens"_a = 0,
          "merge"_a = "auto", "family"_a = "")
      .def_rw("strategy", &PlanOptions::strategy)
      .def_rw("num_splits", &PlanOptions::num_splits)
      .def_rw("max_splits", &PlanOptions::max_splits)
      .def_rw("split_tokens", &PlanOptions::split_tokens)
      .def_prop_rw(
          "merge", [](const PlanOptions& o) { return std::string(to_string(o.merge)); },
          [merge_of](PlanOptions& o, const std::string& name) { o.merge = merge_of(name); },
          "how decode splits merge: auto, combine-kernel, cluster, fused, atomic (splitkv.Merge's names)")
      .def_rw("atomic_reference_lse", &PlanOptions::atomic_reference_lse, "merge='atomic': the reference LSE")
      .def_rw("tuning", &PlanOptions::tuning, "the planner's rule switches (PlanTuning)")
      .def_rw("family", &PlanOptions::family, "kernel family name ('': the planner chooses)");

  nb::class_<Plan>(m, "Plan", "A plan: printing it gives the CLI's `splitkv plan` description")
          .def_prop_ro("kind", [](const Plan& p) { return p.kind() == Plan::Kind::kDecode ? "decode" : "prefill"; })
          .def_prop_ro("decode", [](const Plan& p) { return p.decode(); })
          .def_prop_ro("prefill", [](const Plan& p) { return p.prefill(); })
          .def_prop_ro("device", &Plan::device)
          .def_prop_ro("strategy", &Plan::strategy)
          .def_prop_ro("family", &Plan::family)
          .def_prop_ro("num_splits", &Plan::num_splits)
          .def_prop_ro("split_tokens", &Plan::split_tokens)
          .def_prop_ro("cluster_combine", &Plan::cluster_combine)
          .def_prop_ro("fused_combine", &Plan::fused_combine)
          .def_prop_ro("atomic_combine", &Plan::atomic_combine)
          .def_prop_ro("l2_prefetch", &Plan::l2_prefetch)
          .def_prop_ro("l2_prefetch_keys", &Plan::l2_prefetch_keys)
          .def_prop_ro("dequantized_cache", &Plan::dequantized_cache)
          .def_prop_ro("staging_bytes", &Plan::staging_bytes)
          .def_prop_ro("block_m", &Plan::block_m)
          .def_prop_ro("block_n", &Plan::block_n)
          .def_prop_ro("warps", &Plan::warps)
          .def_prop_ro("stages", &Plan::stages)
          .def_prop_ro("smem_bytes", &Plan::smem_bytes)
          .def_prop_ro("blocks_per_sm", &Plan::blocks_per_sm)
          .def_prop_ro("launch_smem_bytes", &Plan::launch_smem_bytes)
          .def_prop_ro("register_bound_blocks", &Plan::register_bound_blocks)
          .def_prop_ro("short_twin_warps", &Plan::short_twin_warps)
          .def_prop_ro("work_units", &Plan::work_units)
          .def_prop_ro("packed_queries", &Plan::packed_queries)
          .def_prop_ro("decode_via_prefill", &Plan::decode_via_prefill)
          .def_prop_ro("mixed_route", &Plan::mixed_route)
          .def_prop_ro("mixed_decode_q", &Plan::mixed_decode_q)
          .def_prop_ro("grid", [](const Plan& p) { return nb::make_tuple(p.grid()[0], p.grid()[1], p.grid()[2]); })
          .def_prop_ro("workspace_bytes", &Plan::workspace_bytes)
          .def_prop_ro("note", &Plan::note)
          .def("describe", [](const Plan& p) { return describe(p); })
          .def("__str__", [](const Plan& p) { return describe(p); })
          .def("__repr__", &plan_repr);

  m.def("describe", [](const Plan& p) { return describe(p); }, "plan"_a);
  m.def("to_string", [](Strategy s) { return std::string(to_string(s)); });

  m.def(
      "plan_decode",
      [](const DecodeProblem& problem, const DeviceInfo& device, const PlanOptions& options) {
        Plan p;
        check(plan_decode(problem, device, options, &p));
        return p;
      },
      "problem"_a, "device"_a, "options"_a);
  m.def(
      "plan_prefill",
      [](const PrefillProblem& problem, const DeviceInfo& device, const PlanOptions& options) {
        Plan p;
        check(plan_prefill(problem, device, options, &p));
        return p;
      },
      "problem"_a, "device"_a, "options"_a);

  m.def(
      "query_device",
      [](int index) {
        DeviceInfo info;
        check(query_device(index, &info));
        return info;
      },
      "index"_a = 0, "Describes GPU `index`; raises NoDeviceError without a usable GPU.");
  // The formats table (src/common/formats.hpp), the one spelling the Python package derives its
  // names, element types and scale kinds from.
  m.def(
      "kv_format_table",
      []() {
        nb::list rows;
        for (int f = int(KvFormat::kNative); f <= int(KvFormat::kK8V4Kc); ++f) {
          const detail::KvFormatTraits t = detail::kv_format_traits(KvFormat(f));
          const char* scales = t.scales == detail::KvScales::kPerHead        ? "head"
                               : t.scales == detail::KvScales::kPerTokenPair ? "pair"
                                                                            : "none";
          rows.append(nb::make_tuple(KvFormat(f), t.name, int(t.k_element), int(t.v_element), t.quantized, scales,
                                     t.channel_keys, t.decode_kernels_by_default));
        }
        return rows;
      },
      "Every KvFormat: (format, name, k element, v element, quantized, scale kind of V (and of K unless "
      "channel keys): none/head/pair, channel_keys, decode kernels chosen by default)");
  // The keys of a *_kc format: positions per (scale, min) group and rows of the 16-bit tail ring.
  m.attr("KEY_GROUP") = detail::kKeyGroup;
  m.attr("KEY_TAIL_ROWS") = detail::kKeyTailRows;
  m.def("compiled_head_dims", &compiled_head_dims);
  m.def("dtype_compiled", &dtype_compiled, "dtype"_a);

  // GPU entry points. Tensors are descriptors (ptr, dtype, shape, strides) or None; workspace and
  // stream are raw addresses (ints); `device` >= 0 is made current for the launch.
  m.def(
      "run_decode",
      [](const Plan& plan, nb::handle q, nb::handle k, nb::handle v, nb::handle seq_lens, nb::handle block_table,
         nb::handle out, nb::handle lse, uintptr_t workspace, size_t workspace_bytes, uintptr_t stream, int device,
         nb::handle k_scales, nb::handle v_scales, nb::handle keys_after, nb::handle partial_o,
         nb::handle partial_lse, nb::handle sinks, nb::handle tree_mask, nb::handle k_tail, nb::handle tail_slots) {
        DecodeTensors t = decode_tensors(q, k, v, seq_lens, block_table, out, lse, k_scales, v_scales);
        add_shard_tensors(keys_after, partial_o, partial_lse, &t);
        t.sinks = tensor_ref(sinks, "sinks");
        t.tree_mask = tensor_ref(tree_mask, "tree_mask");
        t.k_tail = tensor_ref(k_tail, "k_tail");
        t.tail_slots = tensor_ref(tail_slots, "tail_slots");
        DeviceGuard guard(device);
        check(run_decode(plan, t, reinterpret_cast<void*>(workspace), workspace_bytes, as_stream(stream)));
      },
      "plan"_a, "q"_a, "k"_a, "v"_a, "seq_lens"_a, "block_table"_a.none(), "out"_a.none(), "lse"_a.none(),
      "workspace"_a, "workspace_bytes"_a, "stream"_a, "device"_a = -1, "k_scales"_a.none() = nb::none(),
      "v_scales"_a.none() = nb::none(), "keys_after"_a.none() = nb::none(), "partial_o"_a.none() = nb::none(),
      "partial_lse"_a.none() = nb::none(), "sinks"_a.none() = nb::none(), "tree_mask"_a.none() = nb::none(),
      "k_tail"_a.none() = nb::none(), "tail_slots"_a.none() = nb::none());
  m.def(
      "run_prefill",
      [](const Plan& plan, nb::handle q, nb::handle k, nb::handle v, nb::handle cu_seqlens_q,
         nb::handle cu_seqlens_k, nb::handle out, nb::handle lse, uintptr_t workspace, size_t workspace_bytes,
         uintptr_t stream, int device, nb::handle seq_lens, nb::handle block_table, nb::handle k_scales,
         nb::handle v_scales, nb::handle k_tail, nb::handle tail_slots, nb::handle sinks) {
        PrefillTensors t = prefill_tensors(q, k, v, cu_seqlens_q, cu_seqlens_k, out, lse);
        add_cache_tensors(seq_lens, block_table, k_scales, v_scales, k_tail, tail_slots, &t);
        t.sinks = tensor_ref(sinks, "sinks");
        DeviceGuard guard(device);
        check(run_prefill(plan, t, reinterpret_cast<void*>(workspace), workspace_bytes, as_stream(stream)));
      },
      "plan"_a, "q"_a, "k"_a, "v"_a, "cu_seqlens_q"_a.none(), "cu_seqlens_k"_a.none(), "out"_a, "lse"_a.none(),
      "workspace"_a, "workspace_bytes"_a, "stream"_a, "device"_a = -1, "seq_lens"_a.none() = nb::none(),
      "block_table"_a.none() = nb::none(), "k_scales"_a.none() = nb::none(), "v_scales"_a.none() = nb::none(),
      "k_tail"_a.none() = nb::none(), "tail_slots"_a.none() = nb::none(), "sinks"_a.none() = nb::none(),
      "Runs a prefill plan; with plan.prefill.kv_cache, k and v are a decode cache read through seq_lens "
      "(and block_table, the scales, the *_kc tail) as in run_decode.");

  nb::class_<CombineProblem>(m, "CombineProblem", "Merging split partials given by the caller")
      .def(
          "__init__",
          [](CombineProblem* p, int num_splits, int batch, int seq_len, int num_heads, int head_dim, DType dtype) {
            new (p) CombineProblem();
            p->num_splits = num_splits;
            p->batch = batch;
            p->seq_len = seq_len;
            p->num_heads = num_heads;
            p->head_dim = head_dim;
            p->dtype = dtype;
          },
          "num_splits"_a = 0, "batch"_a = 0, "seq_len"_a = 1, "num_heads"_a = 0, "head_dim"_a = 0,
          "dtype"_a = DType::kBF16)
      .def_rw("num_splits", &CombineProblem::num_splits)
      .def_rw("batch", &CombineProblem::batch)
      .def_rw("seq_len", &CombineProblem::seq_len)
      .def_rw("num_heads", &CombineProblem::num_heads)
      .def_rw("head_dim", &CombineProblem::head_dim)
      .def_rw("dtype", &CombineProblem::dtype)
      .def_rw("sinks", &CombineProblem::sinks, "a sink logit per head (tensor `sinks`) joins each merged row");

  // partial_o [S, B * seq_len, H, D] fp32, partial_lse [S, B * seq_len, H] fp32 -> out, lse.
  m.def(
      "run_combine",
      [](const CombineProblem& problem, nb::handle partial_o, nb::handle partial_lse, nb::handle out,
         nb::handle lse, uintptr_t stream, int device, nb::handle sinks) {
        CombineTensors t;
        t.partial_o = tensor_ref(partial_o, "partial_o");
        t.partial_lse = tensor_ref(partial_lse, "partial_lse");
        t.out = tensor_ref(out, "out");
        t.lse = tensor_ref(lse, "lse");
        t.sinks = tensor_ref(sinks, "sinks");
        DeviceGuard guard(device);
        check(run_combine(problem, t, as_stream(stream)));
      },
      "problem"_a, "partial_o"_a, "partial_lse"_a, "out"_a, "lse"_a.none(), "stream"_a, "device"_a = -1,
      "sinks"_a.none() = nb::none());

  nb::class_<AppendKvProblem>(m, "AppendKvProblem", "Appending new k / v rows to a KV cache (any KvFormat)")
      .def(
          "__init__",
          [](AppendKvProblem* p, int num_tokens, int num_kv_heads, int head_dim, DType dtype, KvFormat kv_format,
             int page_size) {
            new (p) AppendKvProblem();
            p->num_tokens = num_tokens;
            p->num_kv_heads = num_kv_heads;
            p->head_dim = head_dim;
            p->dtype = dtype;
            p->kv_format = kv_format;
            p->page_size = page_size;
          },
          "num_tokens"_a = 0, "num_kv_heads"_a = 0, "head_dim"_a = 0, "dtype"_a = DType::kBF16,
          "kv_format"_a = KvFormat::kNative, "page_size"_a = 0)
      .def_rw("num_tokens", &AppendKvProblem::num_tokens)
      .def_rw("num_kv_heads", &AppendKvProblem::num_kv_heads)
      .def_rw("head_dim", &AppendKvProblem::head_dim)
      .def_rw("dtype", &AppendKvProblem::dtype)
      .def_rw("kv_format", &AppendKvProblem::kv_format)
      .def_rw("page_size", &AppendKvProblem::page_size);

  // k, v [tokens, Hkv, D]; slots int64 or int32 [tokens]; caches and scales as in run_decode. Device memory.
  m.def(
      "run_append_kv",
      [](const AppendKvProblem& problem, nb::handle k, nb::handle v, nb::handle slots, nb::handle k_cache,
         nb::handle v_cache, nb::handle k_scales, nb::handle v_scales, uintptr_t stream, int device,
         nb::handle positions, nb::handle tail_slots, nb::handle k_tail) {
        AppendKvTensors t;
        t.k = tensor_ref(k, "k");
        t.v = tensor_ref(v, "v");
        t.slots = tensor_ref(slots, "slots");
        t.k_cache = tensor_ref(k_cache, "k_cache");
        t.v_cache = tensor_ref(v_cache, "v_cache");
        t.k_scales = tensor_ref(k_scales, "k_scales");
        t.v_scales = tensor_ref(v_scales, "v_scales");
        t.positions = tensor_ref(positions, "positions");
        t.tail_slots = tensor_ref(tail_slots, "tail_slots");
        t.k_tail = tensor_ref(k_tail, "k_tail");
        DeviceGuard guard(device);
        check(run_append_kv(problem, t, as_stream(stream)));
      },
      "problem"_a, "k"_a.none(), "v"_a.none(), "slots"_a.none(), "k_cache"_a, "v_cache"_a, "k_scales"_a.none(),
      "v_scales"_a.none(), "stream"_a, "device"_a = -1, "positions"_a.none() = nb::none(),
      "tail_slots"_a.none() = nb::none(), "k_tail"_a.none() = nb::none(),
      "Writes new rows into a KV cache on the GPU (16-bit copy, or quantized to the host quantizer's bytes).");

  auto family_info = nb::class_<KernelFamilyInfo>(m, "KernelFamilyInfo", "A registered kernel family");
  nb::class_<KernelFamilyInfo::Compiled>(family_info, "Compiled")
      .def_ro("dtype", &KernelFamilyInfo::Compiled::dtype)
      .def_ro("head_dim", &KernelFamilyInfo::Compiled::head_dim)
      .def_ro("kv_format", &KernelFamilyInfo::Compiled::kv_format);
  family_info.def_ro("name", &KernelFamilyInfo::name)
      .def_ro("kind", &KernelFamilyInfo::kind)
      .def_ro("arch", &KernelFamilyInfo::arch)
      .def_ro("strategies", &KernelFamilyInfo::strategies)
      .def_ro("head_dims", &KernelFamilyInfo::head_dims)
      .def_ro("dtypes", &KernelFamilyInfo::dtypes)
      .def_ro("priority", &KernelFamilyInfo::priority)
      .def_ro("compiled", &KernelFamilyInfo::compiled)
      .def("__repr__", [](const KernelFamilyInfo& f) {
        return "<splitkv.KernelFamilyInfo " + f.name + " (" + f.kind + ", " + f.arch + ", " +
               std::to_string(f.compiled.size()) + " compiled)>";
      });
  m.def("kernel_families", &kernel_families, "Every registered kernel family and what this build compiled of it.");

  // Host entry points: every descriptor points to host memory.
  m.def(
      "cpu_run_decode",
      [](const Plan& plan, nb::handle q, nb::handle k, nb::handle v, nb::handle seq_lens, nb::handle block_table,
         nb::handle out, nb::handle lse, nb::handle k_scales, nb::handle v_scales, nb::handle keys_after,
         nb::handle partial_o, nb::handle partial_lse, nb::handle sinks, nb::handle tree_mask, nb::handle k_tail,
         nb::handle tail_slots) {
        DecodeTensors t = decode_tensors(q, k, v, seq_lens, block_table, out, lse, k_scales, v_scales);
        add_shard_tensors(keys_after, partial_o, partial_lse, &t);
        t.sinks = tensor_ref(sinks, "sinks");
        t.tree_mask = tensor_ref(tree_mask, "tree_mask");
        t.k_tail = tensor_ref(k_tail, "k_tail");
        t.tail_slots = tensor_ref(tail_slots, "tail_slots");
        t.seq_lens_host = host_int32(t.seq_lens);
        t.block_table_host = host_int32(t.block_table);
        Status s;
        {
          nb::gil_scoped_release release;
          s = cpu::run_decode(plan, t);
        }
        check(s);
      },
      "plan"_a, "q"_a, "k"_a, "v"_a, "seq_lens"_a, "block_table"_a.none(), "out"_a.none(), "lse"_a.none(),
      "k_scales"_a.none() = nb::none(), "v_scales"_a.none() = nb::none(), "keys_after"_a.none() = nb::none(),
      "partial_o"_a.none() = nb::none(), "partial_lse"_a.none() = nb::none(), "sinks"_a.none() = nb::none(),
      "tree_mask"_a.none() = nb::none(), "k_tail"_a.none() = nb::none(), "tail_slots"_a.none() = nb::none(),
      "Runs a decode plan on the CPU backend (host memory); lengths and page ids are checked first. "
      "Quantized caches (plan.decode.kv_format) take their scales in k_scales / v_scales; a shard of a "
      "longer context takes keys_after and writes its split partials to partial_o / partial_lse.");

  m.def(
      "reference_decode",
      [](const DecodeProblem& problem, nb::handle q, nb::handle k, nb::handle v, nb::handle seq_lens,
         nb::handle block_table, nb::handle k_scales, nb::handle v_scales) {
        DecodeTensors t = decode_tensors(q, k, v, seq_lens, block_table, nb::none(), nb::none(), k_scales, v_scales);
        t.seq_lens_host = host_int32(t.seq_lens);
        t.block_table_host = host_int32(t.block_table);
        // The reference trusts its input: validate like run_decode first (out is not needed, so
        // the problem's own q shape stands in for it).
        check(detail::validate_decode_problem(problem));
        t.out = t.q;
        check(detail::validate_decode_tensors(problem, t));
        if (t.seq_lens_host == nullptr) {
          check(Status::invalid("seq_lens", "a dense int32 host array", "another layout"));
        }
        ref::Result r;
        {
          nb::gil_scoped_release release;
          t.out = TensorRef();
          r = ref::decode(problem, t);
        }
        return nb::make_tuple(as_bytes(r.out), as_bytes(r.lse));
      },
      "problem"_a, "q"_a, "k"_a, "v"_a, "seq_lens"_a, "block_table"_a.none(), "k_scales"_a.none() = nb::none(),
      "v_scales"_a.none() = nb::none(),
      "fp64 reference decode over host memory; returns (out, lse) as float64 bytes in the dense layouts "
      "[B, Lq, Hq, D] and [B, Hq, Lq]. Quantized caches are read as the values they stand for.");

  m.def(
      "quantize_cache",
      [](nb::handle values, nb::handle codes, nb::handle scales, const std::string& values_name,
         const std::string& codes_name, const std::string& scales_name) {
        const TensorRef x = tensor_ref(values, values_name.c_str());
        const TensorRef c = tensor_ref(codes, codes_name.c_str());
        const TensorRef s = tensor_ref(scales, scales_name.c_str());
        check(check_host_cache(x, values_name, false, c, codes_name, s, scales_name));
        nb::gil_scoped_release release;
        quantize_cache(x, c, s);
      },
      "values"_a, "codes"_a, "scales"_a, "values_name"_a = "values", "codes_name"_a = "codes",
      "scales_name"_a = "scales",
      "Host quantizer (src/quant/kv_quant_host.*) over a cache [blocks, slots, Hkv, D] in host memory: writes "
      "the codes (fp8_e4m3 / int8 / int4 descriptor; int4 counts nibbles) and, for INT formats, the fp16 "
      "(scale, min) pairs [blocks, Hkv, slots, 2]; FP8 reads its fp32 scales [Hkv].");
  m.def(
      "quantize_keys_kc",
      [](nb::handle keys, nb::handle seq_lens, nb::handle codes, nb::handle group_scales, nb::handle tail) {
        const TensorRef x = tensor_ref(keys, "k");
        const TensorRef lens = tensor_ref(seq_lens, "seq_lens");
        const TensorRef c = tensor_ref(codes, "k_codes");
        const TensorRef s = tensor_ref(group_scales, "k_scales");
        const TensorRef t = tensor_ref(tail, "k_tail");
        const quant::KcKeyCacheView view = quant::kc_key_view(c, s, t);
        check(quant::check_kc_view(view, false));
        if (x.rank != 4 || x.shape[0] != c.shape[0] || x.shape[1] > c.shape[1] || x.shape[2] != c.shape[2] ||
            x.shape[3] != c.shape[3]) {
          check(Status::invalid("k", "[B, L, Hkv, D] matching the codes' [B, capacity, Hkv, D]", "another shape"));
        }
        const int64_t B = x.shape[0], L = x.shape[1], Hkv = x.shape[2], D = x.shape[3];
        // The checks decode applies to these tensors (validate/tensor_checks.hpp); a tail row per sequence.
        check(detail::check_kv_scale_tensor("k_scales", s, detail::KvScales::kPerChannelGroup, "keys-per-channel", c,
                                            Hkv));
        check(detail::check_tensor("k_tail", t, detail::Expect{t.dtype, {-B, Hkv, quant::kKeyTailRows, D}, false}));
        if (!lens.empty() && (lens.rank != 1 || lens.shape[0] != B)) {
          check(Status::invalid("seq_lens", "int32 [B]", "another shape"));
        }
        const int32_t* host_lens = host_int32(lens);
        nb::gil_scoped_release release;
        // Every sequence's first lens[b] keys (all L without seq_lens), appended in one call.
        std::vector<float> rows;
        std::vector<quant::KcAppendToken> tokens;
        for (int64_t b = 0; b < B; ++b) {
          const int64_t n = host_lens ? std::min<int64_t>(std::max(host_lens[b], 0), L) : L;
          for (int64_t p = 0; p < n; ++p) tokens.push_back({b * c.shape[1] + p, p, b, nullptr});
        }
        rows.resize(tokens.size() * size_t(Hkv * D));
        for (size_t i = 0; i < tokens.size(); ++i) {
          const int64_t b = tokens[i].slot / c.shape[1], p = tokens[i].position;
          for (int64_t h = 0; h < Hkv; ++h) {
            for (int64_t d = 0; d < D; ++d) {
              rows[(i * Hkv + h) * D + d] = detail::load_float(x, detail::element_offset(x, b, p, h, d));
            }
          }
          tokens[i].k = &rows[i * size_t(Hkv * D)];
        }
        quant::append_keys(view, tokens);
      },
      "k"_a, "seq_lens"_a.none(), "k_codes"_a, "k_scales"_a, "k_tail"_a,
      "Host definition of channel-quantized keys (src/quant/kv_quant_kc.hpp) over a contiguous cache: each "
      "sequence's first seq_lens[b] keys (all without seq_lens) of k [B, L, Hkv, D] appended into the codes "
      "[B, capacity, Hkv, D], group scales [B, Hkv, groups, 2 * D] and tail [B, Hkv, 128, D] (tail slot b).");
  m.def(
      "dequantize_cache",
      [](nb::handle codes, nb::handle scales, nb::handle values, const std::string& codes_name,
         const std::string& scales_name) {
        const TensorRef c = tensor_ref(codes, codes_name.c_str());
        const TensorRef s = tensor_ref(scales, scales_name.c_str());
        const TensorRef x = tensor_ref(values, "out");
        check(check_host_cache(x, "out", true, c, codes_name, s, scales_name));
        nb::gil_scoped_release release;
        dequantize_cache(c, s, x);
      },
      "codes"_a, "scales"_a, "values"_a, "codes_name"_a = "codes", "scales_name"_a = "scales",
      "The fp32 values a quantized cache stands for (what the reference and the CPU backend read).");

  m.def(
      "reference_prefill",
      [](const PrefillProblem& problem, nb::handle q, nb::handle k, nb::handle v, nb::handle cu_seqlens_q,
         nb::handle cu_seqlens_k, nb::handle sinks, nb::handle seq_lens, nb::handle block_table, nb::handle k_scales,
         nb::handle v_scales, nb::handle k_tail, nb::handle tail_slots) {
        PrefillTensors t = prefill_tensors(q, k, v, cu_seqlens_q, cu_seqlens_k, nb::none(), nb::none());
        add_cache_tensors(seq_lens, block_table, k_scales, v_scales, k_tail, tail_slots, &t);
        t.sinks = tensor_ref(sinks, "sinks");
        t.cu_seqlens_q_host = host_int32(t.cu_seqlens_q);
        t.cu_seqlens_k_host = host_int32(t.cu_seqlens_k);
        // The reference reads lengths and page ids: checked on the host first (as cpu_run_decode).
        t.seq_lens_host = host_int32(t.seq_lens);
        t.block_table_host = host_int32(t.block_table);
        check(detail::validate_prefill_problem(problem));
        t.out = t.q;
        check(detail::validate_prefill_tensors(problem, t));
        if (problem.varlen && (t.cu_seqlens_q_host == nullptr || (!problem.kv_cache && t.cu_seqlens_k_host == nullptr))) {
          check(Status::invalid(t.cu_seqlens_q_host == nullptr ? "cu_seqlens_q" : "cu_seqlens_k",
                                "a dense int32 host array", "another layout"));
        }
        if (problem.kv_cache && (t.seq_lens_host == nullptr ||
                                 (problem.page_size > 0 && t.block_table_host == nullptr))) {
          check(Status::invalid(t.seq_lens_host == nullptr ? "seq_lens" : "block_table", "a dense int32 host array",
                                "another layout"));
        }
        ref::Result r;
        {
          nb::gil_scoped_release release;
          t.out = TensorRef();
          r = ref::prefill(problem, t);
        }
        return nb::make_tuple(as_bytes(r.out), as_bytes(r.lse));
      },
      "problem"_a, "q"_a, "k"_a, "v"_a, "cu_seqlens_q"_a.none(), "cu_seqlens_k"_a.none(),
      "sinks"_a.none() = nb::none(), "seq_lens"_a.none() = nb::none(), "block_table"_a.none() = nb::none(),
      "k_scales"_a.none() = nb::none(), "v_scales"_a.none() = nb::none(), "k_tail"_a.none() = nb::none(),
      "tail_slots"_a.none() = nb::none(),
      "fp64 reference prefill over host memory; returns (out, lse) as float64 bytes in the dense layouts "
      "(padded [B, Lq, Hq, D] / [B, Hq, Lq]; varlen [total_q, Hq, D] / [Hq, total_q]). With "
      "problem.kv_cache, k and v are a decode cache (seq_lens, block_table, scales, *_kc tail as in "
      "reference_decode); lengths and page ids are checked on the host.");

}
