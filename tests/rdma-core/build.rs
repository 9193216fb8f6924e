//! Finds the rdma-core build made by `scripts/rdma-core.sh`, compiles the C shim
//! against it and links the provider; sets `cfg(ibgda_oracle)` when it did.
//!
//! Where it looks: `$IBGDA_RDMA_CORE_DIR` if set, else
//! `<workspace>/<target dir>/rdma-core/56.1` (the script's default; the target dir is
//! `$CARGO_TARGET_DIR` or `<workspace>/target`).
//!
//! Without the build: a loud `cargo:warning`, and the oracle tests report as ignored,
//! unless `IBGDA_REQUIRE_ORACLE=1`, which makes this script fail (CI sets it).

use std::env;
use std::path::{Path, PathBuf};

const RDMA_CORE_VERSION: &str = "56.1";

/// The archives the script copies under names of our own (so the system's
/// libmlx5/libibverbs can never be picked), in link order.
const ARCHIVES: [&str; 4] = [
    "ibgda_oracle_mlx5",
    "ibgda_oracle_ibverbs",
    "ibgda_oracle_rdma_util",
    "ibgda_oracle_ccan",
];

/// System libraries the provider needs (libnl for the neighbour resolution that
/// `mlx5_create_ah` pulls in).
const SYSTEM_LIBS: [&str; 3] = ["nl-route-3", "nl-3", "pthread"];

const LIBNL_INCLUDE: &str = "/usr/include/libnl3";

/// The scapy release `scripts/scapy.sh` installs (rdma-core's `tests/mlx5_prm_structs.py`
/// needs it to serialize PRM commands).
const SCAPY_VERSION: &str = "2.6.1";

fn main() {
    println!("cargo::rustc-check-cfg=cfg(ibgda_oracle)");
    println!("cargo::rustc-check-cfg=cfg(ibgda_scapy)");
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=shim/oracle.c");
    println!("cargo::rerun-if-changed=shim/oracle.h");
    println!("cargo::rerun-if-changed=shim/prm.c");
    println!("cargo::rerun-if-changed=shim/prm.h");
    println!("cargo::rerun-if-changed=shim/verbs_abi.c");
    println!("cargo::rerun-if-changed=shim/roce.c");
    println!("cargo::rerun-if-changed=shim/roce.h");
    println!("cargo::rerun-if-env-changed=IBGDA_RDMA_CORE_DIR");
    println!("cargo::rerun-if-env-changed=IBGDA_REQUIRE_ORACLE");
    println!("cargo::rerun-if-env-changed=CARGO_TARGET_DIR");

    let manifest_dir =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let workspace = manifest_dir
        .parent()
        .and_then(Path::parent)
        .expect("tests/rdma-core sits two levels below the workspace root")
        .to_path_buf();
    let dir = oracle_dir(&workspace);
    let stamp = dir.join(".stamp");
    // Re-run when the build appears, changes or disappears. (A missing path makes
    // cargo re-run this script on every build, which keeps the warning below loud.)
    println!("cargo::rerun-if-changed={}", stamp.display());

    match check_build(&dir) {
        Ok(()) => {
            for lib in ARCHIVES {
                println!(
                    "cargo::rerun-if-changed={}",
                    dir.join("lib").join(format!("lib{lib}.a")).display()
                );
            }
            compile_and_link(&dir);
            println!("cargo::rustc-cfg=ibgda_oracle");
            find_scapy(&workspace, &dir);
        }
        Err(why) => {
            let script = workspace.join("scripts/rdma-core.sh");
            let required = env::var("IBGDA_REQUIRE_ORACLE").is_ok_and(|v| v == "1");
            if required {
                panic!(
                    "IBGDA_REQUIRE_ORACLE=1 but the rdma-core oracle is not built: {why} \
                     (looked in {dir}). Build it with: bash {script}",
                    dir = dir.display(),
                    script = script.display(),
                );
            }
            println!(
                "cargo::warning=rdma-core oracle ABSENT ({why}; looked in {}): the rdma-core \
                 differential tests will be reported as IGNORED, not run. Build it with: bash {}",
                dir.display(),
                script.display(),
            );
        }
    }
}

