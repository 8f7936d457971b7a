// argmax_rows: the greedy pick of each logits row, on the logits' device, so a decode loop can feed it to the
// next step without a round trip through the host.
//
// Shapes:  logits (R, V) f32, 1 <= V < 2^30;  ids (R elements, e.g. (R, 1)) i32;  bad (R) i32. Same device.
// ids[r]:  the lowest column holding the largest value of row r (the host sampler's argmax_logits).
// bad[r]:  -1 for a row the host sampler accepts. Otherwise it says why that sampler would throw, which a
//          device cannot do without a synchronisation: 2c for a NaN and 2c + 1 for a +inf first met at column
//          c, 2V when every logit is -inf. ids[r] then stays a valid id (the best of the row's other values, or
//          0), safe to feed to a step that runs before the host has looked at bad.
#pragma once
#include <string>

#include "core/tensor.h"

namespace anvil {

void argmax_rows(const Tensor& logits, Tensor& ids, Tensor& bad);
// The logits checks of argmax_rows and topk_rows (kernels/topk): (R, V) f32, contiguous, R >= 1, 1 <= V < 2^30.
void check_logits_rows(const char* op, const Tensor& logits);
// What bad[r] = code means, in the host sampler's words ("nan at id 17"); "" for -1.
std::string argmax_bad_reason(int32_t code, int64_t V);
// Throws the host sampler's error (op "sample") for a code other than -1.
void throw_if_bad_logits(int32_t code, int64_t V);

// fp64 reference: logits (R, V) -> ids (R), bad (R), as above.
void argmax_rows_ref(const double* logits, int64_t R, int64_t V, int32_t* ids, int32_t* bad);

void argmax_rows_cpu(const Tensor& logits, Tensor& ids, Tensor& bad);
void argmax_rows_gpu(const Tensor& logits, Tensor& ids, Tensor& bad);

}  // namespace anvil
