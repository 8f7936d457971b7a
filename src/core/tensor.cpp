#include "core/tensor.h"

#include <cstring>
#include <sstream>

namespace anvil {

Storage::~Storage() {
  if (!owned || !ptr) return;
  try {
    backend(device).free(ptr);
  } catch (...) {
    // Destructors must not throw; a failed free at exit is not actionable.
  }
}

std::string shape_str(const Shape& s) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < s.size(); i++) o << (i ? "," : "") << s[i];
  o << "]";
  return o.str();
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape st(shape.size());
  int64_t s = 1;
  for (int i = int(shape.size()) - 1; i >= 0; i--) {
    st[i] = s;
    s *= shape[i];
  }
  return st;
}

static void check_shape_valid(const char* op, const Shape& shape) {
  for (int64_t d : shape)
    ANVIL_CHECK(d >= 0, op, "non-negative sizes", shape_str(shape));
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  check_shape_valid("Tensor::empty", shape);
  Tensor t;
  size_t n = size_t(shape_numel(shape)) * dtype_size(dtype);
  Backend& b = backend(device);
  t.storage_ = std::make_shared<Storage>(b.alloc(n), n, device);
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.zero_();
  return t;
}

Tensor Tensor::from_blob(void* ptr, const Shape& shape, DType dtype, Device device, std::shared_ptr<void> keepalive) {
  check_shape_valid("Tensor::from_blob", shape);
  ANVIL_CHECK(ptr != nullptr || shape_numel(shape) == 0, "Tensor::from_blob", "a non-null pointer", "nullptr");
  Tensor t;
  size_t n = size_t(shape_numel(shape)) * dtype_size(dtype);
  t.storage_ = std::make_shared<Storage>(ptr, n, device, /*own=*/false, std::move(keepalive));
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::from_floats(const std::vector<float>& v, const Shape& shape, DType dtype, Device device) {
  ANVIL_CHECK(int64_t(v.size()) == shape_numel(shape), "Tensor::from_floats", str(shape_numel(shape), " values for ",
              shape_str(shape)), str(v.size(), " values"));
  Tensor host = empty(shape, dtype, Device::cpu());
  void* p = host.data_ptr();
  // Elements of 1-8 bytes each: threads never share one. (Perf cases upload matrices of up to 525 M values.)
#pragma omp parallel for schedule(static) if (v.size() > (1 << 20))
  for (size_t i = 0; i < v.size(); i++) store_from_f32(p, dtype, i, v[i]);
  return host.to(device);
}

int64_t Tensor::size(int d) const {
  int n = dim();
  if (d < 0) d += n;
  ANVIL_CHECK(d >= 0 && d < n, "Tensor::size", str("a dimension in [", -n, ",", n, ")"), d);
  return shape_[d];
}
int64_t Tensor::stride(int d) const {
  int n = dim();
  if (d < 0) d += n;
  ANVIL_CHECK(d >= 0 && d < n, "Tensor::stride", str("a dimension in [", -n, ",", n, ")"), d);
  return strides_[d];
}
int64_t Tensor::numel() const { return shape_numel(shape_); }

bool Tensor::is_contiguous() const {
  int64_t s = 1;
  for (int i = dim() - 1; i >= 0; i--) {
    if (shape_[i] != 1 && strides_[i] != s) return false;
    s *= shape_[i];
  }
  return true;
}

Tensor Tensor::view(const Shape& shape) const {
  Shape s = shape;
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < s.size(); i++) {
    if (s[i] == -1) {
      ANVIL_CHECK(infer < 0, "Tensor::view", "at most one -1", shape_str(shape));
      infer = int(i);
    } else {
      known *= s[i];
    }
  }
  if (infer >= 0) s[infer] = known ? numel() / known : 0;
  ANVIL_CHECK(shape_numel(s) == numel(), "Tensor::view", str(numel(), " elements (from ", shape_str(shape_), ")"),
              shape_str(shape));
  ANVIL_CHECK(is_contiguous(), "Tensor::view", "a contiguous tensor", describe() + " with strides " + shape_str(strides_));
  Tensor t = *this;
  t.shape_ = s;
  t.strides_ = contiguous_strides(s);
  return t;
}

