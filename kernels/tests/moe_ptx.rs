//! The MoE dispatch and combine kernels (`cuda/moe.cu`, on the device API and on the
//! builders) compile to sm_90 cubins through NVRTC for the default shape, BF16 and FP8,
//! and the posting kernels hold their scope's doorbell sequence; registers and spills of
//! both variants are printed side by side.
//!
//! Without NVRTC these tests are ignored; with `IBGDA_REQUIRE_NVRTC=1` the build fails.

use ibgda::order::{device_sequence, OrderingScope};
use ibgda_kernels::experiments::moe::{compile_for, MoeParams, MoeScope};
use ibgda_kernels::gpu::CompileOptions;
use ibgda_kernels::nvrtc::resource_usage;
use ibgda_kernels::ptx::{ordering_of, parse_sequence};

#[test]
#[cfg_attr(
    not(ibgda_nvrtc),
    ignore = "NVRTC not installed: run scripts/cuda-wheels.sh"
)]
fn the_moe_kernels_compile_for_bf16_and_fp8() {
    let seq = parse_sequence(device_sequence(MoeScope::KIND));
    for fp8 in [false, true] {
        let p = MoeParams::deepep(fp8);
        let c = compile_for(&p, &CompileOptions::new()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(&c.cubin[..4], b"\x7fELF");
        let usage = resource_usage(&c.log);
        for k in [
            "moe_quantize",
            "moe_dispatch_typed",
            "moe_combine_typed",
            "moe_dispatch_raw",
            "moe_combine_raw",
        ] {
            let u = usage
                .iter()
                .find(|u| u.kernel == k)
                .unwrap_or_else(|| panic!("{k} missing"));
            println!(
                "{} {k:<22} {:>3} registers, {:>4} stack, {} spill stores",
                if fp8 { "FP8 " } else { "BF16" },
                u.registers,
                u.stack_bytes,
                u.spill_stores
            );
            if k != "moe_quantize" {
                let inv = ordering_of(&c.ptx, k).expect("kernel");
                for i in &seq.doorbell {
                    assert!(inv.contains(i), "{k} lacks {i}");
                }
                assert!(
                    inv.iter().any(|i| i == "ld.acquire.sys.global.b64"),
                    "{k}: no signal wait"
                );
            }
        }
    }
}
