/*
 * nhfast taylor_ops.h: the Taylor recurrences of taylor.h for one lane type. A template:
 * included by taylor.h once per type, with NHT_T (the lane type: double, or a vector of 8
 * doubles), NHT(f) (the name of f for that type) and NHT_LANES defined. No include guard.
 *
 * NHT_UNROLL precedes every loop over the orders j of a convolution: empty in the kernels'
 * general passes, a request to unroll completely in a pass for one fixed order (there every
 * trip count is a constant; see taylor.h).
 *
 * From order 1 on, a recurrence that divides by an order-0 value (quotient, power, sqrt, log)
 * multiplies by its reciprocal instead: 1 / b^[0] does not wait for the order's sum, so the
 * division leaves the chain of dependent operations (a quotient's coefficient then waits on
 * a multiplication, 3 cycles, instead of a division, 13). Order 0 divides.
 *
 * Coefficient j of component i of an operand a lives at a.p[j*a.js + i*a.is] (an NHT_T: the
 * lanes of a pass); outputs are work variables, o[j*ojs + i]. Constants have no higher
 * coefficients: only the *c* forms and the flags below read them, and only their value.
 */

/* c - a b with one rounding (NHT_FMA: a b + c, see taylor.h) */
#define NHT_FNMA(a, b, c) NHT_FMA(-(a), b, c)

typedef struct {
    const NHT_T *p;
    int64_t js, is;
} NHT(nht_in);

/* o^[k] = c * a^[k], c a constant. */
NHT_SMALL void NHT(nht_cmul)(int64_t k, int64_t nc, NHT_T *o, int64_t ojs, NHT(nht_in) c,
                                 NHT(nht_in) a) {
    for (int64_t i = 0; i < nc; ++i) o[k * ojs + i] = c.p[i * c.is] * NHT_ROW(a, k, i)[0];
}

/* o^[k] = s * a^[k], s a number (the first term of a linear combination). */
NHT_SMALL void NHT(nht_scale)(int64_t k, int64_t nc, NHT_T *o, int64_t ojs, double s,
                                  NHT(nht_in) a) {
    for (int64_t i = 0; i < nc; ++i) o[k * ojs + i] = s * NHT_ROW(a, k, i)[0];
}

/* o^[k] += s * a^[k] (further terms). */
NHT_SMALL void NHT(nht_axpy)(int64_t k, int64_t nc, NHT_T *o, int64_t ojs, double s,
                                 NHT(nht_in) a) {
    if (s == 1.0)
        for (int64_t i = 0; i < nc; ++i) o[k * ojs + i] += NHT_ROW(a, k, i)[0];
    else if (s == -1.0)
        for (int64_t i = 0; i < nc; ++i) o[k * ojs + i] -= NHT_ROW(a, k, i)[0];
    else
        for (int64_t i = 0; i < nc; ++i) o[k * ojs + i] += s * NHT_ROW(a, k, i)[0];
}

/* o^[k] = s1 a1^[k] + s2 a2^[k] + ... (two to four terms, added left to right): a linear
 * combination in one pass over the components, each operand read once and o written once.
 * The same bits as nht_scale and nht_axpy in sequence (a product with 1 or -1 is exact). */
NHT_SMALL void NHT(nht_lin2)(int64_t k, int64_t nc, NHT_T *o, int64_t ojs, double s1,
                             NHT(nht_in) a1, double s2, NHT(nht_in) a2) {
    for (int64_t i = 0; i < nc; ++i)
        o[k * ojs + i] = s1 * NHT_ROW(a1, k, i)[0] + s2 * NHT_ROW(a2, k, i)[0];
}

NHT_SMALL void NHT(nht_lin3)(int64_t k, int64_t nc, NHT_T *o, int64_t ojs, double s1,
                             NHT(nht_in) a1, double s2, NHT(nht_in) a2, double s3,
                             NHT(nht_in) a3) {
    for (int64_t i = 0; i < nc; ++i)
        o[k * ojs + i] = s1 * NHT_ROW(a1, k, i)[0] + s2 * NHT_ROW(a2, k, i)[0] +
                         s3 * NHT_ROW(a3, k, i)[0];
}

NHT_SMALL void NHT(nht_lin4)(int64_t k, int64_t nc, NHT_T *o, int64_t ojs, double s1,
                             NHT(nht_in) a1, double s2, NHT(nht_in) a2, double s3,
                             NHT(nht_in) a3, double s4, NHT(nht_in) a4) {
    for (int64_t i = 0; i < nc; ++i)
        o[k * ojs + i] = s1 * NHT_ROW(a1, k, i)[0] + s2 * NHT_ROW(a2, k, i)[0] +
                         s3 * NHT_ROW(a3, k, i)[0] + s4 * NHT_ROW(a4, k, i)[0];
}

