// Tensor: a typed, strided view into reference-counted storage on one device.
// Shapes use the vocabulary B T C V L NH HD D N (see docs/shapes.md); strides are in elements.
#pragma once
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/dtype.h"
#include "core/error.h"

namespace anvil {

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& s);  // "[64,4096]"

// Owns (or borrows) one allocation. Borrowed storage keeps its owner alive through `keepalive`
// (a memory-mapped safetensors file, for example).
struct Storage {
  void* ptr = nullptr;
  size_t nbytes = 0;
  Device device;
  bool owned = true;                // false for borrowed memory: then ptr is not freed by us
  std::shared_ptr<void> keepalive;  // the owner of borrowed memory, if any
  Storage(void* p, size_t n, Device d, bool own = true, std::shared_ptr<void> k = nullptr)
      : ptr(p), nbytes(n), device(d), owned(own), keepalive(std::move(k)) {}
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

class Tensor {
 public:
  Tensor() = default;

  // Uninitialised memory. Use zeros() when the contents matter.
  static Tensor empty(const Shape& shape, DType dtype, Device device = Device::cpu());
  static Tensor zeros(const Shape& shape, DType dtype, Device device = Device::cpu());
  // A view over memory someone else owns; `keepalive` is held as long as any view exists.
  static Tensor from_blob(void* ptr, const Shape& shape, DType dtype, Device device,
                          std::shared_ptr<void> keepalive = nullptr);
  // A host f32 vector converted into `dtype` (rounded to nearest even) on `device`.
  static Tensor from_floats(const std::vector<float>& v, const Shape& shape, DType dtype,
                            Device device = Device::cpu());

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device : Device::cpu(); }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int dim() const { return int(shape_.size()); }
  int64_t size(int d) const;  // negative d counts from the end
  int64_t stride(int d) const;
  int64_t numel() const;
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype_); }
  bool is_contiguous() const;

  void* data_ptr() const { return static_cast<char*>(storage_->ptr) + offset_; }
  template <class T> T* data() const {
    ANVIL_CHECK(dtype_of<T>::value == dtype_, "Tensor::data", dtype_name(dtype_of<T>::value), dtype_name(dtype_));
    return static_cast<T*>(data_ptr());
  }

  // Views (no copy). view() needs a contiguous tensor; -1 in one place infers that size.
  Tensor view(const Shape& shape) const;
  Tensor slice(int dim, int64_t start, int64_t end) const;  // [start, end) along dim
  Tensor select(int dim, int64_t index) const;              // drops dim
  Tensor transpose(int d0, int d1) const;
  // Reinterpret the bytes as another dtype of the same size (e.g. bf16 storage read as raw u16).
  Tensor as_dtype(DType dtype) const;

  // Copies.
  Tensor to(Device device) const;   // returns *this (shared) if already there
  Tensor contiguous() const;
  Tensor clone() const;
  // Same shape and dtype; any devices. The destination is contiguous and src any strides, or both are on one
  // device and step alike but for one pitch each (slices along a middle dim): then one pitched device copy.
  void copy_(const Tensor& src);
  void zero_();
  // Elements converted to f32 on the host (any dtype, any device, any strides).
  std::vector<float> to_floats() const;
  float item() const;  // single-element tensor

  std::string describe() const;  // "bf16[64,4096]@gpu0"

 private:
  std::shared_ptr<Storage> storage_;
  size_t offset_ = 0;  // bytes
  Shape shape_, strides_;
  DType dtype_ = DType::f32;
};

Shape contiguous_strides(const Shape& shape);
int64_t shape_numel(const Shape& shape);

// Argument checks shared by every op front-end. Each throws anvil::Error naming `op` and the argument.
void check_defined(const char* op, const char* arg, const Tensor& t);
void check_shape(const char* op, const char* arg, const Tensor& t, const Shape& expected);
void check_dtype(const char* op, const char* arg, const Tensor& t, DType expected);
void check_dtype_in(const char* op, const char* arg, const Tensor& t, std::initializer_list<DType> allowed);
void check_contiguous(const char* op, const char* arg, const Tensor& t);
void check_same_device(const char* op, const Tensor& a, const char* aname, const Tensor& b, const char* bname);
void check_dim(const char* op, const char* arg, const Tensor& t, int ndim);
void check_aligned(const char* op, const char* arg, const Tensor& t, size_t bytes);
// A (B, D, L) tensor with contiguous rows of L, stored in (B, D, L) order or in (D, B, L) order (the transpose(0, 1)
// view of a contiguous (D, B, L) buffer, whose (D, B * L) matrix a weight gradient then reads with K = B * L).
void check_rows_bdl_or_dbl(const char* op, const char* arg, const Tensor& t, const Shape& shape);

}  // namespace anvil