Tensor Tensor::slice(int d, int64_t start, int64_t end) const {
  if (d < 0) d += dim();
  ANVIL_CHECK(d >= 0 && d < dim(), "Tensor::slice", str("a dimension below ", dim()), d);
  ANVIL_CHECK(0 <= start && start <= end && end <= shape_[d], "Tensor::slice",
              str("0 <= start <= end <= ", shape_[d]), str("[", start, ",", end, ")"));
  Tensor t = *this;
  t.offset_ += size_t(start * strides_[d]) * dtype_size(dtype_);
  t.shape_[d] = end - start;
  return t;
}

Tensor Tensor::select(int d, int64_t index) const {
  if (d < 0) d += dim();
  Tensor t = slice(d, index, index + 1);
  t.shape_.erase(t.shape_.begin() + d);
  t.strides_.erase(t.strides_.begin() + d);
  return t;
}

Tensor Tensor::transpose(int d0, int d1) const {
  if (d0 < 0) d0 += dim();
  if (d1 < 0) d1 += dim();
  ANVIL_CHECK(d0 >= 0 && d0 < dim() && d1 >= 0 && d1 < dim(), "Tensor::transpose", str("dimensions below ", dim()),
              str(d0, ",", d1));
  Tensor t = *this;
  std::swap(t.shape_[d0], t.shape_[d1]);
  std::swap(t.strides_[d0], t.strides_[d1]);
  return t;
}

