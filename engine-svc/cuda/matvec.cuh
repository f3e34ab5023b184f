/* matvec.cuh - one lane's share of a quantized matrix-vector product,
 * host and device (dequant_test.cu runs it for 32 lanes on the CPU).
 *
 * The n_lanes lanes given a row walk its blocks part by part: lane l
 * takes items l, l + n_lanes, ...; item i is part i % PARTS of block i / PARTS
 * (dequant.cuh), so neighbouring lanes read neighbouring bytes.  Each part
 * is decoded once into registers and dotted with the matching activations
 * of every token; acc[t] gets the lane's partial sum for token t. */
#ifndef LP_CUDA_MATVEC_CUH
#define LP_CUDA_MATVEC_CUH

#include "dequant.cuh"
#include "kernels.h"

namespace lp_cuda {

template <typename Q>
LP_HD void matvec_lane_n(const uint8_t *wr, int64_t n_in, const float *x, int64_t x_stride,
                         int n_tok, int lane, int n_lanes, float acc[LP_CUDA_MMV_MAX_TOKENS])
{
LP_UNROLL
    for (int t = 0; t < LP_CUDA_MMV_MAX_TOKENS; t++) acc[t] = 0.0f;
    /* activations as float4 where the runs and the rows allow it: a quarter
     * of the load instructions, the same products in the same order */
    const bool x4 = Q::RUN % 4 == 0 && x_stride % 4 == 0 && (uintptr_t)x % 16 == 0;
    const int64_t n_items = n_in / Q::QK * Q::PARTS;
    for (int64_t i = lane; i < n_items; i += n_lanes) {
        const int64_t blk = i / Q::PARTS;
        const int p = (int)(i % Q::PARTS);
        float v[Q::NV];
        Q::part(wr + blk * Q::BYTES, p, v);
        const float *xb = x + blk * Q::QK;
LP_UNROLL
        for (int t = 0; t < LP_CUDA_MMV_MAX_TOKENS; t++) {
            if (t < n_tok) {
                float s = 0.0f;
                if (Q::RUN % 4 == 0 && x4) {
LP_UNROLL
                    for (int j = 0; j < Q::NV / 4; j++) {
                        const float4 xv = *reinterpret_cast<const float4 *>(
                            xb + t * x_stride + Q::elem(p, 4 * j));
                        s += v[4 * j] * xv.x;
                        s += v[4 * j + 1] * xv.y;
                        s += v[4 * j + 2] * xv.z;
                        s += v[4 * j + 3] * xv.w;
                    }
                } else {
LP_UNROLL
                    for (int k = 0; k < Q::NV; k++) s += v[k] * xb[t * x_stride + Q::elem(p, k)];
                }
                acc[t] += s;
            }
        }
    }
}

/* The walk of one warp (32 lanes) per row. */
template <typename Q>
LP_HD void matvec_lane(const uint8_t *wr, int64_t n_in, const float *x, int64_t x_stride,
                       int n_tok, int lane, float acc[LP_CUDA_MMV_MAX_TOKENS])
{
    matvec_lane_n<Q>(wr, n_in, x, x_stride, n_tok, lane, 32, acc);
}

} /* namespace lp_cuda */

#endif
