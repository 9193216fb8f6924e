/* softnic.cuh: the engine of the CUDA software NIC, in portable C++.
 *
 * The same code runs on the GPU (the persistent kernel ibgda_softnic of kernels.cu, over
 * device memory) and on the host (compiled by g++ through cuda/softnic_host.cpp, over host
 * memory), so that a differential test without a GPU can compare it WQE stream by WQE
 * stream with the CPU software NIC (ibgda::softnic). Every function is IBGDA_HD; the only
 * CUDA-specific code is memory ordering and the 64-bit CAS, behind __CUDA_ARCH__.
 *
 * It has the CPU software NIC's semantics with response_delay = 0 (its module
 * documentation is the reference), step for step:
 *   - a step serves every queue of the table in order (the host sorts it by QPN): load the
 *     doorbell (acquire), count a changed value naming the queue as a doorbell (another
 *     queue's number: a foreign doorbell), read the send doorbell record (every step, or
 *     only at a doorbell with DOORBELL_ONLY), and consume every WQE up to it unless the
 *     queue is an unconnected RC queue (INIT);
 *   - fetch: the control segment, then the octowords its DS claims (at most the ring),
 *     wrapping at the ring's end, into a private copy; a WQE larger than what is published
 *     is UNPUBLISHED; the copy is parsed with the rules of ibgda::wqe::parse_fetched_wqe
 *     (parse() below), which never reads outside the copy, whatever the bytes;
 *   - checks in the CPU NIC's order (length, local keys/bounds/rights segment by segment,
 *     route: RC peer or DC LID/DCT/key/responder state, atomic alignment, remote
 *     key/bounds/rights, receive credit and receive-CQ room) with the same syndromes and
 *     vendor syndromes (generated from ibgda::softnic::Fault); a failed WQE moves no byte;
 *   - WRITE (inline or gathered, through the scratch buffer in the CPU NIC's copy unit),
 *     WRITE_WITH_IMM (a receive credit, a responder CQE), READ (the whole source read
 *     before any byte lands), compare-swap, fetch-add, masked compare-swap and masked
 *     fetch-add on big-endian 4- and 8-byte operands (one CAS on the 64-bit word), NOP,
 *     DUMP (checks only);
 *   - CQEs: bytes 0..56 first, then bytes 56..64 with the owner bit as one 64-bit release
 *     store; ring mode overrun puts the CQ in error, every queue using it in error, and
 *     counts asynchronous events; collapsed mode writes entry 0 and never overruns;
 *   - a failed WQE writes an error CQE and puts its queue (and its RC responder side) in
 *     error; every later WQE of the queue is flushed, signaled or not.
 *
 * Memory: queue memory (rings, records, doorbells, CQs) is addressed directly; region
 * bytes through NicRegion::base (WQEs name NicRegion::start). One engine is driven by one
 * thread at a time.
 */
#pragma once
#include "ibgda_layout.h"

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define IBGDA_HD __host__ __device__
#else
#define IBGDA_HD
#endif

