//! Sets `cfg(ibgda_nvrtc)` when an NVRTC for the compile tests can be found (the pinned
//! wheels of `scripts/cuda-wheels.sh`, `$IBGDA_NVRTC_DIR`, or `/usr/local/cuda/lib64`).
//!
//! Without it the NVRTC tests report as ignored, unless `IBGDA_REQUIRE_NVRTC=1`, which
//! makes this script fail (CI sets it). The crate itself never needs CUDA to build. A
//! packaged crate (from the registry: no tests, no `scripts/`) skips both checks, which
//! only serve this crate's own tests.
//!
//! It also compiles the CUDA software NIC's engine (`cuda/softnic.cuh`, portable C++) for
//! the host with the system C++ compiler, so that the differential test against the CPU
//! software NIC runs without a GPU, and the hand-written baseline's WQE writer
//! (`cuda/raw_host.cpp`), so that a test compares its bytes with the Rust builders'.

use std::env;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo::rustc-check-cfg=cfg(ibgda_nvrtc)");
    println!("cargo::rustc-check-cfg=cfg(ibgda_no_host_engine)");
    println!("cargo::rustc-check-cfg=cfg(ibgda_peers)");
    println!("cargo::rerun-if-changed=build.rs");
    // For dependents' build scripts (`links = "ibgda"`): DEP_IBGDA_INCLUDE.
    let cuda =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR")).join("cuda");
    println!("cargo::metadata=include={}", cuda.display());
    build_host_engine();
    build_raw_host();
    for var in [
        "IBGDA_NVRTC_DIR",
        "IBGDA_CUDA_WHEELS_DIR",
        "IBGDA_REQUIRE_NVRTC",
        "CARGO_TARGET_DIR",
    ] {
        println!("cargo::rerun-if-env-changed={var}");
    }
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let workspace = manifest
        .parent()
        .expect("kernels/ sits in the workspace")
        .to_path_buf();
    let wheels = match env::var_os("IBGDA_CUDA_WHEELS_DIR") {
        Some(d) => PathBuf::from(d),
        None => {
            let target = match env::var_os("CARGO_TARGET_DIR") {
                Some(t) if Path::new(&t).is_absolute() => PathBuf::from(t),
                Some(t) => workspace.join(t),
                None => workspace.join("target"),
            };
            target.join("cuda-wheels/13.0")
        }
    };
    let mut dirs: Vec<PathBuf> = env::var_os("IBGDA_NVRTC_DIR")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    dirs.push(wheels.join("cu13/lib"));
    // Builds with their own target directory (trybuild's compile-fail checks) find the
    // wheels where scripts/cuda-wheels.sh put them, in the workspace's.
    let workspace_wheels = workspace.join("target/cuda-wheels/13.0");
    if workspace_wheels != wheels {
        println!(
            "cargo::rerun-if-changed={}",
            workspace_wheels.join(".stamp").display()
        );
        dirs.push(workspace_wheels.join("cu13/lib"));
    }
    dirs.push(PathBuf::from("/usr/local/cuda/lib64"));
    let stamp = wheels.join(".stamp");
    println!("cargo::rerun-if-changed={}", stamp.display());
    if !workspace.join("scripts/cuda-wheels.sh").is_file() {
        // A packaged crate: its tests (the only users of these cfgs) are not in it.
        return;
    }
    find_peer_headers(&workspace);
    let found = dirs.iter().find(|d| d.join("libnvrtc.so.13").is_file());
    match found {
        Some(dir) => {
            println!("cargo::rustc-cfg=ibgda_nvrtc");
            println!("cargo::rustc-env=IBGDA_NVRTC_FOUND={}", dir.display());
        }
        None => {
            let script = workspace.join("scripts/cuda-wheels.sh");
            if env::var("IBGDA_REQUIRE_NVRTC").is_ok_and(|v| v == "1") {
                panic!(
                    "IBGDA_REQUIRE_NVRTC=1 but no libnvrtc.so.13 was found (looked in {dirs:?}). \
                     Install the pinned wheels with: bash {}",
                    script.display()
                );
            }
            println!(
                "cargo::warning=NVRTC ABSENT (looked in {dirs:?}): the kernel compile and PTX tests \
                 will be reported as IGNORED, not run. Install it with: bash {}",
                script.display()
            );
        }
    }
}