/* o^[0] += c (the constant term of a sum; at k = 0 only). */
NHT_SMALL void NHT(nht_addc)(int64_t nc, NHT_T *o, NHT(nht_in) c) {
    for (int64_t i = 0; i < nc; ++i) o[i] += c.p[i * c.is];
}

/* sum_{j=j0..j1} a^[j] b^[m-j] of component i, in two partial sums (even and odd steps from
 * j0) added at the end: two chains of additions in flight instead of one. Both passes use it
 * for scalar values (nc == 1), so a lane gets the same bits in either; zero if j1 < j0. */
NHT_SMALL NHT_T NHT(nht_dot2)(NHT(nht_in) a, NHT(nht_in) b, int64_t m, int64_t j0,
                                  int64_t j1, int64_t i) {
    NHT_T e = NHT_ZERO, d = NHT_ZERO;
    int64_t j = j0;
    NHT_UNROLL for (; j + 1 <= j1; j += 2) {
        e = NHT_FMA(NHT_ROW(a, j, i)[0], NHT_ROW(b, m - j, i)[0], e);
        d = NHT_FMA(NHT_ROW(a, j + 1, i)[0], NHT_ROW(b, m - j - 1, i)[0], d);
    }
    if (j <= j1) e = NHT_FMA(NHT_ROW(a, j, i)[0], NHT_ROW(b, m - j, i)[0], e);
    return e + d;
}

/* Scalar values (nc == 1) in either pass: the forms below through nht_dot2. */
NHT_SMALL void NHT(nht_mul1)(int64_t k, NHT_T *o, int64_t ojs, NHT(nht_in) a, NHT(nht_in) b) {
    o[k * ojs] = NHT(nht_dot2)(a, b, k, 0, k, 0);
}

NHT_SMALL void NHT(nht_submul1)(int64_t k, NHT_T *o, int64_t ojs, NHT(nht_in) a,
                                    NHT(nht_in) b, int64_t j0) {
    o[k * ojs] = o[k * ojs] - NHT(nht_dot2)(a, b, k, j0, k, 0);
}

NHT_SMALL void NHT(nht_sqr1)(int64_t k, NHT_T *o, int64_t ojs, NHT(nht_in) a) {
    NHT_T s = NHT(nht_dot2)(a, a, k, 0, k > 0 ? (k - 1) / 2 : -1, 0);
    s = 2.0 * s;
    if (k % 2 == 0) s = NHT_FMA(NHT_ROW(a, k / 2, 0)[0], NHT_ROW(a, k / 2, 0)[0], s);
    o[k * ojs] = s;
}

/* s = a^2 and o = s a (a cube) of a scalar value in one pass over the pairs (j, k - j),
 * j < k - j, of order k:
 *   s^[k] = 2 sum_j a^[j] a^[k-j] (+ a^[k/2]^2),
 *   o^[k] = sum_j (s^[j] a^[k-j] + s^[k-j] a^[j]) (+ s^[k/2] a^[k/2]),
 * where a^[j] and a^[k-j] are read once for three products (the square and the product in
 * sequence read six values for them). The pair j = 0 of o needs s^[k]: it comes last. Each
 * sum runs in two partial sums (odd and even j). Convolutions are bound by their loads (four
 * partial sums instead of two: no faster); measured faster on the FPU-beta chain, a cube per
 * spring (see benchmarks/NOTES.md). */
NHT_SMALL void NHT(nht_cube1)(int64_t k, NHT_T *o, int64_t ojs, NHT_T *s, NHT(nht_in) a) {
    if (k == 0) {
        const NHT_T a0 = NHT_ROW(a, 0, 0)[0];
        s[0] = a0 * a0;
        o[0] = s[0] * a0;
        return;
    }
    const int64_t h = (k - 1) / 2; /* the last j with j < k - j */
    NHT_T se = NHT_ROW(a, 0, 0)[0] * NHT_ROW(a, k, 0)[0], sd = NHT_ZERO;
    NHT_T oe = NHT_ZERO, od = NHT_ZERO;
    int64_t j = 1;
    NHT_UNROLL for (; j + 1 <= h; j += 2) {
        const NHT_T x0 = NHT_ROW(a, j, 0)[0], y0 = NHT_ROW(a, k - j, 0)[0];
        const NHT_T x1 = NHT_ROW(a, j + 1, 0)[0], y1 = NHT_ROW(a, k - j - 1, 0)[0];
        sd = NHT_FMA(x0, y0, sd);
        od = NHT_FMA(s[(k - j) * ojs], x0, NHT_FMA(s[j * ojs], y0, od));
        se = NHT_FMA(x1, y1, se);
        oe = NHT_FMA(s[(k - j - 1) * ojs], x1, NHT_FMA(s[(j + 1) * ojs], y1, oe));
    }
    if (j <= h) {
        const NHT_T x0 = NHT_ROW(a, j, 0)[0], y0 = NHT_ROW(a, k - j, 0)[0];
        sd = NHT_FMA(x0, y0, sd);
        od = NHT_FMA(s[(k - j) * ojs], x0, NHT_FMA(s[j * ojs], y0, od));
    }
    NHT_T sk = 2.0 * (se + sd);
    NHT_T ok = oe + od;
    if (k % 2 == 0) {
        const NHT_T m = NHT_ROW(a, k / 2, 0)[0];
        sk = NHT_FMA(m, m, sk);
        ok = NHT_FMA(s[(k / 2) * ojs], m, ok);
    }
    s[k * ojs] = sk;
    o[k * ojs] = ok + (s[0] * NHT_ROW(a, k, 0)[0] + sk * NHT_ROW(a, 0, 0)[0]);
}

