//! The top-level examples run (or compile) in CI: `examples/host_rdma.rs` is included here
//! and run as is (it checks every byte it moves and panics otherwise); the CUDA of
//! `examples/user_kernel/` is compiled through NVRTC by `tests/nvrtc_ptx.rs`.

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
    assert_eq!(read("softnic.cuh"), ibgda_kernels::nvrtc::SOFTNIC_CUH);
    assert_eq!(
        read("ibgda_layout.h"),
        ibgda_kernels::layout::layout_header()
    );
    assert!(read("ibgda.cuh").contains("#include \"ibgda_layout.h\""));
}
