/* One instance of the Taylor operations (taylor_ops.h) for the value type NHT_T of
 * NHT_LANES lanes, zero NHT_ZERO: the functions NHT_NAME(f) and, with NHT_FIXED_ORDER, the
 * same again with their loops over the orders unrolled, NHT_NAME_FIXED(f). Included twice by
 * taylor.h (one lane, and NHT_VW lanes as one vector value); it undefines what it was given.
 * No include guard: each inclusion makes another instance. */
#define NHT(f) NHT_NAME(f)
#include "taylor_ops.h"
#ifdef NHT_FIXED_ORDER
#undef NHT
#undef NHT_UNROLL
#define NHT_UNROLL _Pragma("GCC unroll 64")
#define NHT(f) NHT_NAME_FIXED(f)
#include "taylor_ops.h"
#undef NHT_UNROLL
#define NHT_UNROLL
#endif
#undef NHT_T
#undef NHT
#undef NHT_NAME
#undef NHT_NAME_FIXED
#undef NHT_LANES
#undef NHT_ZERO
