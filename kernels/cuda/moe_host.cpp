/* moe_host.cpp: cuda/moe.cu's kernels (on the device API and on the builders) run on host
 * threads, each rank's queue pairs executed by the host build of the CUDA software NIC's
 * engine (softnic.cuh, through softnic_host.cpp), so that a test without a GPU runs the
 * dispatch and combine of both variants, one after another in one process as
 * experiments::moe::run does, and checks them against the CPU reference. The shape is
 * the one of the committed host layout header (cuda/host/moe_layout.h, generated from
 * MoeLayout; tests/moe_host.rs checks it). Reached only through
 * ibgda_kernels::experiments::moe::host (test-support).
 *
 * Every CUDA thread is a host thread (host_threads.h); the device library's memory
 * operations are C++ atomics (ptx_host.h). The NIC: one engine per connected pair of
 * queue pairs, as CudaFabric::device_nic builds them (or, the ranks standing for
 * processes, one per queue pair as a process's NIC has them), stepped by engine threads
 * from before each launch until after it (stopped and restarted between steps, as the GPU
 * run stops its NIC to read and clear the buffers). */
#define IBGDA_HOST_THREADS 1
#include "host_threads.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "moe.cu"

extern "C" unsigned long long ibgda_softnic_host_step(ibgda::NicEngine* engine);

namespace {

using ibgda::u32;
using ibgda::u64;
using ibgda::u8;

/* Zeroed, aligned host memory, freed with the arena. */
struct Arena {
    std::vector<void*> blocks;
    u8* alloc(u64 len, u64 align = 256) {
        const u64 size = (len + align - 1) / align * align;
        void* p = std::aligned_alloc(align, size == 0 ? align : size);
        if (!p) return nullptr;
        std::memset(p, 0, size == 0 ? align : size);
        blocks.push_back(p);
        return (u8*)p;
    }
    ~Arena() {
        for (void* p : blocks) std::free(p);
    }
};

struct QueueMem {
    u8* ring;
    u8* dbrec;
    u8* doorbell;
    u8* cq;
    u8* cq_dbrec;
    u8* state;
    u32 qpn;
};

/* One engine's tables (stable addresses once built). */
struct EngineTables {
    std::vector<ibgda::NicNode> nodes;
    std::vector<ibgda::NicRegion> regions;
    std::vector<ibgda::NicCq> cqs;
    std::vector<ibgda::NicResponder> responders;
    std::vector<ibgda::NicQueue> queues;
    std::vector<u8> scratch;
    ibgda::NicEngine engine{};
};

u32 qpn_of(u32 rank, u32 peer) { return 0x100u + rank * (u32)MOE_RANKS + peer; }

/* Engine threads stepping their engines until `stop`, then until idle. */
class Nic {
  public:
    Nic(std::vector<EngineTables>& engines, unsigned threads) : engines_(engines), threads_(threads ? threads : 1) {}
    void start() {
        stop_.store(false);
        for (unsigned t = 0; t < threads_; t++) {
            workers_.emplace_back([this, t] {
                for (;;) {
                    u64 progress = 0;
                    for (size_t e = t; e < engines_.size(); e += threads_) progress += ibgda_softnic_host_step(&engines_[e].engine);
                    if (progress != 0) continue;
                    if (stop_.load()) break;
                    std::this_thread::yield();
                }
            });
        }
    }
    void stop() {
        stop_.store(true);
        for (auto& w : workers_) w.join();
        workers_.clear();
    }

  private:
    std::vector<EngineTables>& engines_;
    unsigned threads_;
    std::atomic<bool> stop_{false};
    std::vector<std::thread> workers_;
};

} // namespace

/* Runs `n_steps` iterations, variant variants[i] (0 the device API, 1 the builders) at
 * iteration i, over R = MOE_RANKS ranks whose inputs are x ([R][T][H] BF16), topk and
 * weights ([R][T][K]), window sizes `sizes` (MoeLayout::sizes), queue pairs of
 * 2^log_ring WQEBBs (and as many CQ entries), every device wait bounded by wait_ns, the
 * engines stepped by `nic_threads` threads, the ranks as threads of one process
 * (`processes` 0: one launch of all ranks per phase, one engine per connected pair) or as
 * a process each (1: a launch per rank, concurrently, over its own tables' slot 0, one
 * engine per queue pair with its peer's receive side as a record). For each step: statuses[i] (the kernels'
 * status word: 0 or the first failure), out[i] ([R][T][H]: every rank's combined output)
 * and counts[i] ([R][LOCAL_EXPERTS * R]: the tokens each rank received per local expert
 * and source). Returns 0, or -1 when host memory ran out or an argument is out of range
 * (log_ring 6..15, sizes that do not hold the layout's offsets). */
