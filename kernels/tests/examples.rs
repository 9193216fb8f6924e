//! The top-level examples run (or compile) in CI: `examples/host_rdma.rs` is included here
//! and run as is (it checks every byte it moves and panics otherwise); the CUDA of
//! `examples/user_kernel/` is compiled through NVRTC by `tests/nvrtc_ptx.rs`, that of
//! `examples/put_signal/` by `tests/api_ptx.rs`; the README's "Writing a kernel" shows
//! exactly `examples/put_signal/`'s code (checked here).

#[path = "../../examples/host_rdma.rs"]
mod host_rdma;

#[test]
fn host_rdma_example_moves_the_bytes_it_says() {
    host_rdma::main().expect("the host RDMA example");
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
