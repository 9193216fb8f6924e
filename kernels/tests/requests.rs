//! The host side of the byte-equality test runs without a GPU: every test request
//! encodes with the Rust builders, into the 16-WQEBB ring the device test uses.

use ibgda::wqe::{parse_wqe, TransportKind, WqeIndex};
use ibgda_kernels::harness::{host_encode, test_requests};
use ibgda_kernels::request::TransportForm;

#[test]
fn every_test_request_encodes_and_parses_on_the_host() {
    let reqs = test_requests();
    assert!(reqs.len() > 300);
    for (i, r) in reqs.iter().enumerate() {
        let mut ring = vec![0xa5u8; 16 * 64];
        let wqebbs = host_encode(i, r, &mut ring).unwrap_or_else(|e| panic!("request {i}: {e}"));
        assert!((1..=4).contains(&wqebbs), "request {i}: {wqebbs} WQEBBs");
        let kind = if r.transport == TransportForm::Rc as u32 {
            TransportKind::Rc
        } else {
            TransportKind::Dc
        };
        parse_wqe(&ring, WqeIndex(r.index as u16), kind)
            .unwrap_or_else(|e| panic!("request {i}: {e:?}"));
    }
}