/// Sets `cfg(ibgda_peers)` when the pinned nvidia-nvshmem-cu13 headers are installed
/// (`scripts/peer-headers.sh`: `<target>/peers/include`, or `$IBGDA_PEER_INCLUDE`); without
/// them the peer compile test is ignored, unless `IBGDA_REQUIRE_PEERS=1`, which fails here.
fn find_peer_headers(workspace: &Path) {
    for var in ["IBGDA_PEER_INCLUDE", "IBGDA_REQUIRE_PEERS"] {
        println!("cargo::rerun-if-env-changed={var}");
    }
    let target = match env::var_os("CARGO_TARGET_DIR") {
        Some(t) if Path::new(&t).is_absolute() => PathBuf::from(t),
        Some(t) => workspace.join(t),
        None => workspace.join("target"),
    };
    // The workspace's own target directory too: a nested build (trybuild's, under
    // target/tests/) has a target directory of its own but the same installed headers.
    let candidates: Vec<PathBuf> = match env::var_os("IBGDA_PEER_INCLUDE") {
        Some(d) => vec![PathBuf::from(d)],
        None => vec![
            target.join("peers/include"),
            workspace.join("target/peers/include"),
        ],
    };
    for d in &candidates {
        println!("cargo::rerun-if-changed={}", d.join(".stamp").display());
    }
    let found = candidates.iter().find(|d| {
        d.join("gpunetio/device/doca_gpunetio_dev_verbs_onesided.cuh")
            .is_file()
    });
    let dir = found.unwrap_or(&candidates[0]);
    if found.is_some() {
        println!("cargo::rustc-cfg=ibgda_peers");
    } else if env::var("IBGDA_REQUIRE_PEERS").is_ok_and(|v| v == "1") {
        panic!(
            "IBGDA_REQUIRE_PEERS=1 but the nvidia-nvshmem-cu13 headers are not in {}. \
             Install them with: bash {}",
            dir.display(),
            workspace.join("scripts/peer-headers.sh").display()
        );
    } else {
        println!(
            "cargo::warning=peer headers ABSENT ({}): the peer compile test will be reported as \
             IGNORED. Install them with: bash scripts/peer-headers.sh",
            dir.display()
        );
    }
}

/// The host build of the CUDA software NIC's engine: `cuda/softnic_host.cpp` (which includes
/// `cuda/softnic.cuh` and the generated `cuda/ibgda_layout.h`) as a static library, with
/// the host build of the device API's planning and the device library's builders
/// (`cuda/api_host.cpp`).
///
/// `IBGDA_SKIP_HOST_ENGINE=1` leaves it out (`cfg(ibgda_no_host_engine)`: the host engine
/// then refuses to start, so its tests fail rather than pass): only for regenerating a
/// layout header that the engine does not compile against yet.
fn build_host_engine() {
    println!("cargo::rerun-if-env-changed=IBGDA_SKIP_HOST_ENGINE");
    if env::var("IBGDA_SKIP_HOST_ENGINE").is_ok_and(|v| v == "1") {
        println!("cargo::rustc-cfg=ibgda_no_host_engine");
        println!("cargo::warning=IBGDA_SKIP_HOST_ENGINE=1: the host build of the CUDA software NIC is left out");
        return;
    }
    for f in [
        "cuda/softnic_host.cpp",
        "cuda/softnic.cuh",
        "cuda/ibgda_layout.h",
        "cuda/api_host.cpp",
        "cuda/api_calls.cuh",
        "cuda/ibgda_api.cuh",
        "cuda/ibgda.cuh",
        "cuda/host_shim.h",
    ] {
        println!("cargo::rerun-if-changed={f}");
    }
    cc::Build::new()
        .cpp(true)
        .std("c++17")
        .file("cuda/softnic_host.cpp")
        // The device API's planning and the device library's WQE builders, for the host
        // (the byte comparison of every operation without a GPU).
        .file("cuda/api_host.cpp")
        .flag_if_supported("-Wno-unknown-pragmas")
        .include("cuda")
        .warnings(true)
        .extra_warnings(true)
        .flag_if_supported("-Wno-unused-parameter")
        .compile("ibgda_softnic_host");
    build_moe_host();
}

/// With `test-support`: `cuda/moe_host.cpp`, the MoE kernels of `cuda/moe.cu` run on host
/// threads over the host engine (`experiments::moe::host`), for the shape of the committed
/// `cuda/host/moe_layout.h`. Left out otherwise: nothing else calls it.
fn build_moe_host() {
    if env::var_os("CARGO_FEATURE_TEST_SUPPORT").is_none() {
        return;
    }
    for f in [
        "cuda/moe_host.cpp",
        "cuda/moe.cu",
        "cuda/host/moe_layout.h",
        "cuda/host_threads.h",
        "cuda/ptx_host.h",
    ] {
        println!("cargo::rerun-if-changed={f}");
    }
    cc::Build::new()
        .cpp(true)
        .std("c++17")
        .file("cuda/moe_host.cpp")
        // moe.cu includes "moe_layout.h": the host shape's, generated from MoeLayout.
        .include("cuda/host")
        .include("cuda")
        .flag_if_supported("-pthread")
        .flag_if_supported("-Wno-unknown-pragmas")
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true)
        .flag_if_supported("-Wno-unused-parameter")
        .compile("ibgda_moe_host");
}

/// The host build of the hand-written baseline's WQE writer: `cuda/raw_host.cpp` (which
/// includes the PTX-free part of `cuda/raw_baseline.cu`) as a static library.
fn build_raw_host() {
    // Left out with the engine (it includes the same generated header).
    if env::var("IBGDA_SKIP_HOST_ENGINE").is_ok_and(|v| v == "1") {
        return;
    }
    for f in [
        "cuda/raw_host.cpp",
        "cuda/raw_baseline.cu",
        "cuda/ibgda_layout.h",
    ] {
        println!("cargo::rerun-if-changed={f}");
    }
    cc::Build::new()
        .cpp(true)
        .std("c++17")
        .file("cuda/raw_host.cpp")
        .include("cuda")
        // The writer's `#pragma unroll` is for nvcc and NVRTC.
        .flag_if_supported("-Wno-unknown-pragmas")
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true)
        .flag_if_supported("-Wno-unused-parameter")
        .compile("ibgda_raw_host");
}