namespace ibgda {
namespace nic {

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

/* -------------------------------------------------------------------------------------
 * Memory access. Acquire loads of doorbells, records and the CQ consumer index; a release
 * store of a CQE's last word; one 64-bit CAS (acquire and release) per atomic.
 * ----------------------------------------------------------------------------------- */

IBGDA_HD inline u64 load_acquire(const void* p) {
#ifdef __CUDA_ARCH__
    u64 v;
    asm volatile("ld.acquire.sys.global.b64 %0, [%1];"
                 : "=l"(v)
                 : "l"((u64)__cvta_generic_to_global(p))
                 : "memory");
    return v;
#else
    return __atomic_load_n((const u64*)p, __ATOMIC_ACQUIRE);
#endif
}

IBGDA_HD inline void store_release(void* p, u64 v) {
#ifdef __CUDA_ARCH__
    asm volatile("st.release.sys.global.b64 [%0], %1;" ::"l"((u64)__cvta_generic_to_global(p)), "l"(v) : "memory");
#else
    __atomic_store_n((u64*)p, v, __ATOMIC_RELEASE);
#endif
}

/* Atomic compare-and-swap of the 64-bit word at p; returns the value found. Acquire and
 * release, system scope: every byte the engine placed before (an earlier WRITE of the
 * queue, whose signal this atomic may be) is visible to whoever reads the new value with
 * acquire, as a NIC's writes over PCIe are ordered before its later atomics. */
IBGDA_HD inline u64 cas64(void* p, u64 expected, u64 desired) {
#ifdef __CUDA_ARCH__
    u64 old;
    asm volatile("atom.acq_rel.sys.global.cas.b64 %0, [%1], %2, %3;"
                 : "=l"(old)
                 : "l"((u64)__cvta_generic_to_global(p)), "l"(expected), "l"(desired)
                 : "memory");
    return old;
#else
    __atomic_compare_exchange_n((u64*)p, &expected, desired, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    return expected;
#endif
}

/* A 64-bit word that may alias any object (the host compilers' type-based alias analysis
 * must not reorder it around the byte accesses of the same memory). */
#if defined(__CUDA_ARCH__)
typedef u64 AnyWord;
#else
typedef u64 __attribute__((__may_alias__)) AnyWord;
#endif

/* Copies n bytes (the ranges never overlap: every copy goes through the engine's private
 * copy or scratch). Where both ends are 8-byte aligned, by words, eight loads issued before
 * their stores so that one thread's copy is not one memory latency per byte (a 14 KiB
 * gathered WRITE took about 8 ms byte by byte on an H200 engine). */
IBGDA_HD inline void copy_bytes(u8* dst, const u8* src, u64 n) {
    u64 i = 0;
    if ((((u64)dst | (u64)src) & 7u) == 0) {
        for (; n - i >= 64; i += 64) {
            AnyWord w[8];
            for (u32 k = 0; k < 8; k++) w[k] = ((const AnyWord*)(src + i))[k];
            for (u32 k = 0; k < 8; k++) ((AnyWord*)(dst + i))[k] = w[k];
        }
        for (; n - i >= 8; i += 8) *(AnyWord*)(dst + i) = *(const AnyWord*)(src + i);
    }
    for (; i < n; i++) dst[i] = src[i];
}

IBGDA_HD inline u32 be16(const u8* p) { return (u32)p[0] << 8 | p[1]; }
IBGDA_HD inline u32 be32(const u8* p) { return (u32)p[0] << 24 | (u32)p[1] << 16 | (u32)p[2] << 8 | p[3]; }
IBGDA_HD inline u64 be64(const u8* p) { return (u64)be32(p) << 32 | be32(p + 4); }
IBGDA_HD inline void put_be16(u8* p, u32 v) {
    p[0] = (u8)(v >> 8);
    p[1] = (u8)v;
}
IBGDA_HD inline void put_be32(u8* p, u32 v) {
    p[0] = (u8)(v >> 24);
    p[1] = (u8)(v >> 16);
    p[2] = (u8)(v >> 8);
    p[3] = (u8)v;
}
/* Byte i of a 64-bit word as memory holds it (little-endian hosts and GPUs). */
IBGDA_HD inline u32 byte_of(u64 w, u32 i) { return (u32)(w >> (8 * i)) & 0xffu; }

/* -------------------------------------------------------------------------------------
 * Faults: syndrome << 8 | vendor syndrome, 0 for success (generated constants).
 * ----------------------------------------------------------------------------------- */
typedef u32 Fault;
constexpr Fault OK = 0;
IBGDA_HD inline u32 fault_syndrome(Fault f) { return f >> 8; }
IBGDA_HD inline u32 fault_vendor(Fault f) { return f & 0xffu; }

/* -------------------------------------------------------------------------------------
 * The parser: ibgda::wqe::parse_fetched_wqe's rules over a fetched copy. Whether a WQE
 * parses is all the NIC needs from a failure (every parse error is MALFORMED_WQE); on
 * success the fields the operations use. It reads only octowords below the DS, which it
 * checked against the copy's length first.
 * ----------------------------------------------------------------------------------- */

constexpr u32 FETCH_CAPACITY = layout::MAX_DS * layout::OCTOWORD_BYTES;

enum class Op : u32 { Nop, Dump, Write, Read, Atomic };
enum class Data : u32 { Empty, Pointers, Inline };
enum class AtomicKind : u32 { CompareSwap, FetchAdd, MaskedCompareSwap, MaskedFetchAdd };

struct Parsed {
    u32 opcode;
    u32 qpn;
    u32 ds;
    u32 fm_ce_se;
    u32 imm;
    Op op;
    /* DC target */
    u32 dct;
    u64 dc_key;
    u32 rlid;
    /* remote address */
    u64 raddr;
    u32 rkey;
    /* data: pointer segments [first_oct, first_oct + segments), or inline bytes */
    Data data;
    u32 first_oct;
    u32 segments;
    u32 inline_at;
    u32 inline_len;
    /* atomic */
    AtomicKind atomic;
    u32 width; /* operand bytes: 4 or 8 */
    u64 swap_add;
    u64 compare_boundary;
    u64 swap_mask;
    u64 compare_mask;
    /* the data segment of a DUMP or an atomic's result */
    u32 local_oct;
};

struct Cursor {
    const u8* buf;
    u32 ds;
    u32 next;
    IBGDA_HD u32 remaining() const { return ds > next ? ds - next : 0u; }
    IBGDA_HD bool need(u32 n) const { return remaining() >= n; }
    IBGDA_HD const u8* oct(u32 k) const { return buf + k * layout::OCTOWORD_BYTES; }
};

IBGDA_HD inline bool is_inline_header(const u8* seg) {
    return (be32(seg + layout::DATA_BYTE_COUNT) & layout::INLINE_SEGMENT_FLAG) != 0;
}

/* A pointer segment (no inline header) at the cursor. */
IBGDA_HD inline bool take_pointer(Cursor& c, u32& at) {
    if (!c.need(1)) return false;
    if (is_inline_header(c.oct(c.next))) return false;
    at = c.next++;
    return true;
}

IBGDA_HD inline bool take_remote(Cursor& c, Parsed& w) {
    if (!c.need(1)) return false;
    const u8* s = c.oct(c.next);
    if (be32(s + layout::RADDR_RESERVED) != 0) return false;
    w.raddr = be64(s + layout::RADDR_RADDR);
    w.rkey = be32(s + layout::RADDR_RKEY);
    c.next++;
    return true;
}

IBGDA_HD inline bool take_target(Cursor& c, Parsed& w) {
    static_assert(layout::AV_COMPACT_DC_KEY == layout::AV_FULL_DC_KEY && layout::AV_COMPACT_DQP_DCT == layout::AV_FULL_DQP_DCT &&
                      layout::AV_COMPACT_RLID == layout::AV_FULL_RLID,
                  "the full AV starts with the compact one's fields");
    if (!c.need(1)) return false;
    const u8* s = c.oct(c.next);
    const u32 dqp = be32(s + layout::AV_COMPACT_DQP_DCT);
    const u32 octs = (dqp & layout::EXTENDED_AV_FLAG) ? layout::AV_FULL_BYTES / layout::OCTOWORD_BYTES
                                                      : layout::AV_COMPACT_BYTES / layout::OCTOWORD_BYTES;
    if (!c.need(octs)) return false;
    if ((dqp & 0x7f000000u) != 0) return false;
    w.dct = dqp & layout::QPN_MAX;
    w.dc_key = be64(s + layout::AV_COMPACT_DC_KEY);
    w.rlid = be16(s + layout::AV_COMPACT_RLID);
    c.next += octs;
    return true;
}

IBGDA_HD inline bool take_data(Cursor& c, Parsed& w, bool inline_allowed) {
    const u32 remaining = c.remaining();
    if (remaining == 0) {
        w.data = Data::Empty;
        return true;
    }
    const u8* first = c.oct(c.next);
    if (is_inline_header(first)) {
        if (!inline_allowed) return false;
        const u64 len = be32(first + layout::INLINE_HEADER_BYTE_COUNT) & ~layout::INLINE_SEGMENT_FLAG;
        if (len == 0) return false;
        const u64 needed = (layout::INLINE_HEADER_BYTES + len + layout::OCTOWORD_BYTES - 1) / layout::OCTOWORD_BYTES;
        if (needed != remaining) return false;
        w.data = Data::Inline;
        w.inline_at = c.next * layout::OCTOWORD_BYTES + layout::INLINE_HEADER_BYTES;
        w.inline_len = (u32)len;
        c.next = c.ds;
        return true;
    }
    for (u32 k = c.next; k < c.ds; k++) {
        if (is_inline_header(c.oct(k))) return false;
    }
    w.data = Data::Pointers;
    w.first_oct = c.next;
    w.segments = remaining;
    c.next = c.ds;
    return true;
}

IBGDA_HD inline bool take_atomic(Cursor& c, Parsed& w) {
    if (!c.need(1)) return false;
    const u8* s = c.oct(c.next);
    switch (w.atomic) {
    case AtomicKind::CompareSwap:
        w.swap_add = be64(s + layout::ATOMIC_SWAP_ADD);
        w.compare_boundary = be64(s + layout::ATOMIC_COMPARE);
        c.next += 1;
        return true;
    case AtomicKind::FetchAdd:
        /* The compare word is ignored (any value accepted), as by the Rust parser. */
        w.swap_add = be64(s + layout::ATOMIC_SWAP_ADD);
        c.next += 1;
        return true;
    case AtomicKind::MaskedCompareSwap:
        if (w.width == 4) {
            w.swap_add = be32(s + layout::MASKED_CS4_SWAP);
            w.compare_boundary = be32(s + layout::MASKED_CS4_COMPARE);
            w.swap_mask = be32(s + layout::MASKED_CS4_SWAP_MASK);
            w.compare_mask = be32(s + layout::MASKED_CS4_COMPARE_MASK);
            c.next += 1;
            return true;
        }
        if (!c.need(2)) return false;
        /* Two octowords, contiguous in the fetched copy. */
        w.swap_add = be64(s + layout::MASKED_CS8_SWAP);
        w.compare_boundary = be64(s + layout::MASKED_CS8_COMPARE);
        w.swap_mask = be64(s + layout::MASKED_CS8_SWAP_MASK);
        w.compare_mask = be64(s + layout::MASKED_CS8_COMPARE_MASK);
        c.next += 2;
        return true;
    default:
        if (w.width == 4) {
            for (u32 k = 0; k < 8; k++) {
                if (s[layout::MASKED_FA4_RESERVED + k] != 0) return false;
            }
            w.swap_add = be32(s + layout::MASKED_FA4_ADD);
            w.compare_boundary = be32(s + layout::MASKED_FA4_FIELD_BOUNDARY);
        } else {
            w.swap_add = be64(s + layout::MASKED_FA8_ADD);
            w.compare_boundary = be64(s + layout::MASKED_FA8_FIELD_BOUNDARY);
        }
        c.next += 1;
        return true;
    }
}

/* Parses the `len` fetched bytes (a non-zero multiple of 16) of the WQE at `index` of a
 * queue of `transport`. */
IBGDA_HD inline bool parse(const u8* buf, u32 len, u32 index, u32 transport, Parsed& w) {
    if (len == 0 || len % layout::OCTOWORD_BYTES != 0) return false;
    const u32 word0 = be32(buf + layout::CTRL_OPMOD_IDX_OPCODE);
    const u32 opcode = word0 & 0xffu;
    const u32 opmod = word0 >> 24;
    switch (opcode) {
    case layout::OPCODE_NOP: w.op = Op::Nop; break;
    case layout::OPCODE_DUMP: w.op = Op::Dump; break;
    case layout::OPCODE_RDMA_WRITE:
    case layout::OPCODE_RDMA_WRITE_IMM: w.op = Op::Write; break;
    case layout::OPCODE_RDMA_READ: w.op = Op::Read; break;
    case layout::OPCODE_ATOMIC_CS: w.op = Op::Atomic; w.atomic = AtomicKind::CompareSwap; break;
    case layout::OPCODE_ATOMIC_FA: w.op = Op::Atomic; w.atomic = AtomicKind::FetchAdd; break;
    case layout::OPCODE_ATOMIC_MASKED_CS: w.op = Op::Atomic; w.atomic = AtomicKind::MaskedCompareSwap; break;
    case layout::OPCODE_ATOMIC_MASKED_FA: w.op = Op::Atomic; w.atomic = AtomicKind::MaskedFetchAdd; break;
    default: return false; /* unknown, or an mlx5 opcode not executed here */
    }
    if (((word0 >> 8) & 0xffffu) != (index & 0xffffu)) return false;
    const u32 qpn_ds = be32(buf + layout::CTRL_QPN_DS);
    if ((qpn_ds & 0xc0u) != 0) return false;
    const u32 ds = qpn_ds & layout::MAX_DS;
    if (ds == 0 || ds > len / layout::OCTOWORD_BYTES) return false;
    const u32 fm = buf[layout::CTRL_FM_CE_SE];
    if ((fm & layout::FM_CE_SE_RESERVED_BITS) != 0) return false;
    if ((fm >> layout::FM_CE_SE_FENCE_SHIFT) > (layout::FM_CE_SE_FENCE_SMALL_AND_FENCE >> layout::FM_CE_SE_FENCE_SHIFT))
        return false;
    if (opcode == layout::OPCODE_ATOMIC_MASKED_CS || opcode == layout::OPCODE_ATOMIC_MASKED_FA) {
        if (opmod == layout::OPMOD_ATOMIC_4) {
            w.width = 4;
        } else if (opmod == layout::OPMOD_ATOMIC_8) {
            w.width = 8;
        } else {
            return false;
        }
    } else {
        if (opmod != 0) return false;
        w.width = 8;
    }
    w.opcode = opcode;
    w.qpn = qpn_ds >> 8;
    w.ds = ds;
    w.fm_ce_se = fm;
    w.imm = be32(buf + layout::CTRL_IMM);
    w.data = Data::Empty;
    Cursor c{buf, ds, 1};
    const bool addressed = w.op != Op::Nop && w.op != Op::Dump;
    if (addressed && transport == layout::NIC_TRANSPORT_DC) {
        if (!take_target(c, w)) return false;
    }
    switch (w.op) {
    case Op::Nop: return true;
    case Op::Dump:
        if (c.remaining() != 1) return false;
        return take_pointer(c, w.local_oct);
    case Op::Write: return take_remote(c, w) && take_data(c, w, true);
    case Op::Read: return take_remote(c, w) && take_data(c, w, false);
    default:
        if (!take_remote(c, w) || !take_atomic(c, w)) return false;
        if (c.remaining() != 1) return false;
        if (!take_pointer(c, w.local_oct)) return false;
        return be32(c.oct(w.local_oct) + layout::DATA_BYTE_COUNT) == w.width;
    }
}

/* -------------------------------------------------------------------------------------
 * Atomic arithmetic (ibgda::softnic::atomic_new_value).
 * ----------------------------------------------------------------------------------- */

IBGDA_HD inline u64 width_mask(u32 width) { return width == 4 ? 0xffffffffull : ~0ull; }

IBGDA_HD inline u64 masked_fetch_add(u64 old, u64 add, u64 boundary, u32 width) {
    const u64 mask = width_mask(width);
    const u64 top = width == 4 ? (1ull << 31) : (1ull << 63);
    const u64 tops = (boundary | top) & mask;
    old &= mask;
    add &= mask;
    const u64 low = (old & ~tops) + (add & ~tops);
    return (low ^ ((old ^ add) & tops)) & mask;
}

IBGDA_HD inline u64 atomic_new_value(const Parsed& w, u64 old) {
    switch (w.atomic) {
    case AtomicKind::CompareSwap: return old == w.compare_boundary ? w.swap_add : old;
    case AtomicKind::FetchAdd: return old + w.swap_add;
    case AtomicKind::MaskedCompareSwap: {
        const u64 mask = width_mask(w.width);
        old &= mask;
        if (((old ^ w.compare_boundary) & w.compare_mask & mask) == 0)
            return ((old & ~w.swap_mask) | (w.swap_add & w.swap_mask)) & mask;
        return old;
    }
    default: return masked_fetch_add(old, w.swap_add, w.compare_boundary, w.width);
    }
}

/* -------------------------------------------------------------------------------------
 * The engine.
 * ----------------------------------------------------------------------------------- */

constexpr u32 MAX_OVERRUNS = 4;

struct Ctx {
    NicEngine* e;
    NicNode* nodes;
    NicRegion* regions;
    NicCq* cqs;
    NicResponder* responders;
    NicQueue* queues;
    u8* scratch;
    u32 overruns[MAX_OVERRUNS];
    u32 n_overruns;
    u64 progress;
};

IBGDA_HD inline NicResponder* find_responder(Ctx& x, u32 number) {
    for (u32 i = 0; i < x.e->n_responders; i++) {
        if (x.responders[i].number == number) return &x.responders[i];
    }
    return nullptr;
}
IBGDA_HD inline NicQueue* find_queue(Ctx& x, u32 qpn) {
    for (u32 i = 0; i < x.e->n_queues; i++) {
        if (x.queues[i].qpn == qpn) return &x.queues[i];
    }
    return nullptr;
}
IBGDA_HD inline NicCq* cq_at(Ctx& x, u32 index) { return index < x.e->n_cqs ? &x.cqs[index] : nullptr; }

/* --- CQs ------------------------------------------------------------------------------- */

enum class Refusal : u32 { None, InError, Overrun };

IBGDA_HD inline u32 cq_consumer_index(const NicCq& cq) {
    const u64 w = load_acquire((const void*)cq.dbrec);
    return ((byte_of(w, 0) << 24) | (byte_of(w, 1) << 16) | (byte_of(w, 2) << 8) | byte_of(w, 3)) & layout::NIC_CQ_INDEX_MASK;
}

IBGDA_HD inline Refusal cq_room(const NicCq& cq) {
    if (cq.error) return Refusal::InError;
    if (cq.mode == layout::NIC_CQ_RING) {
        const u32 outstanding = (cq.producer - cq_consumer_index(cq)) & layout::NIC_CQ_INDEX_MASK;
        if (outstanding >= cq.entries) return Refusal::Overrun;
    }
    return Refusal::None;
}

IBGDA_HD inline void note_overrun(Ctx& x, u32 cq) {
    if (x.n_overruns < MAX_OVERRUNS) x.overruns[x.n_overruns++] = cq;
}

/* Writes a CQE (owner bit set here); returns whether it was written. */
IBGDA_HD inline bool write_cqe(Ctx& x, u32 index, u8* cqe) {
    NicCq* cq = cq_at(x, index);
    Refusal r = cq ? cq_room(*cq) : Refusal::InError;
    if (r != Refusal::None) {
        if (r == Refusal::Overrun) {
            cq->error = 1;
            note_overrun(x, index);
        }
        x.e->stats.cqes_dropped++;
        return false;
    }
    const u32 slot = cq->mode == layout::NIC_CQ_RING ? (cq->producer & (cq->entries - 1)) : 0u;
    const u32 owner = (cq->producer >> cq->log2_entries) & 1u;
    cqe[layout::CQE_OP_OWN] = (u8)((cqe[layout::CQE_OP_OWN] & ~1u) | owner);
    u8* dst = (u8*)cq->ring + (u64)slot * layout::CQE_BYTES;
    static_assert(layout::CQE_SOP_DROP_QPN + 8 == layout::CQE_BYTES, "the last word starts at sop_drop_qpn");
    copy_bytes(dst, cqe, layout::CQE_SOP_DROP_QPN);
    u64 last = 0;
    for (u32 i = 0; i < 8; i++) last |= (u64)cqe[layout::CQE_SOP_DROP_QPN + i] << (8 * i);
    store_release(dst + layout::CQE_SOP_DROP_QPN, last);
    cq->producer++;
    x.e->stats.cqes_written++;
    x.progress++;
    return true;
}

IBGDA_HD inline void zero64(u8* c) {
    for (u32 i = 0; i < layout::CQE_BYTES; i++) c[i] = 0;
}

IBGDA_HD inline void requester_cqe(u8* c, u32 qpn, u32 opcode, u32 counter, u32 byte_count) {
    zero64(c);
    put_be32(c + layout::CQE_BYTE_CNT, byte_count);
    put_be32(c + layout::CQE_SOP_DROP_QPN, (opcode << 24) | qpn);
    put_be16(c + layout::CQE_WQE_COUNTER, counter);
    c[layout::CQE_OP_OWN] = (u8)(layout::CQE_OPCODE_REQ << 4);
}

IBGDA_HD inline void error_cqe(u8* c, u32 qpn, u32 opcode, u32 counter, u32 syndrome, u32 vendor) {
    zero64(c);
    c[layout::ERR_CQE_VENDOR_ERR_SYND] = (u8)vendor;
    c[layout::ERR_CQE_SYNDROME] = (u8)syndrome;
    put_be32(c + layout::ERR_CQE_S_WQE_OPCODE_QPN, (opcode << 24) | qpn);
    put_be16(c + layout::ERR_CQE_WQE_COUNTER, counter);
    c[layout::ERR_CQE_OP_OWN] = (u8)(layout::CQE_OPCODE_REQ_ERR << 4);
}

/* --- queue state ------------------------------------------------------------------------ */

/* A CQ overran: every queue using it (send CQ, or receive CQ of its responder side) goes
 * to error, as the CPU NIC's apply_effects does, with its asynchronous events. */
IBGDA_HD inline bool uses_cq(Ctx& x, u32 number, u32 cq) {
    NicQueue* q = find_queue(x, number);
    if (q && q->cq == cq) return true;
    NicResponder* r = find_responder(x, number);
    return r && r->cq == cq;
}

IBGDA_HD inline void fail_user(Ctx& x, u32 number, u32 cq) {
    bool newly = false;
    NicResponder* r = find_responder(x, number);
    if (r) {
        newly |= r->error == 0;
        r->error = 1;
    }
    NicQueue* q = find_queue(x, number);
    if (q && q->state != layout::NIC_STATE_ERROR) {
        q->state = layout::NIC_STATE_ERROR;
        q->error_kind = layout::NIC_ERROR_CQ;
        q->error_syndrome = 0;
        q->error_vendor = 0;
        q->error_detail = cq;
        newly = true;
    }
    if (newly) x.e->stats.async_events++;
}

IBGDA_HD inline void apply_effects(Ctx& x) {
    for (u32 k = 0; k < x.n_overruns; k++) {
        const u32 cq = x.overruns[k];
        x.e->stats.async_events++; /* the CQ's error event */
        for (u32 i = 0; i < x.e->n_queues; i++) {
            const u32 number = x.queues[i].qpn;
            if (uses_cq(x, number, cq)) fail_user(x, number, cq);
        }
        for (u32 i = 0; i < x.e->n_responders; i++) {
            const u32 number = x.responders[i].number;
            if (find_queue(x, number) == nullptr && uses_cq(x, number, cq)) fail_user(x, number, cq);
        }
    }
    x.n_overruns = 0;
}

/* --- translation ----------------------------------------------------------------------- */

struct Span {
    u8* p;
    u64 len;
};

IBGDA_HD inline bool translate(const NicRegion& r, u64 addr, u64 len, u8*& out) {
    if (addr < r.start) return false;
    const u64 delta = addr - r.start;
    const u64 end = delta + len;
    if (end < delta || end > r.len) return false;
    out = (u8*)(r.base + delta);
    return true;
}

IBGDA_HD inline u64 transfer_len(u32 byte_count) { return byte_count == 0 ? (1ull << 31) : byte_count; }

/* A data segment through the local node's lkeys (write: the NIC writes it). */
IBGDA_HD inline Fault resolve_local(Ctx& x, u32 node, const u8* seg, bool write, Span& s) {
    const u32 lkey = be32(seg + layout::DATA_LKEY);
    const u64 addr = be64(seg + layout::DATA_ADDR);
    const u64 len = transfer_len(be32(seg + layout::DATA_BYTE_COUNT));
    const NicRegion* r = nullptr;
    for (u32 i = 0; i < x.e->n_regions; i++) {
        if (x.regions[i].node == node && x.regions[i].lkey == lkey) {
            r = &x.regions[i];
            break;
        }
    }
    if (!r) return layout::FAULT_LOCAL_KEY;
    if (!translate(*r, addr, len, s.p)) return layout::FAULT_LOCAL_BOUNDS;
    if (write && (r->access & layout::NIC_ACCESS_LOCAL_WRITE) == 0) return layout::FAULT_LOCAL_WRITE_DENIED;
    s.len = len;
    return OK;
}

/* A remote range through the responder node's rkeys. */
IBGDA_HD inline Fault resolve_remote(Ctx& x, u32 node, u64 addr, u32 rkey, u64 len, u32 needed, Span& s) {
    const NicRegion* r = nullptr;
    for (u32 i = 0; i < x.e->n_regions; i++) {
        if (x.regions[i].node == node && x.regions[i].rkey == rkey) {
            r = &x.regions[i];
            break;
        }
    }
    if (!r) return layout::FAULT_REMOTE_KEY;
    if (!translate(*r, addr, len, s.p)) return layout::FAULT_REMOTE_BOUNDS;
    if ((r->access & needed) != needed) return layout::FAULT_REMOTE_ACCESS_DENIED;
    s.len = len;
    return OK;
}

/* The responder of an addressed WQE and its node. */
IBGDA_HD inline Fault route(Ctx& x, const NicQueue& q, const Parsed& w, NicResponder*& resp, u32& node) {
    if (q.transport == layout::NIC_TRANSPORT_RC) {
        if (q.peer == layout::NIC_NONE) return layout::FAULT_RESPONDER_UNAVAILABLE;
        NicResponder* r = find_responder(x, q.peer);
        if (!r || r->is_dct || r->error) return layout::FAULT_RESPONDER_UNAVAILABLE;
        resp = r;
    } else {
        u32 target = layout::NIC_NONE;
        for (u32 i = 0; i < x.e->n_nodes; i++) {
            if (x.nodes[i].lid == w.rlid) {
                target = i;
                break;
            }
        }
        if (target == layout::NIC_NONE) return layout::FAULT_UNKNOWN_LID;
        NicResponder* r = find_responder(x, w.dct);
        if (!r || !r->is_dct || r->node != target) return layout::FAULT_UNKNOWN_DCT;
        if (r->dc_key != w.dc_key) return layout::FAULT_WRONG_DC_KEY;
        if (r->error) return layout::FAULT_RESPONDER_UNAVAILABLE;
        resp = r;
    }
    if (resp->node >= x.e->n_nodes) return layout::FAULT_RESPONDER_UNAVAILABLE;
    node = resp->node;
    return OK;
}

IBGDA_HD inline Fault check_length(const NicQueue& q, u64 len) {
    return len > q.max_message_bytes ? layout::FAULT_MESSAGE_TOO_LONG : OK;
}

/* --- operations ------------------------------------------------------------------------- */

struct Done {
    u32 byte_count;
};

IBGDA_HD inline Fault perform_dump(Ctx& x, const NicQueue& q, const u8* buf, const Parsed& w) {
    const u8* seg = buf + w.local_oct * layout::OCTOWORD_BYTES;
    Fault f = check_length(q, transfer_len(be32(seg + layout::DATA_BYTE_COUNT)));
    if (f) return f;
    if (q.node >= x.e->n_nodes) return layout::FAULT_RESPONDER_UNAVAILABLE;
    Span s{nullptr, 0};
    return resolve_local(x, q.node, seg, false, s);
}

/* Checks that a responder can take a WRITE_WITH_IMM: a credit and room in its receive CQ. */
IBGDA_HD inline Fault reserve_receive(Ctx& x, NicResponder* r, u32& cq_index) {
    if (!r || r->credits == 0 || r->cq == layout::NIC_NONE) return layout::FAULT_RECEIVER_NOT_READY;
    NicCq* cq = cq_at(x, r->cq);
    if (!cq) return layout::FAULT_RESPONDER_CQ_OVERRUN;
    const Refusal room = cq_room(*cq);
    if (room == Refusal::Overrun) {
        cq->error = 1;
        note_overrun(x, r->cq);
    }
    if (room != Refusal::None) return layout::FAULT_RESPONDER_CQ_OVERRUN;
    cq_index = r->cq;
    return OK;
}

IBGDA_HD inline void deliver_immediate(Ctx& x, const NicQueue& q, const Parsed& w, NicResponder* r, u32 cq, u64 len) {
    const u32 source_lid = q.node < x.e->n_nodes ? (x.nodes[q.node].lid & 0xffffu) : 0u;
    if (r->credits > 0) r->credits--;
    const u32 counter = r->received & 0xffffu;
    r->received++;
    u8 c[layout::CQE_BYTES];
    zero64(c);
    put_be16(c + layout::CQE_SLID, source_lid);
    put_be32(c + layout::CQE_FLAGS_RQPN, q.qpn);
    put_be32(c + layout::CQE_IMM_INVAL_PKEY, w.imm);
    put_be32(c + layout::CQE_BYTE_CNT, len > 0xffffffffull ? 0xffffffffu : (u32)len);
    put_be32(c + layout::CQE_SOP_DROP_QPN, r->number);
    put_be16(c + layout::CQE_WQE_COUNTER, counter);
    const u32 solicited = (w.fm_ce_se & layout::FM_CE_SE_SOLICITED) ? 1u : 0u;
    c[layout::CQE_OP_OWN] = (u8)((layout::CQE_OPCODE_RESP_WR_IMM << 4) | (solicited << 1));
    if (write_cqe(x, cq, c)) x.e->stats.responder_cqes++;
}

IBGDA_HD inline Fault perform_write(Ctx& x, const NicQueue& q, const u8* buf, const Parsed& w) {
    u64 len = 0;
    if (w.data == Data::Pointers) {
        for (u32 k = 0; k < w.segments; k++) len += transfer_len(be32(buf + (w.first_oct + k) * layout::OCTOWORD_BYTES));
    } else if (w.data == Data::Inline) {
        len = w.inline_len;
    }
    Fault f = check_length(q, len);
    if (f) return f;
    if (q.node >= x.e->n_nodes) return layout::FAULT_RESPONDER_UNAVAILABLE;
    Span s{nullptr, 0};
    if (w.data == Data::Pointers) {
        for (u32 k = 0; k < w.segments; k++) {
            f = resolve_local(x, q.node, buf + (w.first_oct + k) * layout::OCTOWORD_BYTES, false, s);
            if (f) return f;
        }
    }
    NicResponder* resp = nullptr;
    u32 node = 0;
    f = route(x, q, w, resp, node);
    if (f) return f;
    Span dst{nullptr, 0};
    if (len > 0) {
        f = resolve_remote(x, node, w.raddr, w.rkey, len, layout::NIC_ACCESS_REMOTE_WRITE, dst);
        if (f) return f;
    }
    const bool with_imm = w.opcode == layout::OPCODE_RDMA_WRITE_IMM;
    u32 receive_cq = layout::NIC_NONE;
    if (with_imm) {
        f = reserve_receive(x, resp, receive_cq);
        if (f) return f;
    }
    /* Every check passed: move the bytes. */
    if (len > 0) {
        if (w.data == Data::Inline) {
            copy_bytes(dst.p, buf + w.inline_at, len);
        } else {
            u8* at = dst.p;
            for (u32 k = 0; k < w.segments; k++) {
                Span src{nullptr, 0};
                resolve_local(x, q.node, buf + (w.first_oct + k) * layout::OCTOWORD_BYTES, false, src);
                for (u64 done = 0; done < src.len;) {
                    const u64 n = src.len - done < layout::NIC_WRITE_COPY_CHUNK ? src.len - done : layout::NIC_WRITE_COPY_CHUNK;
                    copy_bytes(x.scratch, src.p + done, n);
                    copy_bytes(at, x.scratch, n);
                    done += n;
                    at += n;
                }
            }
        }
        x.e->stats.bytes_written += len;
    }
    if (with_imm) deliver_immediate(x, q, w, resp, receive_cq, len);
    return OK;
}

IBGDA_HD inline Fault perform_read(Ctx& x, const NicQueue& q, const u8* buf, const Parsed& w, Done& done) {
    u64 len = 0;
    const u32 n = w.data == Data::Pointers ? w.segments : 0u;
    for (u32 k = 0; k < n; k++) len += transfer_len(be32(buf + (w.first_oct + k) * layout::OCTOWORD_BYTES));
    Fault f = check_length(q, len);
    if (f) return f;
    if (q.node >= x.e->n_nodes) return layout::FAULT_RESPONDER_UNAVAILABLE;
    Span s{nullptr, 0};
    for (u32 k = 0; k < n; k++) {
        f = resolve_local(x, q.node, buf + (w.first_oct + k) * layout::OCTOWORD_BYTES, true, s);
        if (f) return f;
    }
    NicResponder* resp = nullptr;
    u32 node = 0;
    f = route(x, q, w, resp, node);
    if (f) return f;
    if (len > 0) {
        Span src{nullptr, 0};
        f = resolve_remote(x, node, w.raddr, w.rkey, len, layout::NIC_ACCESS_REMOTE_READ, src);
        if (f) return f;
        /* The responder reads everything, then the response lands segment by segment
         * (len <= max_message_bytes <= scratch_len, checked by the host glue). */
        copy_bytes(x.scratch, src.p, len);
        u64 at = 0;
        for (u32 k = 0; k < n; k++) {
            Span dst{nullptr, 0};
            resolve_local(x, q.node, buf + (w.first_oct + k) * layout::OCTOWORD_BYTES, true, dst);
            copy_bytes(dst.p, x.scratch + at, dst.len);
            at += dst.len;
        }
        x.e->stats.bytes_read += len;
    }
    done.byte_count = len > 0xffffffffull ? 0xffffffffu : (u32)len;
    return OK;
}

IBGDA_HD inline Fault perform_atomic(Ctx& x, const NicQueue& q, const u8* buf, const Parsed& w, Done& done) {
    const u32 size = w.width;
    Fault f = check_length(q, size);
    if (f) return f;
    if (q.node >= x.e->n_nodes) return layout::FAULT_RESPONDER_UNAVAILABLE;
    Span result{nullptr, 0};
    f = resolve_local(x, q.node, buf + w.local_oct * layout::OCTOWORD_BYTES, true, result);
    if (f) return f;
    NicResponder* resp = nullptr;
    u32 node = 0;
    f = route(x, q, w, resp, node);
    if (f) return f;
    if (w.raddr % size != 0) return layout::FAULT_MISALIGNED_ATOMIC;
    Span operand{nullptr, 0};
    f = resolve_remote(x, node, w.raddr, w.rkey, size, layout::NIC_ACCESS_REMOTE_ATOMIC, operand);
    if (f) return f;
    /* One CAS on the 64-bit word holding the big-endian operand. */
    const u64 addr = (u64)operand.p;
    const u32 within = (u32)(addr & 7u);
    u64* word = (u64*)(addr - within);
    u64 current = *(volatile u64*)word;
    u64 old;
    for (;;) {
        old = 0;
        for (u32 i = 0; i < size; i++) old = old << 8 | byte_of(current, within + i);
        const u64 nv = atomic_new_value(w, old);
        u64 next = current;
        for (u32 i = 0; i < size; i++) {
            const u32 shift = 8 * (within + i);
            const u64 b = (nv >> (8 * (size - 1 - i))) & 0xffu;
            next = (next & ~(0xffull << shift)) | (b << shift);
        }
        const u64 seen = cas64(word, current, next);
        if (seen == current) break;
        current = seen;
    }
    x.e->stats.atomics++;
    /* The response: the original value, big-endian, in the operand's width. */
    for (u32 i = 0; i < size; i++) result.p[i] = (u8)(old >> (8 * (size - 1 - i)));
    done.byte_count = size;
    return OK;
}

/* --- one WQE ---------------------------------------------------------------------------- */

/* Copies `n` bytes of the ring from byte `start`, continuing at its start past its end. */
IBGDA_HD inline void read_wrapped(const u8* ring, u32 ring_len, u32 start, u8* dst, u32 n) {
    const u32 first = n < ring_len - start ? n : ring_len - start;
    copy_bytes(dst, ring + start, first);
    copy_bytes(dst + first, ring, n - first);
}

/* The WQE fails with an error CQE of `syndrome` and `vendor`; the queue goes to error. */
IBGDA_HD inline void fail_with(Ctx& x, NicQueue& q, u32 index, u32 opcode, u32 syndrome, u32 vendor) {
    u8 c[layout::CQE_BYTES];
    error_cqe(c, q.qpn, opcode, index, syndrome, vendor);
    write_cqe(x, q.cq, c);
    x.e->stats.wqes_failed++;
    q.state = layout::NIC_STATE_ERROR;
    q.error_kind = layout::NIC_ERROR_WQE;
    q.error_syndrome = syndrome;
    q.error_vendor = vendor;
    q.error_detail = index;
    NicResponder* own = find_responder(x, q.qpn);
    if (own) own->error = 1;
}

IBGDA_HD inline void fail(Ctx& x, NicQueue& q, u32 index, u32 opcode, Fault f) {
    fail_with(x, q, index, opcode, fault_syndrome(f), fault_vendor(f));
}

/* Consumes the WQE at the consumer counter; `pending` WQEBBs are published from it. */
IBGDA_HD inline void execute_next(Ctx& x, NicQueue& q, u32 pending) {
    u8 buf[FETCH_CAPACITY];
    const u8* ring = (const u8*)q.ring;
    const u32 ring_len = (1u << q.log_wqebbs) * layout::WQEBB_BYTES;
    const u32 start = ((u32)q.consumer & ((1u << q.log_wqebbs) - 1)) * layout::WQEBB_BYTES;
    read_wrapped(ring, ring_len, start, buf, layout::OCTOWORD_BYTES);
    const u32 raw_ds = buf[layout::CTRL_QPN_DS + 3] & layout::MAX_DS;
    const u32 ds = raw_ds == 0 ? 1u : raw_ds;
    const u32 len = ds * layout::OCTOWORD_BYTES < ring_len ? ds * layout::OCTOWORD_BYTES : ring_len;
    read_wrapped(ring, ring_len, (start + layout::OCTOWORD_BYTES) % ring_len, buf + layout::OCTOWORD_BYTES,
                 len - layout::OCTOWORD_BYTES);
    const u32 opcode = buf[layout::CTRL_OPMOD_IDX_OPCODE + 3];
    const u32 index = (u32)q.consumer & 0xffffu;
    u32 wqebbs = (raw_ds * layout::OCTOWORD_BYTES + layout::WQEBB_BYTES - 1) / layout::WQEBB_BYTES;
    if (wqebbs == 0) wqebbs = 1;
    q.consumer += wqebbs < pending ? wqebbs : pending;
    q.executed++;
    x.progress++;

    if (q.state == layout::NIC_STATE_ERROR) {
        u8 c[layout::CQE_BYTES];
        error_cqe(c, q.qpn, opcode, index, layout::SYNDROME_WORK_REQUEST_FLUSHED, layout::FLUSH_VENDOR_SYNDROME);
        write_cqe(x, q.cq, c);
        x.e->stats.wqes_flushed++;
        return;
    }
    /* A fault injected on this WQE (its sequence number, before this one was counted),
     * whatever it holds: checked first, as the CPU NIC does. */
    if (q.inject_syndrome != 0 && q.executed - 1 == q.inject_at) {
        fail_with(x, q, index, opcode, q.inject_syndrome, q.inject_vendor);
        return;
    }
    if (wqebbs > pending) {
        fail(x, q, index, opcode, layout::FAULT_UNPUBLISHED);
        return;
    }
    Parsed w;
    if (!parse(buf, len, index, q.transport, w)) {
        fail(x, q, index, opcode, layout::FAULT_MALFORMED_WQE);
        return;
    }
    if (w.qpn != q.qpn) {
        fail(x, q, index, opcode, layout::FAULT_FOREIGN_QPN);
        return;
    }
    /* Fences wait for outstanding responses: with no response delay none is outstanding. */
    Done done{0};
    Fault f = OK;
    switch (w.op) {
    case Op::Nop: break;
    case Op::Dump: f = perform_dump(x, q, buf, w); break;
    case Op::Write: f = perform_write(x, q, buf, w); break;
    case Op::Read: f = perform_read(x, q, buf, w, done); break;
    default: f = perform_atomic(x, q, buf, w, done); break;
    }
    if (f) {
        fail(x, q, index, opcode, f);
        return;
    }
    x.e->stats.wqes_executed++;
    const u32 completion = (w.fm_ce_se >> 2) & 3u;
    /* A completion dropped on this WQE (Fabric::drop_completion): executed, no CQE. */
    const bool dropped = q.drop_cqe != 0 && q.executed - 1 == q.drop_cqe_at;
    if (completion >= 2 && !dropped) { /* Always or AlwaysWithEvent */
        u8 c[layout::CQE_BYTES];
        requester_cqe(c, q.qpn, opcode, index, done.byte_count);
        write_cqe(x, q.cq, c);
    }
}

/* The send counter of the doorbell record: bytes 4..8 big-endian, low 16 bits. */
IBGDA_HD inline u32 send_record(const NicQueue& q) {
    const u64 w = load_acquire((const void*)q.dbrec);
    return ((byte_of(w, 6) << 8) | byte_of(w, 7)) & 0xffffu;
}

/* Loads the doorbell; returns whether the queue may execute, and up to where. */
IBGDA_HD inline bool observe(Ctx& x, NicQueue& q, u32& limit) {
    const u64 db = load_acquire((const void*)q.doorbell);
    bool rung = false;
    if (db != q.last_doorbell) {
        q.last_doorbell = db;
        const u32 named = ((byte_of(db, 4) << 24) | (byte_of(db, 5) << 16) | (byte_of(db, 6) << 8) | byte_of(db, 7)) >> 8;
        if (named == q.qpn) {
            rung = true;
            x.e->stats.doorbells++;
        } else {
            x.e->stats.foreign_doorbells++;
        }
        x.progress++;
    }
    if (q.watch == layout::NIC_WATCH_DOORBELL_ONLY) {
        if (rung) {
            q.armed = 1;
            q.armed_limit = send_record(q);
        }
        if (!q.armed) return false;
        limit = q.armed_limit;
    } else {
        limit = send_record(q);
    }
    return q.state != layout::NIC_STATE_INIT;
}

IBGDA_HD inline void serve(Ctx& x, NicQueue& q) {
    u32 limit;
    if (!observe(x, q, limit)) return;
    for (;;) {
        const u32 pending = (limit - (u32)q.consumer) & 0xffffu;
        if (pending == 0) return;
        execute_next(x, q, pending);
        apply_effects(x);
    }
}

/* One pass over every queue in table order. Returns a nonzero count when it did anything
 * (a doorbell seen, a WQE consumed). */
IBGDA_HD inline u64 step(NicEngine* e) {
    Ctx x;
    x.e = e;
    x.nodes = (NicNode*)e->nodes;
    x.regions = (NicRegion*)e->regions;
    x.cqs = (NicCq*)e->cqs;
    x.responders = (NicResponder*)e->responders;
    x.queues = (NicQueue*)e->queues;
    x.scratch = (u8*)e->scratch;
    x.n_overruns = 0;
    x.progress = 0;
    for (u32 i = 0; i < e->n_queues; i++) serve(x, x.queues[i]);
    e->steps++;
    return x.progress;
}

} // namespace nic
} // namespace ibgda
