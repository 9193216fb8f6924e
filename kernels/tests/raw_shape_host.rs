//! The hand-written baseline's WQEs of the shape rows (Table 3, Figure 3, DC), built on the
//! host from the same code the raw shape kernel runs (`raw_shape_wqe` in
//! `cuda/raw_baseline.cu`, compiled by `build.rs`), against the Rust builders' bytes: every
//! shape the benchmark runs and more inline and pointer lengths, at WQEBB counters where
//! a WQE wraps the ring's end, in a poisoned ring compared whole (a byte written outside
//! the WQE fails too). The raw kernel's first WQE of every shape once failed on the H200
//! (its octoword macro read `k` twice, so `RAW_OCT(k++)` put the data segment over the
//! control segment); this test fails for that code.

use ibgda::wqe::{
    CompletionMode, LKey, Qpn, RKey, RdmaWrite, RemoteAddress, SendRing, Sge, WqeIndex, WqeLimits,
};
use ibgda_kernels::experiments::issue::{
    raw_shape_wqe_on_host, shape_value, shapes, IssueShape, ShapeOperands,
};
use ibgda_kernels::harness::{compact_target, full_target};

const RING_WQEBBS: usize = 16;
const POISON: u8 = 0xa5;
const QPN: u32 = 0x78;

/// The Rust builders' bytes of `shape` at counter `next` in a poisoned ring.
fn expected(shape: IssueShape, ops: &ShapeOperands, next: u64, value: u64) -> (Vec<u8>, u32) {
    let mut ring = vec![POISON; RING_WQEBBS * 64];
    let remote = RemoteAddress::new(ops.raddr, RKey(ops.rkey));
    let qpn = Qpn::new(QPN).expect("qpn");
    let index = WqeIndex(next as u16);
    let bytes = value.to_le_bytes();
    let mut r = SendRing::new(&mut ring, WqeLimits::default()).expect("ring");
    let written = match shape {
        IssueShape::Inline(len) => {
            let w = RdmaWrite::new(remote)
                .completion(CompletionMode::Always)
                .inline(&ops.payload[..len as usize])
                .build()
                .expect("inline WRITE");
            r.write(index, qpn, &w)
        }
        IssueShape::Pointer(len) => {
            let w = RdmaWrite::new(remote)
                .completion(CompletionMode::Always)
                .sge(Sge::new(ops.laddr, len, LKey(ops.lkey)).expect("sge"))
                .build()
                .expect("pointer WRITE");
            r.write(index, qpn, &w)
        }
        IssueShape::DcCompact => {
            let w = RdmaWrite::new(compact_target(1).at(remote))
                .completion(CompletionMode::Always)
                .inline(&bytes)
                .build()
                .expect("DC compact WRITE");
            r.write(index, qpn, &w)
        }
        IssueShape::DcFull => {
            let w = RdmaWrite::new(full_target(2).at(remote))
                .completion(CompletionMode::Always)
                .inline(&bytes)
                .build()
                .expect("DC full WRITE");
            r.write(index, qpn, &w)
        }
    }
    .expect("written");
    (ring, written)
}

fn all_shapes() -> Vec<IssueShape> {
    let mut v = shapes();
    for len in [1u32, 3, 4, 5, 12, 13, 28, 44, 60, 61, 92, 100, 255] {
        v.push(IssueShape::Inline(len));
        v.push(IssueShape::Pointer(len));
    }
    v
}

#[test]
fn the_raw_shape_kernels_wqes_equal_the_rust_builders_for_every_shape() {
    let mut checked = 0;
    for shape in all_shapes() {
        let ops = ShapeOperands::of_run(shape);
        for (i, next) in [0u64, 1, 13, 14, 15, 0xfffe, 0x1_000f]
            .into_iter()
            .enumerate()
        {
            let value = shape_value(i as u32);
            let (want, want_wqebbs) = expected(shape, &ops, next, value);
            let mut got = vec![POISON; RING_WQEBBS * 64];
            let wqebbs = raw_shape_wqe_on_host(&mut got, next, QPN, shape, &ops, value)
                .unwrap_or_else(|e| panic!("{shape:?}: {e}"));
            assert_eq!(wqebbs, want_wqebbs, "{shape:?} at {next}: WQEBBs");
            if let Some(at) = want.iter().zip(&got).position(|(a, b)| a != b) {
                panic!(
                    "{shape:?} at counter {next}: raw and Rust differ at ring byte {at} \
                     (WQEBB {}, octoword {}): raw {:#04x}, Rust {:#04x}",
                    at / 64,
                    at % 64 / 16,
                    got[at],
                    want[at]
                );
            }
            checked += 1;
        }
    }
    assert_eq!(checked, all_shapes().len() * 7);
}

#[test]
fn the_host_writer_refuses_rings_and_lengths_it_cannot_take() {
    let ops = ShapeOperands::of_run(IssueShape::Inline(8));
    for (len, shape) in [
        (RING_WQEBBS * 64 - 1, IssueShape::Inline(8)),
        (24 * 64, IssueShape::Inline(8)),
        (8 * 64, IssueShape::Inline(8)),
        (RING_WQEBBS * 64, IssueShape::Inline(0)),
        (RING_WQEBBS * 64, IssueShape::Inline(257)),
        (RING_WQEBBS * 64, IssueShape::Pointer(0)),
    ] {
        let mut ring = vec![POISON; len];
        let e = raw_shape_wqe_on_host(&mut ring, 0, QPN, shape, &ops, 0)
            .expect_err("refused")
            .to_string();
        assert!(
            e.contains(&format!("ring of {len} bytes")),
            "{shape:?}, {len}: {e}"
        );
        assert!(ring.iter().all(|&b| b == POISON), "nothing written");
    }
    let mut ring = vec![POISON; RING_WQEBBS * 64];
    let e = raw_shape_wqe_on_host(&mut ring, 0, 1 << 24, IssueShape::Inline(8), &ops, 0)
        .expect_err("refused")
        .to_string();
    assert!(e.contains("QPN 0x1000000"), "{e}");
}