/// rdma-core's scapy PRM definitions need the pinned scapy installed by
/// `scripts/scapy.sh` under `<target>/scapy/<version>/site`; required like the oracle.
fn find_scapy(workspace: &Path, rdma_core: &Path) {
    let site = env::var_os("IBGDA_SCAPY_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            target_dir(workspace)
                .join("scapy")
                .join(SCAPY_VERSION)
                .join("site")
        });
    let structs = rdma_core.join("src/tests/mlx5_prm_structs.py");
    println!("cargo::rerun-if-env-changed=IBGDA_SCAPY_DIR");
    println!(
        "cargo::rerun-if-changed={}",
        site.join("scapy/__init__.py").display()
    );
    let missing = [site.join("scapy/__init__.py"), structs.clone()]
        .into_iter()
        .find(|path| !path.is_file());
    match missing {
        None => {
            println!("cargo::rustc-env=IBGDA_SCAPY_SITE={}", site.display());
            println!(
                "cargo::rustc-env=IBGDA_PRM_STRUCTS_PY={}",
                structs.display()
            );
            println!("cargo::rustc-cfg=ibgda_scapy");
        }
        Some(path) => {
            let script = workspace.join("scripts/scapy.sh");
            if env::var("IBGDA_REQUIRE_ORACLE").is_ok_and(|v| v == "1") {
                panic!(
                    "IBGDA_REQUIRE_ORACLE=1 but the scapy PRM oracle is missing: {} not found. \
                     Install it with: bash {}",
                    path.display(),
                    script.display()
                );
            }
            println!(
                "cargo::warning=scapy PRM oracle ABSENT ({} not found): the CREATE_CQ / \
                 CREATE_QP scapy differential tests will be reported as IGNORED. Install it \
                 with: bash {}",
                path.display(),
                script.display()
            );
        }
    }
}

fn target_dir(workspace: &Path) -> PathBuf {
    match env::var_os("CARGO_TARGET_DIR") {
        Some(t) if Path::new(&t).is_absolute() => PathBuf::from(t),
        Some(t) => workspace.join(t),
        None => workspace.join("target"),
    }
}

fn oracle_dir(workspace: &Path) -> PathBuf {
    if let Some(dir) = env::var_os("IBGDA_RDMA_CORE_DIR") {
        return PathBuf::from(dir);
    }
    let target = match env::var_os("CARGO_TARGET_DIR") {
        Some(t) if Path::new(&t).is_absolute() => PathBuf::from(t),
        Some(t) => workspace.join(t),
        None => workspace.join("target"),
    };
    target.join("rdma-core").join(RDMA_CORE_VERSION)
}

fn check_build(dir: &Path) -> Result<(), String> {
    if !dir.join(".stamp").is_file() {
        return Err("no completed build (stamp file missing)".into());
    }
    for lib in ARCHIVES {
        let path = dir.join("lib").join(format!("lib{lib}.a"));
        if !path.is_file() {
            return Err(format!("{} missing", path.display()));
        }
    }
    for header in [
        "src/providers/mlx5/mlx5.h",
        "src/providers/mlx5/wqe.h",
        "build/include/config.h",
    ] {
        if !dir.join(header).is_file() {
            return Err(format!("{} missing", dir.join(header).display()));
        }
    }
    if !Path::new(LIBNL_INCLUDE).join("netlink/netlink.h").is_file() {
        return Err(format!(
            "{LIBNL_INCLUDE} missing (Debian package libnl-3-dev)"
        ));
    }
    Ok(())
}

fn compile_and_link(dir: &Path) {
    let mut build = cc::Build::new();
    build
        .file("shim/oracle.c")
        .file("shim/prm.c")
        .file("shim/verbs_abi.c")
        .file("shim/roce.c")
        .include("shim")
        .define("_STATIC_LIBRARY_BUILD_", "1")
        .flag("-std=gnu11");
    // The provider's headers are not ours: include them as system headers so their
    // warnings do not drown ours (-Wall -Wextra stay on for shim/oracle.c).
    for sys in [
        dir.join("build/include"),
        dir.join("src/providers/mlx5"),
        PathBuf::from(LIBNL_INCLUDE),
    ] {
        build
            .flag("-isystem")
            .flag(sys.to_str().expect("UTF-8 path"));
    }
    build.compile("ibgda_oracle_shim");

    println!(
        "cargo::rustc-link-search=native={}",
        dir.join("lib").display()
    );
    for lib in ARCHIVES {
        println!("cargo::rustc-link-lib=static={lib}");
    }
    for lib in SYSTEM_LIBS {
        println!("cargo::rustc-link-lib=dylib={lib}");
    }
    // The PRM oracle runs rdma-core's dr_devx_* command builders and captures the command
    // each would send: its DEVX object calls resolve to the shim's __wrap_ definitions. The
    // RoCE oracle runs mlx5_create_ah for an Ethernet port: its sysfs and netlink lookups
    // resolve to the shim's answers.
    for symbol in [
        "mlx5dv_devx_obj_create",
        "mlx5dv_devx_obj_modify",
        "ibv_query_gid_type",
        "ibv_resolve_eth_l2_from_gid",
    ] {
        println!("cargo::rustc-link-arg=-Wl,--wrap={symbol}");
    }
}