/* The cube of a scalar value (nc == 1; see nht_cube1), its square in s. */
NHT_SMALL void NHT(nht_cube)(int64_t k, int64_t nc, NHT_T *o, int64_t ojs, NHT_T *s,
                                 NHT(nht_in) a) {
    (void)nc;
    NHT(nht_cube1)(k, o, ojs, s, a);
}

NHT_SMALL void NHT(nht_div1)(int64_t k, NHT_T *o, int64_t ojs, NHT(nht_in) a, int a_const,
                                 NHT(nht_in) b) {
    const NHT(nht_in) oi = {o, ojs, 1};
    const NHT_T s = a_const ? (k == 0 ? a.p[0] : NHT_ZERO) : NHT_ROW(a, k, 0)[0];
    const NHT_T b0 = NHT_ROW(b, 0, 0)[0];
    /* a_const == 2: a = 1, so o^[0] = 1 / b^[0] (the same bits) serves every order */
    const NHT_T r = a_const == 2 && k > 0 ? o[0] : 1.0 / b0;
    o[k * ojs] = k == 0 ? s / b0 : (s - NHT(nht_dot2)(b, oi, k, 1, k, 0)) * r;
}

/* Products, squares and quotients of vector values: the components go in blocks (of 16, 8,
 * 4 and 1 in the one-lane pass, where a 512-bit register holds 8 components; of 4 and 1 in a
 * vector pass, whose values are vectors of lanes) whose sums stay in registers through the
 * loop over j (accumulating in o itself stored and reloaded every term, since o may alias the
 * operands), several independent chains of additions in flight. Each component's sum runs
 * over j in the same order in every block size and pass, so a lane gets the same bits in
 * either pass. In the one-lane pass a block of 8 is one register and one chain of additions
 * (3 cycles each): blocks of 16 keep two in flight, measured faster on Veselova n = 64;
 * blocks of 32 were no faster there and slower at n = 16, whose blocks of 8 then left acc in
 * memory (see benchmarks/NOTES.md). */
#define NHT_A1(x, j, i) NHT_ROW(x, j, i)[0]
#define NHT_BLK_MAX 16
/* Blocks over components [i, nc): of 16 and 8 (one-lane pass only), 4, then 1; `blk(w)` is
 * the call for a block of w components at i (a constant after inlining). */
#define NHT_BLOCKS(blk)                                                                         \
    do {                                                                                        \
        int64_t i = 0;                                                                          \
        if (NHT_LANES == 1) {                                                                   \
            for (; i + 16 <= nc; i += 16) blk(16);                                              \
            for (; i + 8 <= nc; i += 8) blk(8);                                                 \
        }                                                                                       \
        for (; i + 4 <= nc; i += 4) blk(4);                                                     \
        for (; i < nc; ++i) blk(1);                                                             \
    } while (0)

/* components [i0, i0 + W) of o^[k]: sum_{j=0..k} a^[j] b^[k-j] (first_from_o = 0), or
 * o^[k] - sum_{j=j0..k} a^[j] b^[k-j] (first_from_o = 1) */
NHT_SMALL void NHT(nht_conv_blk)(int64_t k, int64_t i0, int W, NHT_T *ok, NHT(nht_in) a,
                                 NHT(nht_in) b, int64_t j0, int first_from_o) {
    NHT_T acc[NHT_BLK_MAX];
    if (first_from_o) {
        for (int c = 0; c < W; ++c) acc[c] = ok[i0 + c];
        NHT_UNROLL for (int64_t j = j0; j <= k; ++j)
            for (int c = 0; c < W; ++c)
                acc[c] = NHT_FNMA(NHT_A1(a, j, i0 + c), NHT_A1(b, k - j, i0 + c), acc[c]);
    } else {
        for (int c = 0; c < W; ++c) acc[c] = NHT_A1(a, 0, i0 + c) * NHT_A1(b, k, i0 + c);
        NHT_UNROLL for (int64_t j = 1; j <= k; ++j)
            for (int c = 0; c < W; ++c)
                acc[c] = NHT_FMA(NHT_A1(a, j, i0 + c), NHT_A1(b, k - j, i0 + c), acc[c]);
    }
    for (int c = 0; c < W; ++c) ok[i0 + c] = acc[c];
}

