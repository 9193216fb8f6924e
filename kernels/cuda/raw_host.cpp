/* raw_host.cpp: the hand-written baseline's WQE writer (raw_baseline.cu's raw_shape_wqe,
 * the part without inline PTX) compiled for the host by kernels/build.rs (g++), so that a
 * test without a GPU compares the bytes it writes with the Rust builders'. Reached only
 * through ibgda_kernels::experiments::issue::raw_shape_wqe_on_host. */
#define IBGDA_RAW_HOST_BUILD 1
#define __device__
#define __forceinline__ inline
#define RAW_BSWAP32(x) __builtin_bswap32((unsigned)(x))

struct uint4 {
    unsigned x, y, z, w;
};
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }

#include "raw_baseline.cu"

/* Writes the WQE of `shape` (0..3) and `len` at WQEBB counter `next` of `ring` (`cap`
 * WQEBBs, a power of two); returns its WQEBBs. `payload` holds `len` bytes, 4-byte
 * aligned; `av` 3 octowords. */
extern "C" unsigned ibgda_raw_shape_host(unsigned char* ring, unsigned cap, unsigned long long next, unsigned qpn,
                                         unsigned shape, unsigned len, unsigned long long raddr, unsigned rkey,
                                         unsigned long long laddr, unsigned lkey, const unsigned char* payload,
                                         const unsigned char* av, unsigned long long value) {
    const RawShape s = raw_shape(shape, len);
    raw_shape_wqe(ring, cap, next, qpn, s, raddr, rkey, laddr, lkey, payload, (const uint4*)av, value);
    return s.wqebbs;
}