Tensor Tensor::as_dtype(DType dtype) const {
  ANVIL_CHECK(dtype_size(dtype) == dtype_size(dtype_), "Tensor::as_dtype", str(dtype_size(dtype_), "-byte dtype"),
              dtype_name(dtype));
  Tensor t = *this;
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::to(Device device) const {
  if (this->device() == device) return *this;
  Tensor src = contiguous();
  Tensor dst = empty(shape_, dtype_, device);
  if (src.device().is_cpu())
    backend(device).copy_from_host(dst.data_ptr(), src.data_ptr(), src.nbytes());
  else if (device.is_cpu())
    backend(src.device()).copy_to_host(dst.data_ptr(), src.data_ptr(), src.nbytes());
  else {
    Tensor host = src.to(Device::cpu());
    backend(device).copy_from_host(dst.data_ptr(), host.data_ptr(), host.nbytes());
  }
  return dst;
}

// Strided gather on the host: walks the index space in row-major order.
static void strided_copy_host(const Tensor& src, void* dst) {
  const size_t es = dtype_size(src.dtype());
  const int nd = src.dim();
  const int64_t n = src.numel();
  std::vector<int64_t> idx(nd, 0);
  const char* base = static_cast<const char*>(src.data_ptr());
  char* out = static_cast<char*>(dst);
  for (int64_t i = 0; i < n; i++) {
    int64_t off = 0;
    for (int d = 0; d < nd; d++) off += idx[d] * src.strides()[d];
    std::memcpy(out + i * es, base + off * int64_t(es), es);
    for (int d = nd - 1; d >= 0; d--) {
      if (++idx[d] < src.shape()[d]) break;
      idx[d] = 0;
    }
  }
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  if (device().is_cpu()) {
    Tensor dst = empty(shape_, dtype_, Device::cpu());
    strided_copy_host(*this, dst.data_ptr());
    return dst;
  }
  // GPU strided copies go through the host: only used off the hot path (checkpoints, tests).
  Tensor host = empty(shape_, dtype_, Device::cpu());
  // Copy the whole spanned range, then gather on the host.
  Tensor whole = *this;
  int64_t span = 1;
  for (int d = 0; d < dim(); d++) span += (shape_[d] - 1) * strides_[d];
  std::vector<char> buf(size_t(span) * dtype_size(dtype_));
  backend(device()).copy_to_host(buf.data(), data_ptr(), buf.size());
  Tensor staged = from_blob(buf.data(), {span}, dtype_, Device::cpu());
  staged.shape_ = shape_;
  staged.strides_ = strides_;
  strided_copy_host(staged, host.data_ptr());
  return host.to(device());
}

Tensor Tensor::clone() const {
  Tensor src = contiguous();
  Tensor dst = empty(shape_, dtype_, device());
  backend(device()).copy_device(dst.data_ptr(), src.data_ptr(), src.nbytes());
  return dst;
}

namespace {
// d and s (one shape) as `height` runs of `width` elements, run i at i * pd in d and i * ps in s: the innermost
// dims where both are contiguous make a run, and the dims outside it must step uniformly in each. A slice along
// the middle dim of a (B, R, T) tensor is B runs of (r1 - r0) * T elements, R * T apart.
bool pitched_pair(const Tensor& d, const Tensor& s, int64_t& width, int64_t& height, int64_t& pd, int64_t& ps) {
  int i = d.dim() - 1;
  width = 1;
  for (; i >= 0; i--) {
    if (d.size(i) == 1) continue;
    if (d.stride(i) != width || s.stride(i) != width) break;
    width *= d.size(i);
  }
  height = 1;
  pd = ps = width;
  bool first = true;
  for (; i >= 0; i--) {
    if (d.size(i) == 1) continue;
    if (first) {
      pd = d.stride(i), ps = s.stride(i), height = d.size(i), first = false;
    } else if (d.stride(i) == pd * height && s.stride(i) == ps * height) {
      height *= d.size(i);
    } else {
      return false;
    }
  }
  return pd >= width && ps >= width;
}
}  // namespace

void Tensor::copy_(const Tensor& src) {
  ANVIL_CHECK(src.shape_ == shape_, "Tensor::copy_", shape_str(shape_), shape_str(src.shape_));
  ANVIL_CHECK(src.dtype_ == dtype_, "Tensor::copy_", dtype_name(dtype_), dtype_name(src.dtype_));
  int64_t width = 0, height = 0, pd = 0, ps = 0;
  if (src.device() == device() && numel() > 0 && pitched_pair(*this, src, width, height, pd, ps)) {
    const size_t es = dtype_size(dtype_);
    if (height == 1) return backend(device()).copy_device(data_ptr(), src.data_ptr(), size_t(width) * es);
    backend(device()).copy_device_2d(data_ptr(), size_t(pd) * es, src.data_ptr(), size_t(ps) * es,
                                     size_t(width) * es, size_t(height));
    return;
  }
  ANVIL_CHECK(is_contiguous(), "Tensor::copy_", "a contiguous destination", describe());
  Tensor s = src.contiguous();
  if (s.device() == device())
    backend(device()).copy_device(data_ptr(), s.data_ptr(), nbytes());
  else if (s.device().is_cpu())
    backend(device()).copy_from_host(data_ptr(), s.data_ptr(), nbytes());
  else if (device().is_cpu())
    backend(s.device()).copy_to_host(data_ptr(), s.data_ptr(), nbytes());
  else
    copy_(s.to(Device::cpu()));
}

void Tensor::zero_() {
  ANVIL_CHECK(is_contiguous(), "Tensor::zero_", "a contiguous tensor", describe());
  backend(device()).memset(data_ptr(), 0, nbytes());
}

std::vector<float> Tensor::to_floats() const {
  Tensor h = to(Device::cpu()).contiguous();
  std::vector<float> out(static_cast<size_t>(numel()));
  for (size_t i = 0; i < out.size(); i++) out[i] = load_as_f32(h.data_ptr(), dtype_, i);
  return out;
}

float Tensor::item() const {
  ANVIL_CHECK(numel() == 1, "Tensor::item", "one element", describe());
  return to_floats()[0];
}

std::string Tensor::describe() const {
  if (!defined()) return "undefined";
  return str(dtype_name(dtype_), shape_str(shape_), "@", device().name());
}

// ---- argument checks -----------------------------------------------------------------------------------
void check_defined(const char* op, const char* arg, const Tensor& t) {
  ANVIL_CHECK(t.defined(), op, str(arg, " to be a tensor"), "an undefined tensor");
}
void check_shape(const char* op, const char* arg, const Tensor& t, const Shape& expected) {
  check_defined(op, arg, t);
  ANVIL_CHECK(t.shape() == expected, op, str(arg, " of shape ", shape_str(expected)), t.describe());
}
void check_dtype(const char* op, const char* arg, const Tensor& t, DType expected) {
  check_defined(op, arg, t);
  ANVIL_CHECK(t.dtype() == expected, op, str(arg, " of dtype ", dtype_name(expected)), t.describe());
}
void check_dtype_in(const char* op, const char* arg, const Tensor& t, std::initializer_list<DType> allowed) {
  check_defined(op, arg, t);
  for (DType d : allowed)
    if (t.dtype() == d) return;
  std::string names;
  for (DType d : allowed) names += std::string(names.empty() ? "" : "/") + dtype_name(d);
  ANVIL_THROW(op, str(arg, " of dtype ", names), t.describe());
}
void check_contiguous(const char* op, const char* arg, const Tensor& t) {
  check_defined(op, arg, t);
  ANVIL_CHECK(t.is_contiguous(), op, str(arg, " contiguous"), t.describe() + " with strides " + shape_str(t.strides()));
}
void check_rows_bdl_or_dbl(const char* op, const char* arg, const Tensor& t, const Shape& shape) {
  check_shape(op, arg, t, shape);
  const int64_t B = shape[0], D = shape[1], L = shape[2];
  const bool bdl = t.is_contiguous();
  const bool dbl = t.stride(2) == 1 && t.stride(0) == L && t.stride(1) == B * L;
  ANVIL_CHECK(bdl || dbl, op, str(arg, " with rows in (B, D, L) order (strides ", shape_str({D * L, L, 1}),
                                  ") or (D, B, L) order (strides ", shape_str({L, B * L, 1}), ")"),
              t.describe() + " with strides " + shape_str(t.strides()));
}
void check_same_device(const char* op, const Tensor& a, const char* aname, const Tensor& b, const char* bname) {
  ANVIL_CHECK(a.device() == b.device(), op, str(aname, " and ", bname, " on one device"),
              str(a.device().name(), " and ", b.device().name()));
}
void check_dim(const char* op, const char* arg, const Tensor& t, int ndim) {
  check_defined(op, arg, t);
  ANVIL_CHECK(t.dim() == ndim, op, str(arg, " with ", ndim, " dimensions"), t.describe());
}
void check_aligned(const char* op, const char* arg, const Tensor& t, size_t bytes) {
  ANVIL_CHECK(reinterpret_cast<uintptr_t>(t.data_ptr()) % bytes == 0, op, str(arg, " aligned to ", bytes, " bytes"),
              str(t.describe(), " at ", t.data_ptr()));
}

DType dtype_from_name(const std::string& n0) {
  std::string n;
  for (char c : n0) n += char(std::tolower(static_cast<unsigned char>(c)));
  if (n == "f32" || n == "float32" || n == "float") return DType::f32;
  if (n == "f16" || n == "float16" || n == "half") return DType::f16;
  if (n == "bf16" || n == "bfloat16") return DType::bf16;
  if (n == "f8_e4m3" || n == "e4m3fn" || n == "float8_e4m3fn" || n == "fp8") return DType::e4m3fn;
  if (n == "f8_e5m2" || n == "e5m2" || n == "float8_e5m2") return DType::e5m2;
  if (n == "e4m3fnuz" || n == "float8_e4m3fnuz") return DType::e4m3fnuz;
  if (n == "e5m2fnuz" || n == "float8_e5m2fnuz") return DType::e5m2fnuz;
  if (n == "i32" || n == "int32") return DType::i32;
  if (n == "i64" || n == "int64") return DType::i64;
  if (n == "u8" || n == "uint8") return DType::u8;
  ANVIL_THROW("dtype_from_name", "f32, f16, bf16, e4m3fn, e5m2, e4m3fnuz, e5m2fnuz, i32, i64 or u8", "'" + n0 + "'");
}

}  // namespace anvil
