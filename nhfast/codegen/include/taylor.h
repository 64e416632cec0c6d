/*
 * nhfast taylor.h: recurrences for the normalised Taylor coefficients of elementary operations,
 * used by generated Taylor kernels (nhfast/codegen/taylor.py). Shipped in
 * nhfast/codegen/include/ with taylor_ops.h; their bytes enter the kernel cache key.
 *
 * A Taylor kernel evaluates a tape of elementary operations order by order: at order k every
 * operation computes its k-th coefficient from the coefficients 0..k of its operands (the
 * standard recurrences: Moore 1966; Jorba & Zou 2005, Exp. Math. 14). Lanes are processed in
 * passes: of NHT_VW lanes as one GCC/Clang vector value (nht_vw: 8 lanes with AVX-512, 4
 * with AVX, else 2), or of one lane (double). The recurrences (taylor_ops.h) are
 * instantiated for both types: nht_mul_1, nht_mul_v, ...
 * Every lane's arithmetic is its own and in a fixed order, with no contraction into FMA
 * (-std=c99), so a lane's results do not depend on the pass it ran in.
 *
 * A kernel generated for one fixed order (NHT_FIXED_ORDER defined before this header) also
 * gets the recurrences with every loop over the orders unrolled (nht_mul_1u, nht_mul_vu, ...):
 * its pass for that order is straight-line code with constant offsets. Unrolling changes no
 * operation and no order of operations, so the results are those of the general pass.
 */
#ifndef NH_TAYLOR_H
#define NH_TAYLOR_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "nh_abi.h"

#define NHT_ROW(a, j, i) ((a).p + (j) * (a).js + (i) * (a).is)

/* Small recurrences the compiler must inline even into a large pass (its inlining budget
 * runs out there, and a call per operation and order costs more than the operation). */
#if defined(__GNUC__) || defined(__clang__)
#define NHT_SMALL static inline __attribute__((always_inline))
#else
#define NHT_SMALL static inline
#endif

/* A kernel's passes (one lane, a vector of lanes, unrolled) are functions of their own: inlined
 * into one they were compiled as one, and the vector pass of Veselova n = 16 ran 20 % slower
 * once the one-lane pass grew. */
#if defined(__GNUC__) || defined(__clang__)
#define NHT_NOINLINE __attribute__((noinline))
#else
#define NHT_NOINLINE
#endif

#define NHT_UNROLL
#define NHT_T double
#define NHT(f) f##_1
#define NHT_LANES 1
#define NHT_ZERO 0.0
#include "taylor_ops.h"
#ifdef NHT_FIXED_ORDER
#undef NHT
#undef NHT_UNROLL
#define NHT_UNROLL _Pragma("GCC unroll 64")
#define NHT(f) f##_1u
#include "taylor_ops.h"
#undef NHT_UNROLL
#define NHT_UNROLL
#endif
#undef NHT_T
#undef NHT
#undef NHT_LANES
#undef NHT_ZERO

#if defined(__GNUC__) || defined(__clang__)
#define NHT_HAVE_VEC 1
/* NHT_VW lanes as one value, the width of the machine's vector registers (a wider generic
 * vector is split by the compiler through memory). With AVX-512 a pass of 8 lanes halves
 * the instructions per lane, where 512-bit operations cost two 256-bit ones too (AMD EPYC):
 * Henon-Heiles, 1000 trajectories, 69.7 -> 53.5 ns per trajectory-step. */
#if defined(__AVX512F__)
#define NHT_VW 8
#elif defined(__AVX__)
#define NHT_VW 4
#else
#define NHT_VW 2
#endif
typedef double nht_vw __attribute__((vector_size(NHT_VW * sizeof(double))));
#define NHT_T nht_vw
#define NHT(f) f##_v
#define NHT_LANES NHT_VW
#define NHT_ZERO ((nht_vw){0.0})
#include "taylor_ops.h"
#ifdef NHT_FIXED_ORDER
#undef NHT
#undef NHT_UNROLL
#define NHT_UNROLL _Pragma("GCC unroll 64")
#define NHT(f) f##_vu
#include "taylor_ops.h"
#undef NHT_UNROLL
#define NHT_UNROLL
#endif
#undef NHT_T
#undef NHT
#undef NHT_LANES
#undef NHT_ZERO
#else
#define NHT_HAVE_VEC 0
#define NHT_VW 1
#endif

#endif /* NH_TAYLOR_H */