/* o^[k] = sum_{j=0..k} a^[j] b^[k-j]. */
NHT_SMALL void NHT(nht_mul)(int64_t k, int64_t nc, NHT_T *o, int64_t ojs, NHT(nht_in) a,
                                NHT(nht_in) b) {
    if (nc == 1) {
        NHT(nht_mul1)(k, o, ojs, a, b);
        return;
    }
    NHT_T *ok = o + k * ojs;
#define NHT_MUL_BLK(w) NHT(nht_conv_blk)(k, i, w, ok, a, b, 0, 0)
    NHT_BLOCKS(NHT_MUL_BLK);
#undef NHT_MUL_BLK
}

/* o^[k] -= sum_{j=j0..k} a^[j] b^[k-j] (part of a product; j0 = 1 leaves out a^[0]). */
NHT_SMALL void NHT(nht_submul)(int64_t k, int64_t nc, NHT_T *o, int64_t ojs, NHT(nht_in) a,
                                   NHT(nht_in) b, int64_t j0) {
    if (nc == 1) {
        NHT(nht_submul1)(k, o, ojs, a, b, j0);
        return;
    }
    NHT_T *ok = o + k * ojs;
#define NHT_SUBMUL_BLK(w) NHT(nht_conv_blk)(k, i, w, ok, a, b, j0, 1)
    NHT_BLOCKS(NHT_SUBMUL_BLK);
#undef NHT_SUBMUL_BLK
}

/* components [i0, i0 + W) of o^[k] = sum_{j=0..k} a^[j] a^[k-j], by symmetry */
NHT_SMALL void NHT(nht_sqr_blk)(int64_t k, int64_t i0, int W, NHT_T *ok, NHT(nht_in) a) {
    NHT_T acc[NHT_BLK_MAX];
    for (int c = 0; c < W; ++c) acc[c] = NHT_ZERO;
    NHT_UNROLL for (int64_t j = 0; 2 * j < k; ++j)
        for (int c = 0; c < W; ++c)
            acc[c] = NHT_FMA(NHT_A1(a, j, i0 + c), NHT_A1(a, k - j, i0 + c), acc[c]);
    for (int c = 0; c < W; ++c) acc[c] = 2.0 * acc[c];
    if (k % 2 == 0)
        for (int c = 0; c < W; ++c)
            acc[c] = NHT_FMA(NHT_A1(a, k / 2, i0 + c), NHT_A1(a, k / 2, i0 + c), acc[c]);
    for (int c = 0; c < W; ++c) ok[i0 + c] = acc[c];
}

/* o^[k] = sum_{j=0..k} a^[j] a^[k-j], by symmetry. */
NHT_SMALL void NHT(nht_sqr)(int64_t k, int64_t nc, NHT_T *o, int64_t ojs, NHT(nht_in) a) {
    if (nc == 1) {
        NHT(nht_sqr1)(k, o, ojs, a);
        return;
    }
    NHT_T *ok = o + k * ojs;
#define NHT_SQR_BLK(w) NHT(nht_sqr_blk)(k, i, w, ok, a)
    NHT_BLOCKS(NHT_SQR_BLK);
#undef NHT_SQR_BLK
}

/* Up to three products of vector values that share operands, in one pass over the pairs
 * (j, k - j), j < k - j, of order k. Product p (p < np) is x_a * x_b with a = pa_p and b = pb_p
 * indices of the operands x_0.. x_{nop-1} (nop <= 4): a square when a == b (the sum of
 * nht_sqr_blk), else
 *   o^[k] = sum_j (x_a^[j] x_b^[k-j] + x_b^[j] x_a^[k-j]) (+ x_a^[k/2] x_b^[k/2]).
 * Each operand's coefficients j and k - j are loaded once for all the products, where the
 * products one by one load two values per term: a convolution is bound by its loads. The
 * generator (taylor.py, _fused) groups products with a common operand. np, nop and the
 * indices are constants of the call, so that every choice below is made at compile time
 * (arrays of indices were not folded: the group ran slower than the products alone). */
/* x and y in registers (vector passes, x86): an empty asm that takes and gives them there.
 * Left alone, GCC folds each use into its multiplication as a memory operand and loads the
 * value again for every product (Veselova n = 16: no fewer loads than the products alone).
 * The one-lane pass vectorises its blocks of components instead: there it would stop that. */
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define NHT_KEEP(x, y, used)                                                                    \
    do {                                                                                        \
        if (NHT_LANES > 1 && (used)) __asm__("" : "+v"(x), "+v"(y));                            \
    } while (0)
