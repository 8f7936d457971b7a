// Dtype dispatch for kernels templated on their I/O element type (host and GPU sources).
#pragma once
#include "core/dtype.h"
#include "core/error.h"

// ANVIL_DISPATCH_FLOAT(dtype, T, body): runs body with T = float, bf16 or f16.
#define ANVIL_DISPATCH_FLOAT(dt, T, ...)                                              \
  switch (dt) {                                                                       \
    case ::anvil::DType::f32: { using T = float; __VA_ARGS__; break; }                \
    case ::anvil::DType::bf16: { using T = ::anvil::bf16; __VA_ARGS__; break; }       \
    case ::anvil::DType::f16: { using T = ::anvil::f16; __VA_ARGS__; break; }         \
    default: ANVIL_THROW("dispatch", "f32/bf16/f16", ::anvil::dtype_name(dt));        \
  }
