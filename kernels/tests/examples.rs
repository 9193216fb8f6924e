//! The top-level examples run (or compile) in CI: `examples/host_rdma.rs` is included here
//! and run on the software NIC (it checks every byte it moves; `tests/emulated_nic.rs`
//! runs it on the mlx5 backend over the emulated ConnectX, and `scripts/test` runs the
//! example itself there with `--nic mlx5_0`); the CUDA of
//! `examples/user_kernel/` is compiled through NVRTC by `tests/nvrtc_ptx.rs`, that of
//! `examples/put_signal/` by `tests/api_ptx.rs`; the README's "Writing a kernel" shows
//! exactly `examples/put_signal/`'s code (checked here).

#[path = "../../examples/host_rdma.rs"]
mod host_rdma;

#[test]
fn host_rdma_example_moves_the_bytes_it_says() {
    let report = host_rdma::run("soft").expect("the host RDMA example");
    assert!(report.contains("on the software NIC"), "{report}");
}

/// `--nic` picks the backend as `ibgda-demo --nic` does: `soft` by default, any other name
/// a device of the mlx5 backend, which a build without it refuses by name.
#[test]
fn host_rdma_example_takes_a_device_name() {
    let args = |a: &[&str]| host_rdma::nic_from_args(a.iter().map(|s| s.to_string()));
    assert_eq!(args(&[]).as_deref(), Ok("soft"));
    assert_eq!(args(&["--nic", "mlx5_0"]).as_deref(), Ok("mlx5_0"));
    assert_eq!(args(&["--nic=mlx5_1"]).as_deref(), Ok("mlx5_1"));
    assert!(args(&["--nic"])
        .unwrap_err()
        .contains("--nic needs a value"));
    assert!(args(&["--nick", "x"])
        .unwrap_err()
        .contains("unknown argument \"--nick\""));
    assert!(args(&["--nic="]).unwrap_err().contains("an empty NIC name"));
    let error = host_rdma::run("mlx5_9")
        .expect_err("no device mlx5_9 here")
        .to_string();
    if cfg!(feature = "mlx5") {
        // No such device (or no rdma-core): the mlx5 backend's typed error, not the
        // software NIC.
        assert!(
            error.contains("mlx5_9") || error.contains("libibverbs"),
            "{error}"
        );
    } else {
        assert!(
            error.contains("--nic mlx5_9: a device name needs the mlx5 backend"),
            "{error}"
        );
    }
}

/// The include directory (`include_dir()`, `DEP_IBGDA_INCLUDE`) holds exactly the headers
/// NVRTC compiles user programs with: what `nvcc -I` sees is what `compile_program` sees.
#[test]
fn the_include_dir_holds_the_headers_nvrtc_uses() {
    let dir = ibgda_kernels::include_dir();
    let read = |name: &str| {
        std::fs::read_to_string(dir.join(name))
            .unwrap_or_else(|e| panic!("{}: {e}", dir.join(name).display()))
    };
    assert_eq!(read("ibgda.cuh"), ibgda_kernels::nvrtc::IBGDA_CUH);
    assert_eq!(read("ibgda_api.cuh"), ibgda_kernels::nvrtc::IBGDA_API_CUH);
    assert_eq!(read("softnic.cuh"), ibgda_kernels::nvrtc::SOFTNIC_CUH);
    assert_eq!(
        read("ibgda_layout.h"),
        ibgda_kernels::layout::layout_header()
    );
    assert!(read("ibgda.cuh").contains("#include \"ibgda_layout.h\""));
}

/// Every code block of the README's "Writing a kernel" section is, line for line (the
/// Rust one dedented by its function body's indentation), a part of the example that CI
/// compiles: what the README shows is what builds.
#[test]
fn the_readmes_writing_a_kernel_is_the_put_signal_example() {
    let readme = include_str!("../../README.md");
    let start = readme
        .find("## Writing a kernel")
        .expect("a \"Writing a kernel\" section");
    let section = &readme[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |e| e + 3)];
    let cuda = include_str!("../../examples/put_signal/put_signal.cu");
    let rust: String = include_str!("../../examples/put_signal/put_signal.rs")
        .lines()
        .map(|l| l.strip_prefix("    ").unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n");
    let mut blocks = 0;
    let mut rest = section;
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        let (lang, body) = after.split_once('\n').expect("a fenced block");
        let close = body.find("```").expect("a closed block");
        let code = body[..close].trim_end();
        let file = match lang {
            "cuda" => cuda.to_string(),
            "rust" => rust.clone(),
            _ => {
                rest = &body[close + 3..];
                continue;
            }
        };
        assert!(
            file.contains(code),
            "the README's {lang} block is not the example's code:\n{code}"
        );
        blocks += 1;
        rest = &body[close + 3..];
    }
    assert_eq!(blocks, 2, "the CUDA and the Rust block");
}