#else
#define NHT_KEEP(x, y, used) ((void)0)
#endif
#define NHT_PICK(v, q) ((q) == 0 ? v##0 : (q) == 1 ? v##1 : (q) == 2 ? v##2 : v##3)
/* s + x_a y_b (+ x_b y_a): the running sum s of a product's pairs with one or two terms */
#define NHT_TERM(a, b, s)                                                                       \
    ((a) == (b) ? NHT_FMA(NHT_PICK(x, a), NHT_PICK(y, a), s)                                    \
                : NHT_FMA(NHT_PICK(x, b), NHT_PICK(y, a),                                       \
                          NHT_FMA(NHT_PICK(x, a), NHT_PICK(y, b), s)))
#define NHT_MID(a, b, r) NHT_FMA(NHT_PICK(m, a), NHT_PICK(m, b), r)
NHT_SMALL void NHT(nht_prods_blk)(int64_t k, int64_t i0, int W, int np, NHT_T *o0,
                                  int64_t oj0, NHT_T *o1, int64_t oj1, NHT_T *o2, int64_t oj2,
                                  int nop, NHT(nht_in) a0, NHT(nht_in) a1, NHT(nht_in) a2,
                                  NHT(nht_in) a3, int pa0, int pb0, int pa1, int pb1, int pa2,
                                  int pb2) {
    NHT_T s0[NHT_BLK_MAX], s1[NHT_BLK_MAX], s2[NHT_BLK_MAX];
    for (int c = 0; c < W; ++c) s0[c] = s1[c] = s2[c] = NHT_ZERO;
    NHT_UNROLL for (int64_t j = 0; 2 * j < k; ++j)
        for (int c = 0; c < W; ++c) {
            NHT_T x0 = NHT_A1(a0, j, i0 + c), y0 = NHT_A1(a0, k - j, i0 + c);
            NHT_T x1 = nop > 1 ? NHT_A1(a1, j, i0 + c) : NHT_ZERO;
            NHT_T y1 = nop > 1 ? NHT_A1(a1, k - j, i0 + c) : NHT_ZERO;
            NHT_T x2 = nop > 2 ? NHT_A1(a2, j, i0 + c) : NHT_ZERO;
            NHT_T y2 = nop > 2 ? NHT_A1(a2, k - j, i0 + c) : NHT_ZERO;
            NHT_T x3 = nop > 3 ? NHT_A1(a3, j, i0 + c) : NHT_ZERO;
            NHT_T y3 = nop > 3 ? NHT_A1(a3, k - j, i0 + c) : NHT_ZERO;
            NHT_KEEP(x0, y0, 1);
            NHT_KEEP(x1, y1, nop > 1);
            NHT_KEEP(x2, y2, nop > 2);
            NHT_KEEP(x3, y3, nop > 3);
            s0[c] = NHT_TERM(pa0, pb0, s0[c]);
            if (np > 1) s1[c] = NHT_TERM(pa1, pb1, s1[c]);
            if (np > 2) s2[c] = NHT_TERM(pa2, pb2, s2[c]);
        }
    const int even = k % 2 == 0;
    for (int c = 0; c < W; ++c) {
        const NHT_T m0 = NHT_A1(a0, k / 2, i0 + c);
        const NHT_T m1 = nop > 1 ? NHT_A1(a1, k / 2, i0 + c) : NHT_ZERO;
        const NHT_T m2 = nop > 2 ? NHT_A1(a2, k / 2, i0 + c) : NHT_ZERO;
        const NHT_T m3 = nop > 3 ? NHT_A1(a3, k / 2, i0 + c) : NHT_ZERO;
        NHT_T r = pa0 == pb0 ? 2.0 * s0[c] : s0[c];
        if (even) r = NHT_MID(pa0, pb0, r);
        o0[k * oj0 + i0 + c] = r;
        if (np > 1) {
            r = pa1 == pb1 ? 2.0 * s1[c] : s1[c];
            if (even) r = NHT_MID(pa1, pb1, r);
            o1[k * oj1 + i0 + c] = r;
        }
        if (np > 2) {
            r = pa2 == pb2 ? 2.0 * s2[c] : s2[c];
            if (even) r = NHT_MID(pa2, pb2, r);
            o2[k * oj2 + i0 + c] = r;
        }
    }
}
#undef NHT_KEEP
#undef NHT_PICK
#undef NHT_TERM
#undef NHT_MID

/* The products of nht_prods_blk over components [0, nc) (unused outputs and operands repeat
 * the first). */
NHT_SMALL void NHT(nht_prods)(int64_t k, int64_t nc, int np, NHT_T *o0, int64_t oj0, NHT_T *o1,
                              int64_t oj1, NHT_T *o2, int64_t oj2, int nop, NHT(nht_in) a0,
                              NHT(nht_in) a1, NHT(nht_in) a2, NHT(nht_in) a3, int pa0, int pb0,
                              int pa1, int pb1, int pa2, int pb2) {
#define NHT_PRODS_BLK(w)                                                                        \
    NHT(nht_prods_blk)(k, i, w, np, o0, oj0, o1, oj1, o2, oj2, nop, a0, a1, a2, a3, pa0, pb0,   \
                       pa1, pb1, pa2, pb2)
    NHT_BLOCKS(NHT_PRODS_BLK);
#undef NHT_PRODS_BLK
}

