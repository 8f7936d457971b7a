// decode_stack front-end: which models it takes (the rest run their per-op step) and the switch.
#include "kernels/decode_stack/decode_stack.h"

#include <cstdlib>
#include <cstring>

namespace anvil {

bool decode_stack_enabled() {  // read at each inference state's first decode step (tests flip it)
  const char* e = std::getenv("ANVIL_DECODE_STACK");
  return !(e && std::strcmp(e, "0") == 0);
}

bool decode_stack_tracing() {
  const char* e = std::getenv("ANVIL_DECODE_STACK_TRACE");
  return e && std::strcmp(e, "1") == 0;
}

#ifdef ANVIL_HAS_GPU
std::string decode_stack_unsupported_gpu(const DecodeStackShape& s, const std::vector<DecodeStackLayer>& layers);
#endif

std::string decode_stack_unsupported(const DecodeStackShape& s, const std::vector<DecodeStackLayer>& layers) {
  if (!decode_stack_enabled()) return "ANVIL_DECODE_STACK unset (it is 0)";
  if (layers.empty()) return "at least one layer";
  const Device dev = layers[0].qkv.w.device();
  if (s.HD != 32 && s.HD != 64 && s.HD != 128) return str("head dim 32, 64 or 128, got ", s.HD);
  if (s.NKV <= 0 || s.NH % s.NKV != 0) return str("NH a multiple of NKV, got ", s.NH, " and ", s.NKV);
  const int64_t G = s.NH / s.NKV;
  if (G != 1 && G != 2 && G != 4 && G != 8) return str("NH / NKV in {1, 2, 4, 8}, got ", G);
  if (s.C % 16 != 0 || s.H % 16 != 0) return str("C and H multiples of 16, got ", s.C, " and ", s.H);
  const DType wdt = layers[0].qkv.w.dtype();
  if (wdt != DType::bf16 && wdt != DType::e4m3fn) return str("bf16 or e4m3fn weights, got ", dtype_name(wdt));
  const int64_t QD = s.NH * s.HD, KVD = s.NKV * s.HD;
  if (wdt == DType::e4m3fn && (s.C % 128 != 0 || QD % 128 != 0 || s.H % 128 != 0))  // tiles of 128-byte blocks
    return str("e4m3fn weights with C, NH * HD and H multiples of 128, got ", s.C, ", ", QD, " and ", s.H);
  for (const DecodeStackLayer& d : layers) {
    const DecodeStackWeight* ws[4] = {&d.qkv, &d.o, &d.gate_up, &d.down};
    const Shape shapes[4] = {{QD + 2 * KVD, s.C}, {s.C, QD}, {2 * s.H, s.C}, {s.C, s.H}};
    for (int m = 0; m < 4; m++) {
      const Tensor& w = ws[m]->w;
      if (w.dtype() != wdt) return "one weight dtype in every projection";
      if (w.shape() != shapes[m] || !w.is_contiguous())
        return str("a contiguous weight of ", shape_str(shapes[m]), ", got ", w.describe());
      if ((reinterpret_cast<uintptr_t>(w.data_ptr()) & 15) != 0) return "16-byte aligned weights";
      if (dtype_is_fp8(wdt)) {
        const Tensor& sc = ws[m]->scale;
        const bool shaped = sc.defined() && (sc.numel() == 1 || sc.numel() == shapes[m][0]);
        if (!shaped || sc.dtype() != DType::f32 || !sc.is_contiguous())
          return str("f32 weight scales of (1) or (", shapes[m][0], "), got ", sc.describe());
      }
    }
    for (const Tensor* t : {&d.in_norm, &d.post_norm})
      if (t->dtype() != DType::bf16 || t->numel() != s.C || (reinterpret_cast<uintptr_t>(t->data_ptr()) & 15) != 0)
        return str("16-byte aligned bf16 norm weights of (", s.C, "), got ", t->describe());
    for (const Tensor* t : {&d.k_cache, &d.v_cache})
      if (t->dtype() != DType::bf16 || t->dim() != 4 || t->size(0) != 1 || t->size(2) != s.NKV || t->size(3) != s.HD ||
          !t->is_contiguous())
        return str("bf16 caches of (1, Tmax, ", s.NKV, ", ", s.HD, "), got ", t->describe());
  }
  if (dev.is_cpu()) return "a GPU model";
#ifdef ANVIL_HAS_GPU
  return decode_stack_unsupported_gpu(s, layers);
#else
  return "a build with GPU support";
#endif
}

#ifndef ANVIL_HAS_GPU
DecodeStack::DecodeStack(const DecodeStackShape& s, const std::vector<DecodeStackLayer>& layers, const Tensor&,
                         Tensor*) {
  const std::string why = decode_stack_unsupported(s, layers);  // never empty here: no GPU tensors exist
  ANVIL_THROW("decode_stack", "a model decode_stack supports", why);
}
void DecodeStack::run(const Tensor&, Tensor&, Tensor&, Tensor&) const {
  ANVIL_THROW("decode_stack", "a build with GPU support", "a CPU-only build");
}
#endif

}  // namespace anvil
