//! Misuses of the GPU API that must not compile: a persistent kernel (the sink, the CUDA
//! software NIC) or a kernel argument outliving its queue pairs, hand-made descriptors
//! and address ranges, a kernel of one scope given a queue of another, reads of arbitrary
//! device addresses, free NVRTC options for the crate's programs, one CPU-assisted queue
//! given twice to one launch.

#[test]
fn gpu_api_misuse_does_not_compile() {
    trybuild::TestCases::new().compile_fail("tests/compile_fail/*.rs");
}
