//! Sets `cfg(ibgda_nvrtc)` when an NVRTC for the compile tests can be found (the pinned
//! wheels of `scripts/cuda-wheels.sh`, `$IBGDA_NVRTC_DIR`, or `/usr/local/cuda/lib64`).
//!
//! Without it the NVRTC tests report as ignored, unless `IBGDA_REQUIRE_NVRTC=1`, which
//! makes this script fail (CI sets it). The crate itself never needs CUDA to build.

use std::env;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo::rustc-check-cfg=cfg(ibgda_nvrtc)");
    println!("cargo::rerun-if-changed=build.rs");
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
    dirs.push(PathBuf::from("/usr/local/cuda/lib64"));
    let stamp = wheels.join(".stamp");
    println!("cargo::rerun-if-changed={}", stamp.display());
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
