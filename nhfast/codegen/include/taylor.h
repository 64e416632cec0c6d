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
 * Every lane's arithmetic is its own and in a fixed order, so a lane's results do not depend on
 * the pass it ran in: the compiler contracts nothing into FMA (-std=c99), and the sums of the
 * convolutions are fused multiply-adds written out (NHT_FMA: one rounding, the same in every
 * pass; a product and an addition where the target has no FMA).
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
 * into one they were compiled as one, and the vector pass ran measurably slower once the
 * one-lane pass grew (see benchmarks/NOTES.md). */
#if defined(__GNUC__) || defined(__clang__)
#define NHT_NOINLINE __attribute__((noinline))
#else
#define NHT_NOINLINE
#endif

/* a b + c with one rounding where the target has FMA (its instruction, inlined), else two */
#if defined(__FMA__) || defined(__AVX512F__)
#define NHT_HAVE_FMA 1
static inline double nht_fma_d(double a, double b, double c) { return __builtin_fma(a, b, c); }
#else
#define NHT_HAVE_FMA 0
static inline double nht_fma_d(double a, double b, double c) { return a * b + c; }
#endif

#define NHT_UNROLL
#define NHT_FMA nht_fma_d
#define NHT_T double
#define NHT_NAME(f) f##_1
#define NHT_NAME_FIXED(f) f##_1u
#define NHT_LANES 1
#define NHT_ZERO 0.0
#include "taylor_instance.h"

#if defined(__GNUC__) || defined(__clang__)
#define NHT_HAVE_VEC 1
/* NHT_VW lanes as one value, the width of the machine's vector registers (a wider generic
 * vector is split by the compiler through memory). With AVX-512 a pass of 8 lanes halves
 * the instructions per lane, where 512-bit operations cost two 256-bit ones too (AMD EPYC):
 * measured faster on Henon-Heiles (see benchmarks/NOTES.md). */
#if defined(__AVX512F__)
#define NHT_VW 8
#elif defined(__AVX__)
#define NHT_VW 4
#else
#define NHT_VW 2
#endif
typedef double nht_vw __attribute__((vector_size(NHT_VW * sizeof(double))));
#if NHT_HAVE_FMA && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#endif
static inline nht_vw nht_fma_v(nht_vw a, nht_vw b, nht_vw c) {
#if NHT_HAVE_FMA && (defined(__x86_64__) || defined(__i386__)) && NHT_VW == 8
    return (nht_vw)_mm512_fmadd_pd((__m512d)a, (__m512d)b, (__m512d)c);
#elif NHT_HAVE_FMA && (defined(__x86_64__) || defined(__i386__)) && NHT_VW == 4
    return (nht_vw)_mm256_fmadd_pd((__m256d)a, (__m256d)b, (__m256d)c);
#elif NHT_HAVE_FMA && (defined(__x86_64__) || defined(__i386__)) && NHT_VW == 2
    return (nht_vw)_mm_fmadd_pd((__m128d)a, (__m128d)b, (__m128d)c);
#else
    nht_vw r; /* element by element: the scalar pass's operation on each lane */
    for (int l = 0; l < NHT_VW; ++l) r[l] = nht_fma_d(a[l], b[l], c[l]);
    return r;
#endif
}
#undef NHT_FMA
#define NHT_FMA nht_fma_v
#define NHT_T nht_vw
#define NHT_NAME(f) f##_v
#define NHT_NAME_FIXED(f) f##_vu
#define NHT_LANES NHT_VW
#define NHT_ZERO ((nht_vw){0.0})
#include "taylor_instance.h"
#else
#define NHT_HAVE_VEC 0
#define NHT_VW 1
#endif

#endif /* NH_TAYLOR_H */