/* components [i0, i0 + W) of o = a / b */
NHT_SMALL void NHT(nht_div_blk)(int64_t k, int64_t i0, int W, NHT_T *o, int64_t ojs,
                                NHT(nht_in) a, int a_const, NHT(nht_in) b) {
    NHT_T acc[NHT_BLK_MAX];
    for (int c = 0; c < W; ++c)
        acc[c] = a_const ? (k == 0 ? a.p[(i0 + c) * a.is] : NHT_ZERO) : NHT_A1(a, k, i0 + c);
    NHT_UNROLL for (int64_t j = 1; j <= k; ++j)
        for (int c = 0; c < W; ++c)
            acc[c] = NHT_FNMA(NHT_A1(b, j, i0 + c), o[(k - j) * ojs + i0 + c], acc[c]);
    for (int c = 0; c < W; ++c)
        o[k * ojs + i0 + c] = k == 0         ? acc[c] / NHT_A1(b, 0, i0 + c)
                              : a_const == 2 ? acc[c] * o[i0 + c]
                                             : acc[c] * (1.0 / NHT_A1(b, 0, i0 + c));
}

/* o = a / b: o^[k] = (a^[k] - sum_{j=1..k} b^[j] o^[k-j]) / b^[0]; a_const: a is a constant;
 * a_const == 2: a is 1, and o^[0] = 1 / b^[0] (the same bits) stands for the division at the
 * higher orders (one division per component and step, not per order). */
NHT_SMALL void NHT(nht_div)(int64_t k, int64_t nc, NHT_T *o, int64_t ojs, NHT(nht_in) a,
                                int a_const, NHT(nht_in) b) {
    if (nc == 1) {
        NHT(nht_div1)(k, o, ojs, a, a_const, b);
        return;
    }
#define NHT_DIV_BLK(w) NHT(nht_div_blk)(k, i, w, o, ojs, a, a_const, b)
    NHT_BLOCKS(NHT_DIV_BLK);
#undef NHT_DIV_BLK
}

/* components [i0, i0 + W) of o = 1 / (c + s): c a constant vector, s a scalar series */
NHT_SMALL void NHT(nht_recip_cs_blk)(int64_t k, int64_t i0, int W, NHT_T *o, int64_t ojs,
                                     NHT(nht_in) c, NHT(nht_in) s) {
    if (k == 0) {
        for (int q = 0; q < W; ++q) o[i0 + q] = 1.0 / (NHT_A1(s, 0, 0) + c.p[(i0 + q) * c.is]);
        return;
    }
    NHT_T acc[NHT_BLK_MAX];
    for (int q = 0; q < W; ++q) acc[q] = NHT_ZERO;
    NHT_UNROLL for (int64_t j = 1; j <= k; ++j) {
        const NHT_T sj = NHT_A1(s, j, 0);
        for (int q = 0; q < W; ++q) acc[q] = NHT_FNMA(sj, o[(k - j) * ojs + i0 + q], acc[q]);
    }
    for (int q = 0; q < W; ++q) o[k * ojs + i0 + q] = acc[q] * o[i0 + q];
}

/* o = 1 / (c + s) for a constant vector c and a scalar series s (a diagonal shifted per lane,
 * 1 / (j + k3)): above order 0 the sum's coefficients are s's, one value for every component,
 * so no vector of them is kept; o^[k] = -(sum_{j=1..k} s^[j] o^[k-j]) o^[0], the operations
 * of nht_div on the materialised sum (the same bits). */
NHT_SMALL void NHT(nht_recip_cs)(int64_t k, int64_t nc, NHT_T *o, int64_t ojs, NHT(nht_in) c,
                                 NHT(nht_in) s) {
#define NHT_RECIP_CS_BLK(w) NHT(nht_recip_cs_blk)(k, i, w, o, ojs, c, s)
    NHT_BLOCKS(NHT_RECIP_CS_BLK);
#undef NHT_RECIP_CS_BLK
}

/* o = a^alpha: k a^[0] o^[k] = sum_{j=0..k-1} (alpha (k-j) - j) a^[k-j] o^[j]; o^[0] per lane. */
NHT_SMALL void NHT(nht_pow)(int64_t k, int64_t nc, NHT_T *o, int64_t ojs, NHT(nht_in) a,
                                double alpha) {
    for (int64_t i = 0; i < nc; ++i) {
        if (k == 0) {
            double *od = (double *)&o[i];
            const double *ad = (const double *)NHT_ROW(a, 0, i);
            for (int l = 0; l < NHT_LANES; ++l) od[l] = pow(ad[l], alpha);
            continue;
        }
        NHT_T s = NHT_ZERO;
        NHT_UNROLL for (int64_t j = 0; j < k; ++j)
            s = NHT_FMA((alpha * (double)(k - j) - (double)j) * NHT_ROW(a, k - j, i)[0],
                        o[j * ojs + i], s);
        o[k * ojs + i] = s * (1.0 / ((double)k * NHT_ROW(a, 0, i)[0]));
    }
}