extern "C" int ibgda_moe_host_run(const unsigned short* x, const int* topk, const float* weights,
                                  const unsigned long long* sizes, const unsigned* variants, unsigned n_steps,
                                  unsigned log_ring, unsigned long long wait_ns, unsigned nic_threads,
                                  unsigned processes, int* statuses,
                                  unsigned short* out, unsigned* counts) {
    constexpr u32 R = MOE_RANKS, W = MOE_WINDOWS, T = MOE_TOKENS, H = MOE_HIDDEN, K = MOE_TOPK;
    constexpr u32 PAIRS = MOE_LOCAL_EXPERTS * MOE_RANKS;
    if (log_ring < 6 || log_ring > 15 || processes > 1) return -1;
    if (sizes[MOE_W_SEND] < MOE_STAMPS_OFF + MOE_MAX_ITERS * MOE_STAMPS * 8 || sizes[MOE_W_SIGNAL] < MOE_COUNTS_OFF + PAIRS * 4 ||
        sizes[MOE_W_COMBINE] < (u64)T * K * H * 2 || sizes[MOE_W_RECV] < MOE_META_OFF + (u64)PAIRS * T * 8)
        return -1;
    Arena arena;
    const u32 wqebbs = 1u << log_ring;
    const u64 max_message = ((u64)(MOE_MSG_BYTES > MOE_OUT_BYTES ? MOE_MSG_BYTES : MOE_OUT_BYTES) + 4095) / 4096 * 4096;

    /* Windows (the signal window's last 64 bytes are the scratch word's registration). */
    u8* win[R][W];
    u8* scratch[R];
    for (u32 r = 0; r < R; r++) {
        for (u32 w = 0; w < W; w++) {
            win[r][w] = arena.alloc(sizes[w] + (w == MOE_W_SIGNAL ? 64 : 0));
            if (!win[r][w]) return -1;
        }
        scratch[r] = win[r][MOE_W_SIGNAL] + sizes[MOE_W_SIGNAL];
        std::memcpy(win[r][MOE_W_SEND] + MOE_X_OFF, x + (u64)r * T * H, (u64)T * H * 2);
        std::memcpy(win[r][MOE_W_SEND] + MOE_TOPK_OFF, topk + (u64)r * T * K, (u64)T * K * 4);
        std::memcpy(win[r][MOE_W_SEND] + MOE_WEIGHTS_OFF, weights + (u64)r * T * K, (u64)T * K * 4);
        u64* stamps = (u64*)(win[r][MOE_W_SEND] + MOE_STAMPS_OFF);
        for (u32 i = 0; i < MOE_MAX_ITERS; i++) {
            stamps[i * MOE_STAMPS + MOE_STAMP_DISPATCH_START] = ~0ull;
            stamps[i * MOE_STAMPS + MOE_STAMP_COMBINE_START] = ~0ull;
        }
    }
    auto lkey = [](u32 r, u32 w) { return 0x1000u + r * 16u + w; };
    auto rkey = [](u32 r, u32 w) { return 0x2000u + r * 16u + w; };

    /* Queue pair (r, p): rank r's to peer p, connected to (p, r). */
    QueueMem qm[R][R];
    for (u32 r = 0; r < R; r++) {
        for (u32 p = 0; p < R; p++) {
            QueueMem& q = qm[r][p];
            q.ring = arena.alloc((u64)wqebbs * 64);
            q.dbrec = arena.alloc(8, 64);
            q.doorbell = arena.alloc(8, 64);
            q.cq = arena.alloc((u64)wqebbs * 64);
            q.cq_dbrec = arena.alloc(8, 64);
            q.state = arena.alloc(sizeof(ibgda::DeviceProducerState), 64);
            if (!q.ring || !q.dbrec || !q.doorbell || !q.cq || !q.cq_dbrec || !q.state) return -1;
            for (u32 i = 0; i < wqebbs; i++) q.cq[(u64)i * 64 + 63] = (u8)ibgda::layout::CQE_INIT_OP_OWN;
            q.qpn = qpn_of(r, p);
        }
    }

    /* Threads of one process (`processes` 0): one engine per connected pair (a loopback
     * is a pair of one), both queue pairs on it, as CudaFabric::device_nic builds them.
     * A process per rank (`processes` 1): one engine per queue pair, which holds that
     * queue pair alone and, for a peer's, the peer's receive side as a record without
     * credits or CQ on the peer's node, as cudanic::process_nic_builder builds a
     * process's NIC (connect_remote): no engine executes two ranks' queue pairs. Every
     * engine has every node and region (host memory: a region's start is its base). */
    std::vector<std::vector<u32>> groups; /* per engine: the queue pairs (r * R + p) */
    for (u32 a = 0; a < R; a++) {
        for (u32 b = processes ? 0 : a; b < R; b++) {
            if (processes || a == b) {
                groups.push_back({a * R + b});
            } else {
                groups.push_back({a * R + b, b * R + a});
            }
        }
    }
    std::vector<EngineTables> engines(groups.size());
    for (size_t e = 0; e < groups.size(); e++) {
        EngineTables& t = engines[e];
        for (u32 r = 0; r < R; r++) {
            t.nodes.push_back(ibgda::NicNode{r + 1, 0});
            for (u32 w = 0; w <= W; w++) {
                ibgda::NicRegion g{};
                const bool s = w == W;
                g.start = g.base = (u64)(s ? scratch[r] : win[r][w]);
                g.len = s ? 64 : sizes[w];
                g.node = r;
                g.lkey = lkey(r, w);
                g.rkey = rkey(r, w);
                g.access = s ? ibgda::layout::NIC_ACCESS_LOCAL_WRITE
                             : (ibgda::layout::NIC_ACCESS_LOCAL_WRITE | ibgda::layout::NIC_ACCESS_REMOTE_WRITE |
                                ibgda::layout::NIC_ACCESS_REMOTE_ATOMIC);
                t.regions.push_back(g);
            }
        }
        for (const u32 rp : groups[e]) {
            const u32 r = rp / R, p = rp % R;
            const QueueMem& q = qm[r][p];
            ibgda::NicCq c{};
            c.ring = (u64)q.cq;
            c.dbrec = (u64)q.cq_dbrec;
            c.entries = wqebbs;
            c.log2_entries = log_ring;
            c.mode = ibgda::layout::NIC_CQ_RING;
            t.cqs.push_back(c);
            ibgda::NicQueue n{};
            n.ring = (u64)q.ring;
            n.dbrec = (u64)q.dbrec;
            n.doorbell = (u64)q.doorbell;
            n.max_message_bytes = max_message;
            n.qpn = q.qpn;
            n.node = r;
            n.transport = ibgda::layout::NIC_TRANSPORT_RC;
            n.log_wqebbs = log_ring;
            n.cq = (u32)t.cqs.size() - 1;
            n.peer = qpn_of(p, r);
            n.state = ibgda::layout::NIC_STATE_READY;
            n.watch = ibgda::layout::NIC_WATCH_POLL_RECORD;
            t.queues.push_back(n);
            ibgda::NicResponder s{};
            s.number = q.qpn;
            s.node = r;
            s.cq = ibgda::layout::NIC_NONE;
            t.responders.push_back(s);
            if (processes && p != r) {
                ibgda::NicResponder peer{};
                peer.number = qpn_of(p, r);
                peer.node = p;
                peer.cq = ibgda::layout::NIC_NONE;
                t.responders.push_back(peer);
            }
        }
        t.scratch.assign(max_message, 0);
        ibgda::NicEngine& g = t.engine;
        g.nodes = (u64)t.nodes.data();
        g.regions = (u64)t.regions.data();
        g.cqs = (u64)t.cqs.data();
        g.responders = (u64)t.responders.data();
        g.queues = (u64)t.queues.data();
        g.scratch = (u64)t.scratch.data();
        g.scratch_len = max_message;
        g.n_nodes = (u32)t.nodes.size();
        g.n_regions = (u32)t.regions.size();
        g.n_cqs = (u32)t.cqs.size();
        g.n_responders = (u32)t.responders.size();
        g.n_queues = (u32)t.queues.size();
    }

    /* Descriptors, communicators, windows and the builders' tables, as run() makes them. */
    std::vector<ibgda::DeviceQueueDescriptor> descs((u64)R * R);
    for (u32 r = 0; r < R; r++) {
        for (u32 p = 0; p < R; p++) {
            const QueueMem& q = qm[r][p];
            ibgda::DeviceQueueDescriptor d{};
            d.sq_ring = (u64)q.ring;
            d.sq_dbrec = (u64)q.dbrec + ibgda::layout::SEND_DBREC_OFFSET;
            d.doorbell = (u64)q.doorbell;
            d.cq_ring = (u64)q.cq;
            d.cq_dbrec = (u64)q.cq_dbrec;
            d.state = (u64)q.state;
            d.qpn = q.qpn;
            d.log_sq_wqebbs = log_ring;
            d.log_cq_entries = log_ring;
            d.max_inline = 256;
            d.cq_mode = 0;
            d.transport = 0;
            d.scope = ibgda::layout::SCOPE_GPU_RELEASE_STORE;
            d.signal_interval = wqebbs / 2;
            d.wait_ns = wait_ns;
            descs[(u64)r * R + p] = d;
        }
    }
    std::vector<ibgda::DeviceCounter> no_counters(1);
    std::vector<ibgda::DeviceCounterSlot> no_slots(1);
    std::vector<ibgda::DeviceComm> comms(R);
    for (u32 r = 0; r < R; r++) {
        ibgda::DeviceComm& c = comms[r];
        c.queues = (u64)&descs[(u64)r * R];
        c.counters = (u64)no_counters.data();
        c.counter_slots = (u64)no_slots.data();
        c.scratch = (u64)scratch[r];
        c.wait_ns = wait_ns;
        c.n_peers = R;
        c.rank = r;
        c.scope = ibgda::layout::SCOPE_GPU_RELEASE_STORE;
        c.scratch_lkey = lkey(r, W);
        c.n_counters = 0;
        c.counter_capacity = 256;
        c.inline_max = ibgda::layout::PUT_INLINE_MAX;
        c.doorbell_batch = 1;
    }
    std::vector<ibgda::DeviceWindowPeer> peers((u64)R * W * R);
    std::vector<ibgda::DeviceWindow> windows((u64)R * W);
    std::vector<u64> remote, local;
    for (u32 r = 0; r < R; r++) {
        for (u32 w = 0; w < W; w++) {
            for (u32 p = 0; p < R; p++) peers[((u64)r * W + w) * R + p] = ibgda::DeviceWindowPeer{(u64)win[p][w], sizes[w], rkey(p, w), 0};
            windows[(u64)r * W + w] = ibgda::DeviceWindow{(u64)&peers[((u64)r * W + w) * R], (u64)win[r][w], sizes[w], R, lkey(r, w), w, 0};
        }
        for (u32 p = 0; p < R; p++) {
            for (u32 w = 0; w < W; w++) {
                remote.push_back((u64)win[p][w]);
                remote.push_back(rkey(p, w));
            }
        }
        for (u32 w = 0; w < W; w++) {
            local.push_back((u64)win[r][w]);
            local.push_back(lkey(r, w));
        }
        local.push_back((u64)scratch[r]);
        local.push_back(lkey(r, W));
    }

    Nic nic(engines, nic_threads);
    const unsigned block = 64;
    for (u32 i = 0; i < n_steps; i++) {
        for (u32 r = 0; r < R; r++) {
            std::memset(win[r][MOE_W_RECV], 0, sizes[MOE_W_RECV]);
            std::memset(win[r][MOE_W_COMBINE], 0, sizes[MOE_W_COMBINE]);
            std::memset(win[r][MOE_W_SEND] + MOE_OUT_OFF, 0, (u64)T * H * 2);
        }
        int status = 0;
        const bool raw = variants[i] != 0;
        /* The launches of `n` ranks from rank `first`: slot 0 of their tables is rank
         * `first`'s. */
        auto phases = [&](u32 first, u32 n) {
            const ibgda::DeviceComm* cs = comms.data() + first;
            const ibgda::DeviceWindow* ws = windows.data() + (u64)first * W;
            const u64* rem = remote.data() + (u64)first * R * W * 2;
            const u64* loc = local.data() + (u64)first * (W + 1) * 2;
            const unsigned grid = n * MOE_BLOCKS;
            if (MOE_FP8) ibgda_host::launch(grid, block, [&] { moe_quantize(cs, ws); });
            ibgda_host::launch(grid, block, [&] {
                if (raw) {
                    moe_dispatch_raw(cs, ws, rem, loc, i, &status);
                } else {
                    moe_dispatch_typed(cs, ws, i, &status);
                }
            });
            ibgda_host::launch(grid, block, [&] {
                if (raw) {
                    moe_combine_raw(cs, ws, rem, loc, i, &status);
                } else {
                    moe_combine_typed(cs, ws, i, &status);
                }
            });
        };
        nic.start();
        if (processes) {
            /* Each rank's launches on their own, as its process makes them: no rank waits
             * for another's launch to end (only for its signals). */
            std::vector<std::thread> ranks;
            for (u32 r = 0; r < R; r++) ranks.emplace_back([&, r] { phases(r, 1); });
            for (auto& t : ranks) t.join();
        } else {
            phases(0, R);
        }
        nic.stop();
        statuses[i] = status;
        for (u32 r = 0; r < R; r++) {
            std::memcpy(out + ((u64)i * R + r) * T * H, win[r][MOE_W_SEND] + MOE_OUT_OFF, (u64)T * H * 2);
            std::memcpy(counts + ((u64)i * R + r) * PAIRS, win[r][MOE_W_SIGNAL] + MOE_COUNTS_OFF, (u64)PAIRS * 4);
        }
    }
    return 0;
}
