//! The MoE dispatch and combine of `cuda/moe.cu`, both variants (the device API's kernels
//! and the same kernels on the builders), run on host threads over the host build of the
//! CUDA software NIC's engine (`experiments::moe::host`, `cuda/moe_host.cpp`): one after
//! another in one process as `experiments::moe::run` runs them (the device API's first,
//! the signal words and the queue pairs' counters carried from step to step, the NIC
//! stopped and restarted between steps), each step checked against the CPU reference.
//! On the H200 (2026-12-02) the builders' variant, run second, ended at its 10 s device
//! wait; here both complete, also with rings small enough that every step wraps them and
//! polls completions for room, and with each rank run as a process of its own runs it (a
//! launch per rank, an engine per queue pair).
//!
//! Regenerate the host shape's layout header with
//! `IBGDA_BLESS=1 cargo test -p ibgda-kernels --features test-support --test moe_host`.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ibgda::memory::DmaBuffer;
use ibgda::nic::{Device, MemoryAccess, SoftNic, Window};
use ibgda::softnic::Fabric;
use ibgda_kernels::experiments::moe::host::{self, Ranks, Variant};
use ibgda_kernels::experiments::moe::{raw_tables, reference, MoeRank, WINDOWS};

#[test]
fn the_committed_host_layout_header_is_the_host_shapes() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(host::LAYOUT_PATH);
    let generated = host::layout_header();
    if std::env::var("IBGDA_BLESS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &generated).expect("write the host layout header");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(
        committed,
        generated,
        "{} is out of date with MoeLayout of host::params(); regenerate it with IBGDA_BLESS=1",
        path.display()
    );
}

/// Runs `variants` on rings of 2^`log_ring` WQEBBs and checks every step against the
/// reference: status 0, every rank's received counts and combined output.
fn run_and_check(variants: &[Variant], log_ring: u32) {
    run_and_check_ranks(variants, log_ring, Ranks::Threads);
}

/// As `run_and_check`, the ranks as `ranks` says.
fn run_and_check_ranks(variants: &[Variant], log_ring: u32, ranks: Ranks) {
    let p = host::params();
    p.check().expect("the host shape is valid");
    let inputs = reference::inputs(&p);
    let steps = host::run_ranks(
        &inputs,
        variants,
        log_ring,
        Duration::from_secs(60),
        2,
        ranks,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(steps.len(), variants.len());
    for (i, (step, v)) in steps.iter().zip(variants).enumerate() {
        assert_eq!(
            step.status, 0,
            "step {i} ({v:?}), ring 2^{log_ring}: status"
        );
        for r in 0..p.ranks {
            for e_local in 0..p.local_experts() {
                for src in 0..p.ranks {
                    let want = reference::received(&p, &inputs, r, e_local, src).len();
                    assert_eq!(
                        step.counts[r][e_local * p.ranks + src] as usize,
                        want,
                        "step {i} ({v:?}): rank {r} expert {e_local} from {src}"
                    );
                }
            }
            assert!(
                step.out[r] == reference::combined(&p, &inputs[r]),
                "step {i} ({v:?}), ring 2^{log_ring}: rank {r}'s combined output differs"
            );
        }
    }
}

#[test]
fn the_builders_variant_after_the_device_apis_completes_and_matches_the_reference() {
    // The GPU run's order: the device API's checked step, then the builders'.
    run_and_check(
        &[Variant::Typed, Variant::Raw, Variant::Typed, Variant::Raw],
        10,
    );
}

#[test]
fn both_variants_complete_on_rings_they_wrap() {
    // 64 WQEBBs: every step wraps every ring and waits for room (CQ polls), the builders'
    // variant first this time.
    run_and_check(
        &[Variant::Raw, Variant::Typed, Variant::Raw, Variant::Typed],
        6,
    );
}

#[test]
fn both_variants_complete_with_each_rank_as_a_process_would_run_it() {
    // A launch per rank over slot 0 of its own tables (the communicator says the rank),
    // the ranks' launches concurrent, and one engine per queue pair whose peer's receive
    // side is a record without credits or CQ: what a process per rank runs on the GPU
    // (`experiments::moe_process`), here with every byte in one address space.
    run_and_check_ranks(
        &[Variant::Typed, Variant::Raw, Variant::Typed, Variant::Raw],
        6,
        Ranks::Processes,
    );
}

#[test]
fn the_builders_tables_name_what_the_window_tables_name() {
    // Three ranks on the CPU software NIC, each with the experiment's five windows and its
    // scratch registration after them, as setup_rank makes them.
    let fabric = Fabric::new();
    let rw = MemoryAccess::LOCAL_WRITE | MemoryAccess::REMOTE_WRITE | MemoryAccess::REMOTE_ATOMIC;
    let ranks_n = 3;
    let mut made = Vec::new();
    for r in 0..ranks_n {
        let device =
            Device::open(SoftNic::open(&fabric, 1 + r as u16).expect("nic")).expect("device");
        let pd = device.alloc_pd().expect("pd");
        let regions: Vec<_> = (0..=WINDOWS)
            .map(|w| {
                let len = if w == WINDOWS { 64 } else { 256 * (w + 1 + r) };
                let buffer = Arc::new(DmaBuffer::zeroed(len, 64).expect("buffer"));
                let access = if w == WINDOWS {
                    MemoryAccess::LOCAL_WRITE
                } else {
                    rw
                };
                pd.register(buffer, 0, len, access).expect("register")
            })
            .collect();
        made.push((device, regions));
    }
    let endpoints: Vec<Vec<_>> = (0..WINDOWS)
        .map(|w| {
            made.iter()
                .map(|(_, g)| g[w].window_endpoint(w as u32))
                .collect()
        })
        .collect();
    let ranks: Vec<MoeRank<SoftNic>> = made
        .into_iter()
        .map(|(device, regions)| MoeRank {
            windows: (0..WINDOWS)
                .map(|w| Window::new(&regions[w], w as u32, endpoints[w].clone()).expect("window"))
                .collect(),
            regions,
            queues: Vec::new(),
            buffers: Vec::new(),
            device,
        })
        .collect();
    let (remote, local) = raw_tables(&ranks).expect("tables");
    assert_eq!(remote.len(), ranks_n * ranks_n * WINDOWS * 2);
    assert_eq!(local.len(), (ranks_n * WINDOWS + ranks_n) * 2);
    for (r, rank) in ranks.iter().enumerate() {
        for (w, window) in rank.windows.iter().enumerate() {
            // Indexed as Raw::remote and Raw::local index them.
            for (peer, d) in window.device_peers().iter().enumerate() {
                let at = ((r * ranks_n + peer) * WINDOWS + w) * 2;
                assert_eq!(
                    (remote[at], remote[at + 1]),
                    (d.base, u64::from(d.rkey)),
                    "rank {r} peer {peer} window {w}"
                );
            }
            let d = window.device_window(0);
            let at = (r * (WINDOWS + 1) + w) * 2;
            assert_eq!(
                (local[at], local[at + 1]),
                (d.local_base, u64::from(d.lkey))
            );
        }
        let at = (r * (WINDOWS + 1) + WINDOWS) * 2;
        let scratch = &rank.regions[WINDOWS];
        assert_eq!(
            (local[at], local[at + 1]),
            (scratch.addr(), u64::from(scratch.lkey().0))
        );
    }
}
