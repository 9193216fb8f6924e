//! The top-level examples run (or compile) in CI: `examples/host_rdma.rs` is included here
//! and run as is (it checks every byte it moves and panics otherwise); the CUDA of
//! `examples/user_kernel/` is compiled through NVRTC by `tests/nvrtc_ptx.rs`.

#[path = "../../examples/host_rdma.rs"]
mod host_rdma;

#[test]
fn host_rdma_example_moves_the_bytes_it_says() {
    host_rdma::main().expect("the host RDMA example");
}
