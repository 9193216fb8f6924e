//! The proxy program compiles to an sm_90 cubin through NVRTC, its device encoders equal
//! the Rust encoder (the program `static_assert`s them against generated words), and each
//! handoff protocol and the CPU-assisted doorbell compile to exactly the ordering
//! instructions their documentation names.
//!
//! Without NVRTC these tests are ignored; with `IBGDA_REQUIRE_NVRTC=1` the build fails.

use std::sync::OnceLock;

use ibgda::proxy::{Baseline, Tuned};
use ibgda_kernels::gpu::CompileOptions;
use ibgda_kernels::nvrtc::{resource_usage, Compiled};
use ibgda_kernels::proxy::{compile, handoff_kernel};
use ibgda_kernels::ptx::ordering_of;

fn proxy() -> &'static Compiled {
    static CACHE: OnceLock<Compiled> = OnceLock::new();
    CACHE.get_or_init(|| compile(&CompileOptions::new()).unwrap_or_else(|e| panic!("{e}")))
}

fn ordering(kernel: &str) -> Vec<String> {
    ordering_of(&proxy().ptx, kernel).unwrap_or_else(|| panic!("{kernel} missing"))
}

#[test]
#[cfg_attr(
    not(ibgda_nvrtc),
    ignore = "NVRTC not installed: run scripts/cuda-wheels.sh"
)]
fn the_proxy_program_compiles_with_every_kernel() {
    let c = proxy();
    assert_eq!(&c.cubin[..4], b"\x7fELF");
    let usage = resource_usage(&c.log);
    for u in &usage {
        println!(
            "{:<44} {:>4} regs {:>4} stack {:>3}/{:>3} spills",
            u.kernel, u.registers, u.stack_bytes, u.spill_stores, u.spill_loads
        );
    }
    for k in [
        "ibgda_proxy_push_Baseline",
        "ibgda_proxy_push_Tuned",
        "ibgda_proxy_enqueue_Baseline",
        "ibgda_proxy_enqueue_Tuned",
        "ibgda_proxy_rate_Baseline",
        "ibgda_proxy_rate_Tuned",
        "ibgda_proxy_probe",
        "ibgda_assisted_doorbell_path_SystemReleaseStore",
        "ibgda_assisted_doorbell_path_SystemFence",
        "ibgda_assisted_post_SystemReleaseStore",
        "ibgda_assisted_post_SystemFence",
    ] {
        assert!(usage.iter().any(|u| u.kernel == k), "{k} missing");
    }
    // The launchers find their instances by these names.
    for base in [
        "ibgda_proxy_push",
        "ibgda_proxy_enqueue",
        "ibgda_proxy_rate",
    ] {
        for k in [
            handoff_kernel::<Baseline>(base),
            handoff_kernel::<Tuned>(base),
        ] {
            assert!(
                usage.iter().any(|u| u.kernel == k),
                "launcher name {k} missing"
            );
        }
    }
}

/// Tuned: one 16-byte relaxed system-scope store, and the acquire re-read of the progress
/// only on the path where the cached copy says full. No fence, no atomic.
#[test]
#[cfg_attr(
    not(ibgda_nvrtc),
    ignore = "NVRTC not installed: run scripts/cuda-wheels.sh"
)]
fn tuned_push_is_one_16_byte_store() {
    let push = ordering("ibgda_proxy_push_Tuned");
    println!("tuned push: {}", push.join("; "));
    assert_eq!(
        push,
        ["ld.acquire.sys.global.b64", "st.relaxed.sys.global.v2.b64"]
    );
}

/// Baseline: the device atomic reservation, the acquire read of the host-resident
/// progress, the operand word, then the control word with a system-scope release.
#[test]
#[cfg_attr(
    not(ibgda_nvrtc),
    ignore = "NVRTC not installed: run scripts/cuda-wheels.sh"
)]
fn baseline_push_reserves_reads_progress_and_releases_at_system_scope() {
    let push = ordering("ibgda_proxy_push_Baseline");
    println!("baseline push: {}", push.join("; "));
    assert_eq!(
        push,
        [
            "atom.global.add.u64",
            "ld.acquire.sys.global.b64",
            "st.relaxed.sys.global.b64",
            "st.release.sys.global.b64"
        ]
    );
}

/// The CPU-assisted doorbell: one system-scope release store of the index to the host
/// slot, in place of the scope's doorbell record and MMIO doorbell (no `.mmio` store at
/// all), while the scope's CQ side stays (checked on the posting kernel).
#[test]
#[cfg_attr(
    not(ibgda_nvrtc),
    ignore = "NVRTC not installed: run scripts/cuda-wheels.sh"
)]
fn the_assisted_doorbell_publishes_an_index_and_never_rings_mmio() {
    for scope in ["SystemReleaseStore", "SystemFence"] {
        let path = ordering(&format!("ibgda_assisted_doorbell_path_{scope}"));
        println!("{scope:<20} assisted doorbell: {}", path.join("; "));
        assert_eq!(path, ["st.release.sys.global.b32"], "{scope}");
        let post = ordering(&format!("ibgda_assisted_post_{scope}"));
        println!("{scope:<20} assisted post: {}", post.join("; "));
        assert!(
            !post.iter().any(|i| i.contains(".mmio")),
            "{scope}: {post:?}"
        );
        assert!(post.iter().any(|i| i == "st.release.sys.global.b32"));
    }
    // The CQ loads are the scope's own.
    let post = ordering("ibgda_assisted_post_SystemReleaseStore");
    assert!(post.iter().any(|i| i == "ld.acquire.sys.global.b64"));
    let post = ordering("ibgda_assisted_post_SystemFence");
    assert!(post.iter().any(|i| i == "ld.volatile.global.b64"));
}