/* o = sqrt(a): o^[k] = (a^[k] - sum_{j=1..k-1} o^[j] o^[k-j]) / (2 o^[0]). */
NHT_SMALL void NHT(nht_sqrt)(int64_t k, int64_t nc, NHT_T *o, int64_t ojs, NHT(nht_in) a) {
    for (int64_t i = 0; i < nc; ++i) {
        if (k == 0) {
            double *od = (double *)&o[i];
            const double *ad = (const double *)NHT_ROW(a, 0, i);
            for (int l = 0; l < NHT_LANES; ++l) od[l] = sqrt(ad[l]);
            continue;
        }
        NHT_T s = NHT_ZERO;
        NHT_UNROLL for (int64_t j = 1; 2 * j < k; ++j)
            s = NHT_FMA(o[j * ojs + i], o[(k - j) * ojs + i], s);
        s = 2.0 * s;
        if (k % 2 == 0) s = NHT_FMA(o[(k / 2) * ojs + i], o[(k / 2) * ojs + i], s);
        o[k * ojs + i] = (NHT_ROW(a, k, i)[0] - s) * (0.5 / o[i]);
    }
}

/* o' = s a' e (k >= 1): o^[k] = (s / k) sum_{j=1..k} j a^[j] e^[k-j]. exp: e = o; sin: e = cos;
 * cos: e = sin, s = -1; atan: e = 1 / (1 + a^2); ... (o^[0] is set by the caller). */
/* components [i0, i0 + W) of the chain rule's sum, in registers (see nht_conv_blk) */
NHT_SMALL void NHT(nht_chain_blk)(int64_t k, int64_t i0, int W, NHT_T *ok, NHT(nht_in) a,
                                  NHT(nht_in) e, double s) {
    NHT_T acc[NHT_BLK_MAX];
    for (int c = 0; c < W; ++c) acc[c] = NHT_A1(a, 1, i0 + c) * NHT_A1(e, k - 1, i0 + c);
    NHT_UNROLL for (int64_t j = 2; j <= k; ++j)
        for (int c = 0; c < W; ++c)
            acc[c] = NHT_FMA((double)j * NHT_A1(a, j, i0 + c), NHT_A1(e, k - j, i0 + c), acc[c]);
    for (int c = 0; c < W; ++c) ok[i0 + c] = (s / (double)k) * acc[c];
}

NHT_SMALL void NHT(nht_chain)(int64_t k, int64_t nc, NHT_T *o, int64_t ojs, NHT(nht_in) a,
                                  NHT(nht_in) e, double s) {
    NHT_T *ok = o + k * ojs;
#define NHT_CHAIN_BLK(w) NHT(nht_chain_blk)(k, i, w, ok, a, e, s)
    NHT_BLOCKS(NHT_CHAIN_BLK);
#undef NHT_CHAIN_BLK
}
#undef NHT_BLOCKS
#undef NHT_BLK_MAX
#undef NHT_A1

/* o = log(a): o^[k] = (a^[k] - (1/k) sum_{j=1..k-1} j o^[j] a^[k-j]) / a^[0]. */
NHT_SMALL void NHT(nht_log)(int64_t k, int64_t nc, NHT_T *o, int64_t ojs, NHT(nht_in) a) {
    for (int64_t i = 0; i < nc; ++i) {
        if (k == 0) {
            double *od = (double *)&o[i];
            const double *ad = (const double *)NHT_ROW(a, 0, i);
            for (int l = 0; l < NHT_LANES; ++l) od[l] = log(ad[l]);
            continue;
        }
        NHT_T s = NHT_ZERO;
        NHT_UNROLL for (int64_t j = 1; j < k; ++j)
            s = NHT_FMA((double)j * o[j * ojs + i], NHT_ROW(a, k - j, i)[0], s);
        o[k * ojs + i] = (NHT_ROW(a, k, i)[0] - (1.0 / (double)k) * s) * (1.0 / NHT_ROW(a, 0, i)[0]);
    }
}

/* o = F(a) at order 0, per lane: F one of the C functions below (by code). */
NHT_SMALL void NHT(nht_init)(int64_t nc, NHT_T *o, NHT(nht_in) a, int f) {
    for (int64_t i = 0; i < nc; ++i) {
        double *od = (double *)&o[i];
        const double *ad = (const double *)NHT_ROW(a, 0, i);
        for (int l = 0; l < NHT_LANES; ++l) {
            const double v = ad[l];
            double r;
            switch (f) {
            case 0: r = exp(v); break;
            case 1: r = sin(v); break;
            case 2: r = cos(v); break;
            case 3: r = sinh(v); break;
            case 4: r = cosh(v); break;
            case 5: r = atan(v); break;
            case 6: r = asin(v); break;
            case 7: r = acos(v); break;
            case 8: r = asinh(v); break;
            case 9: r = acosh(v); break;
            case 10: r = atanh(v); break;
            default: r = NAN;
            }
            od[l] = r;
        }
    }
}

