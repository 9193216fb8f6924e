//! The provider's post loop used by the post-rate benchmark: it really posts (the
//! producer counter advances by one WQEBB per 8-byte inline WRITE, per the mlx5 facts:
//! control + remote address + 16-byte inline segment = 48 bytes, one WQEBB), it frees
//! the ring only as told (the provider refuses a full ring with ENOMEM), and it refuses
//! out-of-range requests.
//!
//! Without the rdma-core build every test here is reported as ignored.

macro_rules! oracle_test {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            #[cfg_attr(not(ibgda_oracle), ignore = "rdma-core oracle not built: run scripts/rdma-core.sh")]
            fn $name() {
                #[cfg(ibgda_oracle)]
                checks::$name();
            }
        )*
    };
}

oracle_test!(
    loop_advances_one_wqebb_per_inline_write,
    a_ring_never_retired_fills,
    refusals,
);

#[cfg(ibgda_oracle)]
mod checks {
    use ibgda_rdma_core_oracle::*;

    fn inline_write() -> SendWr {
        SendWr {
            payload: Payload::Inline(vec![vec![0x11; 8]]),
            ..SendWr::new(
                7,
                Op::Write {
                    remote_addr: 0x1000,
                    rkey: 0x42,
                },
                Sge {
                    addr: 0,
                    len: 0,
                    lkey: 0,
                },
            )
        }
    }

    pub fn loop_advances_one_wqebb_per_inline_write() {
        let mut qp = OracleQp::new(QpConfig::rc(0x123)).unwrap();
        // 1000 posts on a 64-WQEBB ring, freed every 32: wraps many times.
        assert_eq!(qp.post_loop(&inline_write(), 1000, 32).unwrap(), 1000);
        // A second loop starts from a reset queue.
        assert_eq!(qp.post_loop(&inline_write(), 5, 1).unwrap(), 5);
    }

    pub fn a_ring_never_retired_fills() {
        let mut qp = OracleQp::new(QpConfig::rc(0x123)).unwrap();
        // Freed only after 65 posts: the 65th finds all 64 slots in use.
        let err = qp.post_loop(&inline_write(), 65, 65).unwrap_err();
        assert_eq!(err, OracleError::Provider(12), "ENOMEM");
        // Freed every 64 posts (the whole ring) it never fills.
        assert_eq!(qp.post_loop(&inline_write(), 640, 64).unwrap(), 640);
    }

    pub fn refusals() {
        let mut qp = OracleQp::new(QpConfig::rc(0x123)).unwrap();
        assert!(matches!(
            qp.post_loop(&inline_write(), 1, 0),
            Err(OracleError::Config(_))
        ));
        let mut dci = OracleQp::new(QpConfig::dci(0x124)).unwrap();
        let wr = SendWr {
            dc: Some(DcAddress {
                av: AddressVector::Raw([0; 48]),
                dctn: 9,
                dc_key: 1,
            }),
            ..inline_write()
        };
        assert_eq!(dci.post_loop(&wr, 1, 1), Err(OracleError::ClassicDc));
    }
}