/* o = |a| away from a = 0: o^[k] = sign(a^[0]) a^[k]. */
NHT_SMALL void NHT(nht_abs)(int64_t k, int64_t nc, NHT_T *o, int64_t ojs, NHT(nht_in) a) {
    for (int64_t i = 0; i < nc; ++i) {
        double *od = (double *)&o[k * ojs + i];
        const double *a0 = (const double *)NHT_ROW(a, 0, i), *ak = (const double *)NHT_ROW(a, k, i);
        for (int l = 0; l < NHT_LANES; ++l) od[l] = a0[l] < 0.0 ? -ak[l] : ak[l];
    }
}

/* o^[k] = sum_i a_i^[k] over n components (a reduction, in a fixed order). Below 16
 * components from left to right; from 16 on in eight partial sums (of the components i = c mod
 * 8, left to right) added as a tree: one chain of n additions (3 cycles each) held every
 * order of the kernel up in the one-lane pass, where the eight sums are one register (measured
 * faster on Veselova n = 64; in a vector pass, eight chains instead of one). The same order in
 * both passes: a lane's bits do not depend on its pass. */
NHT_SMALL void NHT(nht_sum)(int64_t k, int64_t n, NHT_T *o, int64_t ojs, NHT(nht_in) a) {
    if (n < 16) {
        NHT_T s = NHT_ROW(a, k, 0)[0];
        for (int64_t i = 1; i < n; ++i) s += NHT_ROW(a, k, i)[0];
        o[k * ojs] = s;
        return;
    }
    NHT_T p[8];
    for (int c = 0; c < 8; ++c) p[c] = NHT_ROW(a, k, c)[0];
    int64_t i = 8;
    for (; i + 8 <= n; i += 8)
        for (int c = 0; c < 8; ++c) p[c] += NHT_ROW(a, k, i + c)[0];
    for (int c = 0; i + c < n; ++c) p[c] += NHT_ROW(a, k, i + c)[0];
    o[k * ojs] = ((p[0] + p[4]) + (p[2] + p[6])) + ((p[1] + p[5]) + (p[3] + p[7]));
}

/* o_i^[k] = a^[k] (a scalar, or component c of a vector: a.p already points at it). */
NHT_SMALL void NHT(nht_copy)(int64_t k, NHT_T *o, int64_t ojs, int64_t i, NHT(nht_in) a) {
    o[k * ojs + i] = NHT_ROW(a, k, 0)[0];
}

/* o_i^[k] = c at k = 0, 0 after (a constant put into component i of a variable). */
NHT_SMALL void NHT(nht_setc)(int64_t k, NHT_T *o, int64_t ojs, int64_t i, NHT(nht_in) c) {
    o[k * ojs + i] = k == 0 ? c.p[0] : NHT_ZERO;
}

/* x^[k+1] = f^[k] / (k + 1) into component i of a state variable; a constant f at k = 0. */
NHT_SMALL void NHT(nht_integ)(int64_t k, NHT_T *x, int64_t xjs, int64_t i, NHT(nht_in) f,
                                  int f_const) {
    if (f_const)
        x[(k + 1) * xjs + i] = k == 0 ? f.p[0] : NHT_ZERO;
    else
        x[(k + 1) * xjs + i] = NHT_ROW(f, k, 0)[0] * (1.0 / (double)(k + 1));
}

/* x_i^[k+1] = f_i^[k] / (k + 1) for a run of nc components of a state vector (x, f point at
 * the run's first component): nht_integ's operation on each. */
NHT_SMALL void NHT(nht_integv)(int64_t k, int64_t nc, NHT_T *x, int64_t xjs, const NHT_T *f,
                                   int64_t fjs) {
    const double r = 1.0 / (double)(k + 1);
    for (int64_t i = 0; i < nc; ++i) x[(k + 1) * xjs + i] = f[k * fjs + i] * r;
}

/* o_i^[k] = sum_j H[i, j] a_j^[k] over n components; H(i, j) at h[i*hi + j*hj] (constant). */
NHT_SMALL void NHT(nht_matvec)(int64_t k, int64_t n, NHT_T *o, int64_t ojs, const NHT_T *h,
                                   int64_t hi, int64_t hj, NHT(nht_in) a) {
    for (int64_t i = 0; i < n; ++i) {
        NHT_T s = h[i * hi] * NHT_ROW(a, k, 0)[0];
        for (int64_t j = 1; j < n; ++j) s += h[i * hi + j * hj] * NHT_ROW(a, k, j)[0];
        o[k * ojs + i] = s;
    }
}
#undef NHT_FNMA
