//! Smoke tests of every oracle entry point on fixed inputs. The expected values come
//! from the mlx5 facts (shared/reference/mlx5-facts.md: segment layouts, opcodes, DS
//! and WQEBB counting, doorbell record, CQE fields), not from the provider's output:
//! they check that the oracle drives the provider the way we think it does.
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
    availability,
    abi_sizes_and_layouts,
    constants_match_facts,
    header_helpers,
    rc_write_one_sge,
    write_imm_and_read_wrap,
    inline_write,
    inline_empty,
    inline_errors,
    queue_full_and_sge_limits,
    atomics,
    fence_solicited_sig_all,
    chain_rings_last_ctrl,
    dci_extended,
    dci_refusals,
    poll_requester,
    poll_errors,
    poll_responder,
    poll_cqe_version_1,
    poll_refusals,
    classic_and_extended_differ_only_by_quirks,
);

#[cfg(ibgda_oracle)]
mod checks {
    use ibgda_rdma_core_oracle::*;

    const QPN: u32 = 0x00ab_cdef;

    fn be32(b: &[u8], at: usize) -> u32 {
        u32::from_be_bytes(b[at..at + 4].try_into().unwrap())
    }
    fn be16(b: &[u8], at: usize) -> u16 {
        u16::from_be_bytes(b[at..at + 2].try_into().unwrap())
    }
    fn be64(b: &[u8], at: usize) -> u64 {
        u64::from_be_bytes(b[at..at + 8].try_into().unwrap())
    }

    /// Checks the control segment at the start of `w` (facts 1.1).
    fn check_ctrl(w: &[u8], opcode: u8, index: u16, qpn: u32, ds: u8) {
        assert_eq!(w[0], 0, "opmod");
        assert_eq!(be16(w, 1), index, "WQE index, bytes 1..3");
        assert_eq!(w[3], opcode, "opcode, byte 3");
        assert_eq!(be32(w, 4), (qpn << 8) | ds as u32, "qpn_ds");
        assert_eq!(&w[8..11], &[0, 0, 0], "signature, dci_stream_channel_id");
    }

    fn all(mask: &[bool], r: std::ops::Range<usize>) -> bool {
        mask[r].iter().all(|&w| w)
    }
    fn none(mask: &[bool], r: std::ops::Range<usize>) -> bool {
        mask[r].iter().all(|&w| !w)
    }

    fn write_op() -> Op {
        Op::Write {
            remote_addr: 0x1122_3344_5566_7788,
            rkey: 0xa1b2_c3d4,
        }
    }
    fn sge(n: u64) -> Sge {
        Sge {
            addr: 0x7f00_0000_1000 + n * 0x100,
            len: 0x40 + n as u32,
            lkey: 0x1234_5600 + n as u32,
        }
    }

    pub fn availability() {
        const { assert!(AVAILABLE) };
        assert_eq!(RDMA_CORE_VERSION, "56.1");
    }

    /// (struct, sizeof, [(member, offsetof, sizeof)]) from facts 1.1-1.8, 5.1, 5.2.
    type Expected = &'static [(&'static str, usize, &'static [(&'static str, usize, usize)])];

    pub fn abi_sizes_and_layouts() {
        assert!(
            abi_sizes_match(),
            "the #[repr(C)] mirrors disagree with shim/oracle.h"
        );
        let expect: Expected = &[
            (
                "mlx5_wqe_ctrl_seg",
                16,
                &[
                    ("opmod_idx_opcode", 0, 4),
                    ("qpn_ds", 4, 4),
                    ("signature", 8, 1),
                    ("dci_stream_channel_id", 9, 2),
                    ("fm_ce_se", 11, 1),
                    ("imm", 12, 4),
                ],
            ),
            (
                "mlx5_wqe_raddr_seg",
                16,
                &[("raddr", 0, 8), ("rkey", 8, 4), ("reserved", 12, 4)],
            ),
            (
                "mlx5_wqe_data_seg",
                16,
                &[("byte_count", 0, 4), ("lkey", 4, 4), ("addr", 8, 8)],
            ),
            ("mlx5_wqe_inl_data_seg", 4, &[("byte_count", 0, 4)]),
            ("mlx5_wqe_inline_seg", 4, &[("byte_count", 0, 4)]),
            (
                "mlx5_wqe_atomic_seg",
                16,
                &[("swap_add", 0, 8), ("compare", 8, 8)],
            ),
            (
                "mlx5_wqe_masked_atomic_seg",
                32,
                &[
                    ("swap_add", 0, 8),
                    ("compare", 8, 8),
                    ("swap_add_mask", 16, 8),
                    ("compare_mask", 24, 8),
                ],
            ),
            (
                "mlx5_wqe_av",
                48,
                &[
                    ("key.dc_key", 0, 8),
                    ("key.qkey.qkey", 0, 4),
                    ("dqp_dct", 8, 4),
                    ("stat_rate_sl", 12, 1),
                    ("fl_mlid", 13, 1),
                    ("rlid", 14, 2),
                    ("reserved0", 16, 4),
                    ("rmac", 20, 6),
                    ("tclass", 26, 1),
                    ("hop_limit", 27, 1),
                    ("grh_gid_fl", 28, 4),
                    ("rgid", 32, 16),
                ],
            ),
            ("mlx5_wqe_datagram_seg", 48, &[("av", 0, 48)]),
            (
                "mlx5_cqe64",
                64,
                &[
                    ("wqe_id", 2, 2),
                    ("ml_path", 17, 1),
                    ("slid", 22, 2),
                    ("flags_rqpn", 24, 4),
                    ("hds_ip_ext", 28, 1),
                    ("l4_hdr_type_etc", 29, 1),
                    ("vlan_info", 30, 2),
                    ("srqn_uidx", 32, 4),
                    ("imm_inval_pkey", 36, 4),
                    ("app", 40, 1),
                    ("app_op", 41, 1),
                    ("app_info", 42, 2),
                    ("byte_cnt", 44, 4),
                    ("timestamp", 48, 8),
                    ("sop_drop_qpn", 56, 4),
                    ("wqe_counter", 60, 2),
                    ("signature", 62, 1),
                    ("op_own", 63, 1),
                ],
            ),
            (
                "mlx5_err_cqe",
                64,
                &[
                    ("srqn", 32, 4),
                    ("vendor_err_synd", 54, 1),
                    ("syndrome", 55, 1),
                    ("s_wqe_opcode_qpn", 56, 4),
                    ("wqe_counter", 60, 2),
                    ("signature", 62, 1),
                    ("op_own", 63, 1),
                ],
            ),
        ];
        let all_layouts = layouts();
        assert_eq!(all_layouts.len(), expect.len());
        for (name, size, fields) in expect {
            let l = layout(name).unwrap_or_else(|| panic!("no layout {name}"));
            assert_eq!(l.size, *size, "sizeof {name}");
            for (f, off, sz) in *fields {
                let got = l.field(f).unwrap_or_else(|| panic!("no field {name}.{f}"));
                assert_eq!((got.offset, got.size), (*off, *sz), "{name}.{f}");
            }
            for f in &l.fields {
                assert!(
                    f.offset + f.size <= l.size,
                    "{name}.{} out of bounds",
                    f.name
                );
            }
        }
        assert_eq!(
            layout("mlx5_wqe_ctrl_seg").unwrap().align,
            4,
            "packed, aligned(4)"
        );
    }

    pub fn constants_match_facts() {
        let expect: &[(&str, u64)] = &[
            ("MLX5_OPCODE_NOP", 0x00),
            ("MLX5_OPCODE_RDMA_WRITE", 0x08),
            ("MLX5_OPCODE_RDMA_WRITE_IMM", 0x09),
            ("MLX5_OPCODE_SEND", 0x0a),
            ("MLX5_OPCODE_RDMA_READ", 0x10),
            ("MLX5_OPCODE_ATOMIC_CS", 0x11),
            ("MLX5_OPCODE_ATOMIC_FA", 0x12),
            ("MLX5_OPCODE_ATOMIC_MASKED_CS", 0x14),
            ("MLX5_OPCODE_ATOMIC_MASKED_FA", 0x15),
            ("MLX5_OPCODE_UMR", 0x25),
            ("MLX5_WQE_CTRL_CQ_UPDATE", 0x08),
            ("MLX5_WQE_CTRL_SOLICITED", 0x02),
            ("MLX5_WQE_CTRL_FENCE", 0x80),
            ("MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE", 0x20),
            ("MLX5_INLINE_SEG", 0x8000_0000),
            ("MLX5_EXTENDED_UD_AV", 0x8000_0000),
            ("MLX5_INVALID_LKEY", 0x100),
            ("MLX5_SEND_WQE_BB", 64),
            ("MLX5_SEND_WQE_SHIFT", 6),
            ("MLX5_RCV_DBR", 0),
            ("MLX5_SND_DBR", 1),
            ("MLX5_CQ_SET_CI", 0),
            ("MLX5_CQ_ARM_DB", 1),
            ("MLX5_CQ_DOORBELL", 0x20),
            ("MLX5_CQ_DB_REQ_NOT_SOL", 1 << 24),
            ("MLX5_BF_OFFSET", 0x800),
            ("MLX5_ADAPTER_PAGE_SIZE", 4096),
            ("MLX5_CQE_OWNER_MASK", 1),
            ("MLX5_CQE_REQ", 0),
            ("MLX5_CQE_RESP_WR_IMM", 1),
            ("MLX5_CQE_RESP_SEND", 2),
            ("MLX5_CQE_RESP_SEND_IMM", 3),
            ("MLX5_CQE_RESP_SEND_INV", 4),
            ("MLX5_CQE_RESIZE_CQ", 5),
            ("MLX5_CQE_NO_PACKET", 6),
            ("MLX5_CQE_SIG_ERR", 12),
            ("MLX5_CQE_REQ_ERR", 13),
            ("MLX5_CQE_RESP_ERR", 14),
            ("MLX5_CQE_INVALID", 15),
            ("MLX5_INLINE_SCATTER_32", 0x4),
            ("MLX5_INLINE_SCATTER_64", 0x8),
            ("MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR", 0x01),
            ("MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR", 0x02),
            ("MLX5_CQE_SYNDROME_LOCAL_PROT_ERR", 0x04),
            ("MLX5_CQE_SYNDROME_WR_FLUSH_ERR", 0x05),
            ("MLX5_CQE_SYNDROME_MW_BIND_ERR", 0x06),
            ("MLX5_CQE_SYNDROME_BAD_RESP_ERR", 0x10),
            ("MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR", 0x11),
            ("MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR", 0x12),
            ("MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR", 0x13),
            ("MLX5_CQE_SYNDROME_REMOTE_OP_ERR", 0x14),
            ("MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR", 0x15),
            ("MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR", 0x16),
            ("MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR", 0x22),
            ("MLX5_CQE_VENDOR_SYNDROME_ODP_PFAULT", 0x93),
        ];
        for (name, value) in expect {
            assert_eq!(constant(name), Some(*value), "{name}");
        }
        for (name, value) in verbs::ALL {
            assert_eq!(constant(name), Some(*value as u64), "verbs::{name}");
        }
        let names: Vec<_> = constants().into_iter().map(|(n, _)| n).collect();
        let mut dedup = names.clone();
        dedup.sort_unstable();
        dedup.dedup();
        assert_eq!(dedup.len(), names.len(), "duplicate constant names");
    }

    pub fn header_helpers() {
        // control segment: opmod<<24 | pi<<8 | opcode, qpn<<8 | ds, both BE; bytes 9..11
        // (dci_stream_channel_id) are not the helper's
        let mut seg = [0xaa; 16];
        let a = CtrlSegArgs {
            pi: 0xbeef,
            opcode: 0x08,
            opmod: 0x09,
            qp_num: QPN,
            fm_ce_se: 0x08,
            ds: 3,
            signature: 0x5a,
            imm: 0x0403_0201,
        };
        set_ctrl_seg(&mut seg, &a);
        assert_eq!(&seg[0..4], &[0x09, 0xbe, 0xef, 0x08]);
        assert_eq!(be32(&seg, 4), (QPN << 8) | 3);
        assert_eq!(seg[8], 0x5a);
        assert_eq!(
            &seg[9..11],
            &[0xaa, 0xaa],
            "dci_stream_channel_id untouched"
        );
        assert_eq!(seg[11], 0x08);
        assert_eq!(
            &seg[12..16],
            &0x0403_0201u32.to_ne_bytes(),
            "imm stored as passed"
        );

        let mut d = [0u8; 16];
        set_data_seg(&mut d, 0x40, 0x100, 0x0102_0304_0506_0708);
        assert_eq!(
            (be32(&d, 0), be32(&d, 4), be64(&d, 8)),
            (0x40, 0x100, 0x0102_0304_0506_0708)
        );

        let mut av = [0xaa; 48];
        let g = DgramSegArgs {
            key: 0x5623_ceaf,
            dqp_dct: 0x12_3456,
            ext: 1,
            stat_rate_sl: 0x73,
            fl_mlid: 0x05,
            rlid: 0x4321,
            rmac: [1, 2, 3, 4, 5, 6],
            tclass: 0x20,
            hop_limit: 64,
            grh_gid_fl: 0x4012_3456,
            rgid: [0xfe; 16],
        };
        set_dgram_seg(&mut av, &g);
        assert_eq!(be64(&av, 0), 0x5623_ceaf);
        assert_eq!(be32(&av, 8), 0x8012_3456, "ext bit 31 | dct");
        assert_eq!((av[12], av[13], be16(&av, 14)), (0x73, 0x05, 0x4321));
        assert_eq!(&av[16..20], &[0xaa; 4], "reserved0 untouched");
        assert_eq!(&av[20..26], &[1, 2, 3, 4, 5, 6]);
        assert_eq!((av[26], av[27], be32(&av, 28)), (0x20, 64, 0x4012_3456));
        assert_eq!(&av[32..48], &[0xfe; 16]);

        // op_own: opcode [7:4], format [3:2], SE [1], owner [0]
        let mut cqe = [0u8; 64];
        cqe[63] = 0xd7;
        assert_eq!(
            (
                cqe_opcode(&cqe),
                cqe_format(&cqe),
                cqe_se(&cqe),
                cqe_owner(&cqe)
            ),
            (0xd, 1, 1, 1)
        );
        cqe[63] = 0x20;
        assert_eq!(
            (
                cqe_opcode(&cqe),
                cqe_format(&cqe),
                cqe_se(&cqe),
                cqe_owner(&cqe)
            ),
            (2, 0, 0, 0)
        );
    }

    /// RC RDMA WRITE with one SGE at a 16-bit index that wraps: ctrl + raddr + data,
    /// DS 3, one WQEBB; doorbell record = next free WQEBB & 0xffff.
    pub fn rc_write_one_sge() {
        let mut qp = OracleQp::new(QpConfig::rc(QPN)).unwrap();
        let cur_post = 0x0001_ffff; // WQE index 0xffff, slot 63, next index 0x0000
        let mut wr = SendWr::new(42, write_op(), sge(0));
        wr.flags = SendFlags::SIGNALED;
        for path in [PostPath::Classic, PostPath::Extended] {
            for prefill in [0x00, 0xff] {
                let p = qp
                    .post(path, cur_post, std::slice::from_ref(&wr), prefill)
                    .unwrap();
                assert_eq!(p.failure, None);
                assert_eq!(p.cur_post, cur_post + 1, "{path:?}: one WQEBB");
                assert_eq!(p.posted_wqebbs(), 1);
                assert_eq!(p.wqes_rung, 1);
                assert_eq!(p.offset_of(cur_post), 63 * 64);
                let w = p.wqebbs(cur_post, 1);
                let m = p.written_wqebbs(cur_post, 1);
                check_ctrl(&w, 0x08, 0xffff, QPN, 3);
                assert_eq!(w[11], 0x08, "signaled: CQ_UPDATE");
                // raddr segment at 16, data segment at 32
                assert_eq!(be64(&w, 16), 0x1122_3344_5566_7788);
                assert_eq!(be32(&w, 24), 0xa1b2_c3d4);
                assert_eq!(be32(&w, 28), 0, "raddr reserved");
                let s = sge(0);
                assert_eq!(
                    (be32(&w, 32), be32(&w, 36), be64(&w, 40)),
                    (s.len, s.lkey, s.addr)
                );
                assert!(
                    all(&m, 0..12) && all(&m, 16..48),
                    "{path:?}: segments written"
                );
                assert!(none(&m, 48..64), "{path:?}: nothing past DS 3");
                match path {
                    // quirk 1: classic stores imm = 0, extended leaves it alone
                    PostPath::Classic => assert!(all(&m, 12..16) && be32(&w, 12) == 0),
                    PostPath::Extended => assert!(none(&m, 12..16)),
                }
                // only this WQEBB was touched
                let touched = p.written.iter().filter(|&&x| x).count();
                assert_eq!(touched, if path == PostPath::Classic { 48 } else { 44 });
                assert_eq!(p.dbrec, Some(0x0000), "next free WQEBB, 16 bits");
                assert!(!p.rcv_dbrec_written);
                let db = p.doorbell.expect("rung");
                assert!(!p.stale_doorbell);
                assert_eq!(
                    &db[..],
                    &w[..8],
                    "doorbell = first 8 bytes of the ctrl segment"
                );
                assert_eq!(p.bf_copy, None, "not inline: 8-byte doorbell");
                assert_eq!(p.bf_offset, 256, "BlueFlame half toggled");
                assert_eq!(
                    p.ring[p.offset_of(cur_post) + 48],
                    prefill,
                    "ring shows the prefill"
                );
            }
        }
    }

    /// WRITE_WITH_IMM stores the immediate big-endian at 12; a READ with 4 SGEs has
    /// DS 6 = 2 WQEBBs and, posted at the last slot, wraps to slot 0.
    pub fn write_imm_and_read_wrap() {
        let mut qp = OracleQp::new(QpConfig {
            sq_wqebbs: 8,
            ..QpConfig::rc(QPN)
        })
        .unwrap();
        let imm = SendWr::new(
            1,
            Op::WriteImm {
                remote_addr: 0x1000,
                rkey: 7,
                imm: 0xdead_beef,
            },
            sge(1),
        );
        for path in [PostPath::Classic, PostPath::Extended] {
            let p = qp.post(path, 3, std::slice::from_ref(&imm), 0x00).unwrap();
            let w = p.wqebbs(3, 1);
            check_ctrl(&w, 0x09, 3, QPN, 3);
            assert_eq!(
                &w[12..16],
                &[0xde, 0xad, 0xbe, 0xef],
                "{path:?}: immediate, big-endian"
            );
            assert!(all(&p.written_wqebbs(3, 1), 12..16));
        }

        let read = SendWr {
            wr_id: 2,
            op: Op::Read {
                remote_addr: 0xfeed_0000,
                rkey: 0x99,
            },
            flags: SendFlags::default(),
            payload: Payload::Sges((0..4).map(sge).collect()),
            dc: None,
        };
        for path in [PostPath::Classic, PostPath::Extended] {
            let start = 0x1_0007; // slot 7 of 8, WQE index 7
            let p = qp
                .post(path, start, std::slice::from_ref(&read), 0x00)
                .unwrap();
            assert_eq!(p.cur_post, start + 2, "{path:?}: DS 6 = 2 WQEBBs");
            let w = p.wqebbs(start, 2);
            let m = p.written_wqebbs(start, 2);
            check_ctrl(&w, 0x10, 7, QPN, 6);
            assert_eq!(be64(&w, 16), 0xfeed_0000);
            for i in 0..4 {
                let s = sge(i as u64);
                let at = 32 + 16 * i;
                assert_eq!(
                    (be32(&w, at), be32(&w, at + 4), be64(&w, at + 8)),
                    (s.len, s.lkey, s.addr)
                );
            }
            assert!(all(&m, 16..96) && none(&m, 96..128));
            assert_eq!(p.offset_of(start + 1), 0, "second WQEBB wrapped to slot 0");
            assert_eq!(p.dbrec, Some(0x0009));
            assert_eq!(&p.doorbell.unwrap()[..], &w[..8]);
        }
    }

    /// Inline WRITE: header `len | 0x80000000` then the payload; DS = 2 + ceil((4 +
    /// len) / 16); padding never written; single inline WQE goes out by BlueFlame.
    pub fn inline_write() {
        let mut qp = OracleQp::new(QpConfig {
            sq_wqebbs: 16,
            ..QpConfig::rc(QPN)
        })
        .unwrap();
        for len in [1usize, 12, 13, 28, 29, 60, 100, 200] {
            let payload: Vec<u8> = (0..len)
                .map(|i| (i as u8).wrapping_mul(7).wrapping_add(1))
                .collect();
            // split into uneven chunks to exercise the gather lists
            let chunks: Vec<Vec<u8>> = payload
                .chunks(len.div_ceil(3))
                .map(<[u8]>::to_vec)
                .collect();
            let ds = 2 + (4 + len).div_ceil(16);
            let wqebbs = ds.div_ceil(4) as u32;
            for (path, chunked) in [
                (PostPath::Classic, false),
                (PostPath::Classic, true),
                (PostPath::Extended, false),
                (PostPath::Extended, true),
            ] {
                let wr = SendWr {
                    wr_id: 3,
                    op: write_op(),
                    flags: SendFlags::default(),
                    payload: Payload::Inline(if chunked {
                        chunks.clone()
                    } else {
                        vec![payload.clone()]
                    }),
                    dc: None,
                };
                let start = 14; // near the end: long payloads wrap
                let p = qp
                    .post(path, start, std::slice::from_ref(&wr), 0x00)
                    .unwrap();
                assert_eq!(p.failure, None);
                assert_eq!(p.posted_wqebbs(), wqebbs, "len {len} {path:?}");
                let w = p.wqebbs(start, wqebbs);
                let m = p.written_wqebbs(start, wqebbs);
                check_ctrl(&w, 0x08, 14, QPN, ds as u8);
                assert_eq!(be32(&w, 32), len as u32 | 0x8000_0000, "inline header");
                assert_eq!(
                    &w[36..36 + len],
                    &payload[..],
                    "payload right after the header"
                );
                assert!(all(&m, 32..36 + len));
                let end = 32 + 16 * (ds - 2);
                assert!(
                    none(&m, 36 + len..w.len()),
                    "len {len}: padding to {end} and beyond not written"
                );
                // BlueFlame: DS > 1 and DS <= 256 / 16
                let bf = p
                    .bf_copy
                    .as_ref()
                    .expect("inline single WQE goes by BlueFlame");
                assert_eq!(bf.len(), 64 * wqebbs as usize);
                assert_eq!(
                    &bf[..],
                    &w[..],
                    "BlueFlame copy = the WQE's WQEBBs, wrap followed"
                );
                assert_eq!(&p.doorbell.unwrap()[..], &w[..8]);
            }
        }
    }

    /// A zero-length inline payload: no inline header, DS 2, still BlueFlame (quirk 6).
    pub fn inline_empty() {
        let mut qp = OracleQp::new(QpConfig::rc(QPN)).unwrap();
        let wr = SendWr {
            payload: Payload::Inline(vec![Vec::new()]),
            ..SendWr::new(1, write_op(), sge(0))
        };
        for path in [PostPath::Classic, PostPath::Extended] {
            let p = qp.post(path, 0, std::slice::from_ref(&wr), 0).unwrap();
            check_ctrl(&p.ring, 0x08, 0, QPN, 2);
            assert!(none(&p.written, 32..64), "{path:?}: no inline header");
            assert_eq!(p.bf_copy.as_deref(), Some(&p.ring[..64]), "{path:?}");
        }
    }

    /// Inline longer than `max_inline_data` fails with ENOMEM: the classic path names
    /// the WR and rings for the ones before it; the extended path rolls back.
    pub fn inline_errors() {
        let mut qp = OracleQp::new(QpConfig {
            max_inline_data: 32,
            ..QpConfig::rc(QPN)
        })
        .unwrap();
        let ok = SendWr::new(1, write_op(), sge(0));
        let long = SendWr {
            payload: Payload::Inline(vec![vec![0x5a; 20], vec![0x5b; 13]]),
            ..SendWr::new(2, write_op(), sge(0))
        };
        // alone: nothing posted, nothing rung
        let p = qp.post_classic(10, std::slice::from_ref(&long), 0).unwrap();
        assert_eq!(
            p.failure,
            Some(PostFailure {
                errno: 12,
                bad_wr: Some(0)
            })
        );
        assert_eq!(
            (p.cur_post, p.wqes_rung, p.dbrec, p.doorbell),
            (10, 0, None, None)
        );

        let p = qp
            .post_classic(10, &[ok.clone(), long.clone()], 0xff)
            .unwrap();
        assert_eq!(
            p.failure,
            Some(PostFailure {
                errno: 12,
                bad_wr: Some(1)
            })
        );
        assert_eq!(p.cur_post, 11, "the first WR was posted");
        assert_eq!(p.wqes_rung, 1);
        assert_eq!(p.dbrec, Some(11));
        // provider quirk: the doorbell is rung with the failing WR's control segment,
        // whose bytes 0..8 were never written (they are the ring's old contents)
        assert!(p.stale_doorbell);
        assert_eq!(p.doorbell, Some([0xff; 8]));
        assert!(none(&p.written_wqebbs(11, 1), 0..8) && all(&p.written_wqebbs(11, 1), 8..32));

        // same with an inline first WR: the BlueFlame copy is of the failing slot
        let short = SendWr {
            payload: Payload::Inline(vec![vec![7; 4]]),
            ..ok.clone()
        };
        let p = qp.post_classic(10, &[short, long.clone()], 0xff).unwrap();
        assert!(p.stale_doorbell);
        assert_eq!(p.bf_copy.as_deref(), Some(&p.wqebbs(11, 1)[..]));

        let p = qp.post_extended(10, &[ok, long], 0).unwrap();
        assert_eq!(
            p.failure,
            Some(PostFailure {
                errno: 12,
                bad_wr: None
            })
        );
        assert_eq!(p.cur_post, 10, "rolled back");
        assert_eq!((p.wqes_rung, p.dbrec, p.doorbell), (0, None, None));
    }

    /// `sq.max_post` (= ring WQEBBs here) WQEs per post, `max_sge` SGEs per WR.
    pub fn queue_full_and_sge_limits() {
        let mut qp = OracleQp::new(QpConfig {
            sq_wqebbs: 4,
            max_sge: 2,
            ..QpConfig::rc(QPN)
        })
        .unwrap();
        let wrs: Vec<SendWr> = (0..5).map(|i| SendWr::new(i, write_op(), sge(i))).collect();
        let p = qp.post_classic(0, &wrs, 0).unwrap();
        assert_eq!(
            p.failure,
            Some(PostFailure {
                errno: 12,
                bad_wr: Some(4)
            })
        );
        assert_eq!((p.cur_post, p.wqes_rung, p.dbrec), (4, 4, Some(4)));
        let p = qp.post_extended(0, &wrs, 0).unwrap();
        assert_eq!(
            p.failure,
            Some(PostFailure {
                errno: 12,
                bad_wr: None
            })
        );
        assert_eq!((p.cur_post, p.wqes_rung, p.dbrec), (0, 0, None));
        assert!(qp.post_extended(0, &wrs[..4], 0).unwrap().failure.is_none());

        let three = SendWr {
            payload: Payload::Sges((0..3).map(sge).collect()),
            ..SendWr::new(1, write_op(), sge(0))
        };
        let p = qp.post_classic(0, std::slice::from_ref(&three), 0).unwrap();
        assert_eq!(
            p.failure,
            Some(PostFailure {
                errno: 12,
                bad_wr: Some(0)
            })
        );
        let p = qp.post_extended(0, &[three], 0).unwrap();
        assert_eq!(
            p.failure,
            Some(PostFailure {
                errno: 12,
                bad_wr: None
            })
        );
    }

    /// CAS / FAA: ctrl, raddr, atomic, data: DS 4, one WQEBB.
    pub fn atomics() {
        let mut qp = OracleQp::new(QpConfig::rc(QPN)).unwrap();
        let local = Sge {
            addr: 0x7000,
            len: 16,
            lkey: 0x42,
        };
        let cas = SendWr::new(
            1,
            Op::CompareSwap {
                remote_addr: 0x8000,
                rkey: 0x77,
                compare: 0x0102_0304_0506_0708,
                swap: 0x1112_1314_1516_1718,
            },
            local,
        );
        let faa = SendWr::new(
            2,
            Op::FetchAdd {
                remote_addr: 0x8008,
                rkey: 0x78,
                add: 0x2122_2324_2526_2728,
            },
            local,
        );
        for path in [PostPath::Classic, PostPath::Extended] {
            let p = qp.post(path, 5, std::slice::from_ref(&cas), 0).unwrap();
            let (w, m) = (p.wqebbs(5, 1), p.written_wqebbs(5, 1));
            check_ctrl(&w, 0x11, 5, QPN, 4);
            assert_eq!((be64(&w, 16), be32(&w, 24)), (0x8000, 0x77));
            assert_eq!(be64(&w, 32), 0x1112_1314_1516_1718, "swap at 32");
            assert_eq!(be64(&w, 40), 0x0102_0304_0506_0708, "compare at 40");
            assert_eq!((be32(&w, 52), be64(&w, 56)), (0x42, 0x7000));
            assert!(all(&m, 16..64));
            // quirk 5: classic forces the byte count to 8
            let count = be32(&w, 48);
            match path {
                PostPath::Classic => assert_eq!(count, 8),
                PostPath::Extended => assert_eq!(count, 16),
            }
            assert_eq!(p.cur_post, 6);

            let p = qp.post(path, 5, std::slice::from_ref(&faa), 0).unwrap();
            let (w, m) = (p.wqebbs(5, 1), p.written_wqebbs(5, 1));
            check_ctrl(&w, 0x12, 5, QPN, 4);
            assert_eq!(be64(&w, 32), 0x2122_2324_2526_2728, "add at 32");
            assert!(none(&m, 40..48), "quirk 4: compare not written for FAA");
            assert!(all(&m, 48..64));
        }
    }

    pub fn fence_solicited_sig_all() {
        let mut qp = OracleQp::new(QpConfig::rc(QPN)).unwrap();
        let mut wr = SendWr::new(1, write_op(), sge(0));
        for (flags, byte) in [
            (SendFlags::default(), 0x00),
            (
                SendFlags {
                    signaled: true,
                    fence: false,
                    solicited: false,
                },
                0x08,
            ),
            (
                SendFlags {
                    signaled: false,
                    fence: true,
                    solicited: false,
                },
                0x80,
            ),
            (
                SendFlags {
                    signaled: false,
                    fence: false,
                    solicited: true,
                },
                0x02,
            ),
            (
                SendFlags {
                    signaled: true,
                    fence: true,
                    solicited: true,
                },
                0x8a,
            ),
        ] {
            wr.flags = flags;
            for path in [PostPath::Classic, PostPath::Extended] {
                let p = qp.post(path, 0, std::slice::from_ref(&wr), 0xff).unwrap();
                assert_eq!(p.ring[11], byte, "{flags:?} {path:?}");
            }
        }
        let mut all_sig = OracleQp::new(QpConfig {
            sq_sig_all: true,
            ..QpConfig::rc(QPN)
        })
        .unwrap();
        wr.flags = SendFlags::default();
        let p = all_sig.post_extended(0, &[wr], 0).unwrap();
        assert_eq!(p.ring[11], 0x08, "sq_sig_all");
    }

    /// Three WRs in one post: consecutive WQE indices, one doorbell carrying the last
    /// WQE's control segment, doorbell record = next free WQEBB, no BlueFlame.
    pub fn chain_rings_last_ctrl() {
        let mut qp = OracleQp::new(QpConfig::rc(QPN)).unwrap();
        let read4 = SendWr {
            payload: Payload::Sges((0..4).map(sge).collect()),
            ..SendWr::new(
                2,
                Op::Read {
                    remote_addr: 0x10,
                    rkey: 1,
                },
                sge(0),
            )
        };
        let inl = SendWr {
            payload: Payload::Inline(vec![vec![9; 8]]),
            ..SendWr::new(3, write_op(), sge(0))
        };
        let wrs = [SendWr::new(1, write_op(), sge(0)), read4, inl];
        for path in [PostPath::Classic, PostPath::Extended] {
            let start = 0xfffe;
            let p = qp.post(path, start, &wrs, 0).unwrap();
            assert_eq!(p.cur_post, start + 4, "1 + 2 + 1 WQEBBs");
            assert_eq!(p.wqes_rung, 3);
            check_ctrl(&p.wqebbs(start, 1), 0x08, 0xfffe, QPN, 3);
            check_ctrl(&p.wqebbs(start + 1, 2), 0x10, 0xffff, QPN, 6);
            let last = p.wqebbs(start + 3, 1);
            check_ctrl(&last, 0x08, 0x0001, QPN, 3);
            assert_eq!(&p.doorbell.unwrap()[..], &last[..8]);
            assert_eq!(p.bf_copy, None, "several WQEs: 8-byte doorbell");
            assert_eq!(p.dbrec, Some(0x0002));
        }
    }

    fn ib_target(grh: bool) -> DcAddress {
        DcAddress {
            dctn: 0x00c0_ffee,
            dc_key: 0x5623_ceaf,
            av: AddressVector::Ib(IbAddress {
                dlid: 0x1234,
                sl: 5,
                src_path_bits: 3,
                static_rate: 0,
                grh: grh.then_some(Grh {
                    dgid: [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8],
                    flow_label: 0xabcde,
                    sgid_index: 2,
                    hop_limit: 64,
                    traffic_class: 0x20,
                }),
            }),
        }
    }

    /// DC WRITE and READ on a DCI, extended path: ctrl, 48-byte AV | raddr, data:
    /// DS 6, 2 WQEBBs; the raddr segment starts the second WQEBB.
    pub fn dci_extended() {
        let mut qp = OracleQp::new(QpConfig {
            sq_wqebbs: 8,
            ..QpConfig::dci(QPN)
        })
        .unwrap();
        for grh in [false, true] {
            for (op, opcode) in [
                (write_op(), 0x08),
                (
                    Op::Read {
                        remote_addr: 0x1122_3344_5566_7788,
                        rkey: 0xa1b2_c3d4,
                    },
                    0x10,
                ),
            ] {
                let wr = SendWr {
                    dc: Some(ib_target(grh)),
                    ..SendWr::new(9, op, sge(2))
                };
                let start = 7; // second WQEBB wraps to slot 0
                let p = qp
                    .post_extended(start, std::slice::from_ref(&wr), 0)
                    .unwrap();
                assert_eq!(p.failure, None);
                assert_eq!(p.cur_post, start + 2);
                let w = p.wqebbs(start, 2);
                let m = p.written_wqebbs(start, 2);
                check_ctrl(&w, opcode, 7, QPN, 6);
                let av = &w[16..64];
                assert_eq!(be64(av, 0), 0x5623_ceaf, "dc_key");
                assert_eq!(be32(av, 8), 0x8000_0000 | 0x00c0_ffee, "ext | dctn");
                assert_eq!(av[12], 5, "IB: static_rate 0 << 4 | sl");
                assert_eq!(av[13], 3, "source path bits");
                assert_eq!(be16(av, 14), 0x1234, "rlid");
                if grh {
                    assert_eq!((av[26], av[27]), (0x20, 64), "tclass, hop limit");
                    assert_eq!(
                        be32(av, 28),
                        (1 << 30) | (2 << 20) | 0xabcde,
                        "GRH | sgid index | flow label"
                    );
                    assert_eq!(
                        av[32..48],
                        [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]
                    );
                } else {
                    assert_eq!(&av[20..48], &[0u8; 28][..], "no GRH");
                }
                assert!(all(&m, 16..64), "the whole AV is copied");
                assert_eq!(p.offset_of(start + 1), 0);
                assert_eq!(
                    (be64(&w, 64), be32(&w, 72)),
                    (0x1122_3344_5566_7788, 0xa1b2_c3d4)
                );
                let s = sge(2);
                assert_eq!(
                    (be32(&w, 80), be32(&w, 84), be64(&w, 88)),
                    (s.len, s.lkey, s.addr)
                );
                assert!(none(&m, 12..16) && none(&m, 96..128));
                assert_eq!(p.dbrec, Some(9));
            }
        }
        // a nonzero static rate lands in bits 7..4 of stat_rate_sl (code from the
        // provider's table), SL stays in 3..0
        let mut t = ib_target(false);
        if let AddressVector::Ib(ib) = &mut t.av {
            ib.static_rate = 3; // IBV_RATE_10_GBPS
        }
        let wr = SendWr {
            dc: Some(t),
            ..SendWr::new(9, write_op(), sge(2))
        };
        let p = qp.post_extended(0, &[wr], 0).unwrap();
        assert_ne!(p.ring[28] >> 4, 0);
        assert_eq!(p.ring[28] & 0xf, 5);

        // raw AV bytes: copied, dqp_dct OR-ed, dc_key replaced
        let mut raw = [0u8; 48];
        raw.iter_mut()
            .enumerate()
            .for_each(|(i, b)| *b = i as u8 | 0x40);
        raw[8..12].copy_from_slice(&[0, 0, 0, 0]);
        let wr = SendWr {
            dc: Some(DcAddress {
                dctn: 0x33,
                dc_key: 0x1,
                av: AddressVector::Raw(raw),
            }),
            ..SendWr::new(9, write_op(), sge(2))
        };
        let p = qp.post_extended(0, &[wr], 0).unwrap();
        assert_eq!(be64(&p.ring, 16), 1);
        assert_eq!(be32(&p.ring, 24), 0x8000_0033);
        assert_eq!(&p.ring[28..64], &raw[12..48]);

        // inline DC write: single WQE, BlueFlame
        let wr = SendWr {
            dc: Some(ib_target(false)),
            payload: Payload::Inline(vec![vec![0xab; 12]]),
            ..SendWr::new(9, write_op(), sge(2))
        };
        let p = qp.post_extended(2, &[wr], 0).unwrap();
        let w = p.wqebbs(2, 2);
        check_ctrl(&w, 0x08, 2, QPN, 6);
        assert_eq!(be32(&w, 80), 12 | 0x8000_0000);
        assert_eq!(p.bf_copy.as_deref(), Some(&w[..]));
    }

    pub fn dci_refusals() {
        let mut dci = OracleQp::new(QpConfig::dci(QPN)).unwrap();
        let wr = SendWr {
            dc: Some(ib_target(false)),
            ..SendWr::new(1, write_op(), sge(0))
        };
        assert_eq!(
            dci.post_classic(0, std::slice::from_ref(&wr), 0),
            Err(OracleError::ClassicDc)
        );
        let no_target = SendWr::new(1, write_op(), sge(0));
        assert_eq!(
            dci.post_extended(0, &[wr.clone(), no_target], 0),
            Err(OracleError::DcMismatch { wr: 1 })
        );
        let mut rc = OracleQp::new(QpConfig::rc(QPN)).unwrap();
        assert_eq!(
            rc.post_extended(0, &[wr], 0),
            Err(OracleError::DcMismatch { wr: 0 })
        );
        assert!(matches!(
            OracleQp::new(QpConfig {
                sq_wqebbs: 3,
                ..QpConfig::rc(QPN)
            }),
            Err(OracleError::Config(_))
        ));
        assert!(matches!(
            OracleQp::new(QpConfig {
                qpn: 1 << 24,
                ..QpConfig::rc(0)
            }),
            Err(OracleError::Config(_))
        ));
    }

    /// A CQE per facts 5.1: opcode and owner in op_own, QPN and the completed WQE's
    /// opcode in sop_drop_qpn, the WQE's start index in wqe_counter.
    fn cqe(cqe_opcode: u8, wqe_opcode: u8, qpn: u32, wqe_counter: u16, owner: u8) -> [u8; 64] {
        let mut c = [0u8; 64];
        c[56..60].copy_from_slice(&(((wqe_opcode as u32) << 24) | qpn).to_be_bytes());
        c[60..62].copy_from_slice(&wqe_counter.to_be_bytes());
        c[63] = (cqe_opcode << 4) | owner;
        c
    }
    fn owner(n: u32, cqes: u32) -> u8 {
        ((n / cqes) & 1) as u8
    }

    pub fn poll_requester() {
        let cqes = 16;
        let mut qp = OracleQp::new(QpConfig {
            cqes,
            sq_wqebbs: 64,
            ..QpConfig::rc(QPN)
        })
        .unwrap();
        // second pass over the CQ (owner 1), wrapping into the third (owner 0)
        let start = 2 * cqes - 2;
        let mut read = cqe(0, 0x10, QPN, 0x1_0005u32 as u16, owner(start + 1, cqes));
        read[44..48].copy_from_slice(&0x1000u32.to_be_bytes());
        let input = [
            cqe(0, 0x08, QPN, 70, owner(start, cqes)), // slot 70 % 64 = 6
            read,
            cqe(0, 0x11, QPN, 7, owner(start + 2, cqes)),
            cqe(0, 0x12, QPN, 8, owner(start + 3, cqes)),
            cqe(0, 0x09, QPN, 9, owner(start + 4, cqes)),
        ];
        let p = qp.poll_cq(start, &input, 8).unwrap();
        assert!(!p.poll_error);
        assert_eq!(p.completions.len(), 5);
        assert_eq!(p.cons_index, start + 5);
        assert_eq!(p.ci_dbrec, Some((start + 5) & 0xff_ffff));
        assert!(!p.arm_dbrec_written);
        let c = &p.completions;
        let expect = [
            (6, verbs::WC_RDMA_WRITE, None),
            (5, verbs::WC_RDMA_READ, Some(0x1000)),
            (7, verbs::WC_COMP_SWAP, Some(8)),
            (8, verbs::WC_FETCH_ADD, Some(8)),
            (9, verbs::WC_RDMA_WRITE, None),
        ];
        for (wc, (slot, opcode, byte_len)) in c.iter().zip(expect) {
            assert_eq!(
                wc.wr_id,
                Some(SQ_WRID_BASE + slot),
                "wqe_counter k -> wr_id of slot k"
            );
            assert_eq!(wc.status, Some(verbs::WC_SUCCESS));
            assert_eq!(wc.opcode, Some(opcode));
            assert_eq!(wc.qp_num, Some(QPN));
            assert_eq!(
                wc.byte_len, byte_len,
                "byte_len stored only for READ and atomics"
            );
            assert_eq!(wc.src_qp, None);
        }
        assert_eq!(
            c[4].wc_flags,
            Some(verbs::WC_WITH_IMM),
            "WRITE_IMM requester completion"
        );
        assert_eq!(c[0].wc_flags, Some(0));
        assert_eq!(p.sq_tail, 10, "tail = wqe_head[slot of last CQE] + 1");

        // wrong owner parity: not the software's yet
        let p = qp
            .poll_cq(start, &[cqe(0, 0x08, QPN, 1, 1 - owner(start, cqes))], 4)
            .unwrap();
        assert!(p.completions.is_empty() && !p.poll_error);
        assert_eq!(p.cons_index, start);
        // ne limits the count
        let p = qp.poll_cq(start, &input, 2).unwrap();
        assert_eq!((p.completions.len(), p.cons_index), (2, start + 2));
    }

    pub fn poll_errors() {
        let mut qp = OracleQp::new(QpConfig {
            cqes: 8,
            sq_wqebbs: 16,
            rq_wqes: 16,
            ..QpConfig::rc(QPN)
        })
        .unwrap();
        let err = |op: u8, synd: u8, vendor: u8, counter: u16, n: u32| {
            let mut c = cqe(op, 0x08, QPN, counter, owner(n, 8));
            c[54] = vendor;
            c[55] = synd;
            c
        };
        let input = [
            err(13, 0x13, 0x88, 3, 0),  // requester, remote access
            err(13, 0x05, 0x00, 4, 1),  // requester, flush
            err(14, 0x04, 0x11, 21, 2), // responder, local protection (rq slot 5)
            err(13, 0x7e, 0x00, 6, 3),  // unknown syndrome
        ];
        let p = qp.poll_cq(0, &input, 8).unwrap();
        assert_eq!(p.completions.len(), 4);
        let c = &p.completions;
        assert_eq!(c[0].status, Some(verbs::WC_REM_ACCESS_ERR));
        assert_eq!(c[0].vendor_err, Some(0x88));
        assert_eq!(c[0].wr_id, Some(SQ_WRID_BASE + 3));
        assert_eq!(c[1].status, Some(verbs::WC_WR_FLUSH_ERR));
        assert_eq!(c[2].status, Some(verbs::WC_LOC_PROT_ERR));
        assert_eq!(
            c[2].wr_id,
            Some(RQ_WRID_BASE + 5),
            "responder errors use the receive queue"
        );
        assert_eq!(c[3].status, Some(verbs::WC_GENERAL_ERR));
        for wc in c {
            assert_eq!(wc.qp_num, Some(QPN));
            assert_eq!(
                (wc.opcode, wc.byte_len),
                (None, None),
                "error completions leave opcode and byte_len"
            );
        }
        assert_eq!((p.sq_tail, p.rq_tail), (7, 1));

        // a CQE for an unknown QP: poll error, the completions before it are lost
        let input = [cqe(0, 0x08, QPN, 1, 0), cqe(0, 0x08, QPN + 1, 2, 0)];
        let p = qp.poll_cq(0, &input, 4).unwrap();
        assert!(p.poll_error);
        assert_eq!(p.cons_index, 2, "the failing CQE was consumed");
        assert_eq!(p.completions.len(), 1);
        assert_eq!(p.completions[0].wr_id, Some(SQ_WRID_BASE + 1));
    }

    pub fn poll_responder() {
        let mut qp = OracleQp::new(QpConfig {
            cqes: 8,
            rq_wqes: 8,
            ..QpConfig::rc(QPN)
        })
        .unwrap();
        let resp = |op: u8, counter: u16, n: u32| {
            let mut c = cqe(op, 0, QPN, counter, owner(n, 8));
            c[22..24].copy_from_slice(&0x0042u16.to_be_bytes()); // slid
            c[24..28].copy_from_slice(&((0x2u32 << 28) | (0x7 << 24) | 0x00_1234).to_be_bytes()); // GRH, SL 7, src QP
            c[36..40].copy_from_slice(&0xcafe_f00du32.to_be_bytes()); // immediate
            c[44..48].copy_from_slice(&0x200u32.to_be_bytes()); // byte count
            c
        };
        let input = [
            resp(1, 9, 0),
            resp(2, 10, 1),
            resp(3, 11, 2),
            resp(4, 12, 3),
        ];
        let p = qp.poll_cq(0, &input, 8).unwrap();
        assert!(!p.poll_error);
        let c = &p.completions;
        assert_eq!(c.len(), 4);
        assert_eq!(c[0].opcode, Some(verbs::WC_RECV_RDMA_WITH_IMM));
        for wc in &c[1..] {
            assert_eq!(wc.opcode, Some(verbs::WC_RECV));
        }
        assert_eq!(c[0].immediate(), Some(0xcafe_f00d));
        assert_eq!(c[1].immediate(), None);
        assert_eq!(c[2].immediate(), Some(0xcafe_f00d));
        // SEND_WITH_INV: the invalidated rkey, host order, in the same union
        assert_ne!(c[3].wc_flags.unwrap() & verbs::WC_WITH_INV, 0);
        assert_eq!(c[3].imm_data, Some(0xcafe_f00d));
        assert_eq!(c[3].immediate(), None);
        for (i, wc) in c.iter().enumerate() {
            assert_eq!(
                wc.wr_id,
                Some(RQ_WRID_BASE + 1 + i as u64),
                "rq slot = wqe_counter mod 8"
            );
            assert_eq!(wc.qp_num, Some(QPN));
            assert_eq!(wc.byte_len, Some(0x200));
            assert_eq!(wc.src_qp, Some(0x1234));
            assert_eq!(wc.sl, Some(7));
            assert_eq!(wc.slid, Some(0x42));
            assert_eq!(wc.dlid_path_bits, Some(0));
            assert_ne!(wc.wc_flags.unwrap() & verbs::WC_GRH, 0);
            // provider quirk: pkey_index is the low half of imm_inval_pkey, for every
            // responder completion (meaningful only on UD/GSI)
            assert_eq!(wc.pkey_index, Some(0xf00d));
        }
        assert_eq!(p.rq_tail, 4);
    }

    pub fn poll_cqe_version_1() {
        let mut qp = OracleQp::new(QpConfig {
            cqe_version: CqeVersion::V1,
            ..QpConfig::rc(QPN)
        })
        .unwrap();
        let uidx = qp.user_index().expect("v1 has a user index");
        let mut c = cqe(0, 0x08, QPN, 4, 0);
        c[32..36].copy_from_slice(&uidx.to_be_bytes());
        let p = qp.poll_cq(0, &[c], 2).unwrap();
        assert_eq!(p.completions.len(), 1);
        assert_eq!(p.completions[0].wr_id, Some(SQ_WRID_BASE + 4));
        // an unknown user index: poll error
        c[32..36].copy_from_slice(&(uidx + 1).to_be_bytes());
        assert!(qp.poll_cq(0, &[c], 2).unwrap().poll_error);
        assert_eq!(OracleQp::new(QpConfig::rc(QPN)).unwrap().user_index(), None);
    }

    pub fn poll_refusals() {
        let mut qp = OracleQp::new(QpConfig {
            cqes: 4,
            ..QpConfig::rc(QPN)
        })
        .unwrap();
        let mut scatter = cqe(0, 0x10, QPN, 0, 0);
        scatter[63] |= 0x4;
        assert_eq!(
            qp.poll_cq(0, &[cqe(0, 0x08, QPN, 0, 0), scatter], 2),
            Err(OracleError::ScatterCqe { index: 1 })
        );
        assert_eq!(
            qp.poll_cq(0, &[[0u8; 64]; 5], 2),
            Err(OracleError::TooManyCqes)
        );
        // error CQEs may carry those bits: the provider does not scatter them
        let mut e = cqe(13, 0x10, QPN, 0, 0);
        e[63] |= 0x4;
        assert!(qp.poll_cq(0, &[e], 1).is_ok());
    }

    /// xorshift64*: deterministic inputs without a dependency.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    fn random_wr(r: &mut Rng) -> SendWr {
        let (remote_addr, rkey) = (r.next(), r.next() as u32);
        let op = match r.below(5) {
            0 => Op::Write { remote_addr, rkey },
            1 => Op::WriteImm {
                remote_addr,
                rkey,
                imm: r.next() as u32,
            },
            2 => Op::Read { remote_addr, rkey },
            3 => Op::CompareSwap {
                remote_addr,
                rkey,
                compare: r.next(),
                swap: r.next(),
            },
            _ => Op::FetchAdd {
                remote_addr,
                rkey,
                add: r.next(),
            },
        };
        let atomic = matches!(op, Op::CompareSwap { .. } | Op::FetchAdd { .. });
        let writes = matches!(op, Op::Write { .. } | Op::WriteImm { .. });
        let payload = if writes && r.below(3) == 0 {
            let n = 1 + r.below(3) as usize;
            Payload::Inline(
                (0..n)
                    .map(|_| (0..r.below(40)).map(|_| r.next() as u8).collect())
                    .collect(),
            )
        } else {
            let n = if atomic { 1 } else { r.below(5) as usize };
            let len = |r: &mut Rng| if r.below(8) == 0 { 0 } else { r.next() as u32 };
            Payload::Sges(
                (0..n)
                    .map(|_| Sge {
                        addr: r.next(),
                        len: len(r),
                        lkey: r.next() as u32,
                    })
                    .collect(),
            )
        };
        let flags = SendFlags {
            signaled: r.below(2) == 0,
            fence: r.below(4) == 0,
            solicited: r.below(4) == 0,
        };
        SendWr {
            wr_id: r.next(),
            op,
            flags,
            payload,
            dc: None,
        }
    }

    /// The classic and extended paths are two encoders of the same WQEs: over many
    /// pseudo-random RC requests their ring bytes, masks, doorbells and BlueFlame
    /// copies agree except at the documented quirks (1: ctrl.imm, 5: atomic byte
    /// count).
    pub fn classic_and_extended_differ_only_by_quirks() {
        let mut r = Rng(0x1bad_b002_dead_beef);
        let mut qp = OracleQp::new(QpConfig {
            sq_wqebbs: 32,
            max_inline_data: 128,
            ..QpConfig::rc(QPN)
        })
        .unwrap();
        for case in 0..400 {
            let wrs: Vec<SendWr> = (0..1 + r.below(3)).map(|_| random_wr(&mut r)).collect();
            let start = r.next() as u32;
            let prefill = r.next() as u8;
            let c = qp.post_classic(start, &wrs, prefill).unwrap();
            let e = qp.post_extended(start, &wrs, prefill).unwrap();
            assert_eq!((c.failure, e.failure), (None, None), "case {case}");
            assert_eq!(
                (c.cur_post, c.wqes_rung, c.dbrec),
                (e.cur_post, e.wqes_rung, e.dbrec),
                "case {case}"
            );
            assert_eq!(c.doorbell, e.doorbell, "case {case}");
            assert_eq!(c.bf_copy.is_some(), e.bf_copy.is_some(), "case {case}");

            // walk the WQEs and blank out the quirk bytes
            let (mut cm, mut em) = (c.ring_masked(), e.ring_masked());
            let mut at = start;
            for wr in &wrs {
                let ds = (c.ring[c.offset_of(at) + 7] & 0x3f) as u32;
                let base = c.offset_of(at);
                if !matches!(wr.op, Op::WriteImm { .. }) {
                    assert_eq!(
                        cm[base + 12..base + 16],
                        [Some(0); 4],
                        "case {case}: classic imm = 0"
                    );
                    assert_eq!(
                        em[base + 12..base + 16],
                        [None; 4],
                        "case {case}: extended leaves imm"
                    );
                    cm[base + 12..base + 16].fill(None);
                    em[base + 12..base + 16].fill(None);
                }
                if let (Op::CompareSwap { .. } | Op::FetchAdd { .. }, Payload::Sges(s)) =
                    (&wr.op, &wr.payload)
                {
                    if s[0].len != 0 {
                        assert_eq!(
                            be32(&c.ring, base + 48),
                            8,
                            "case {case}: classic atomic count"
                        );
                        assert_eq!(be32(&e.ring, base + 48), s[0].len, "case {case}");
                        cm[base + 48..base + 52].fill(None);
                        em[base + 48..base + 52].fill(None);
                    }
                }
                at = at.wrapping_add(ds.div_ceil(4));
            }
            assert_eq!(at, c.cur_post, "case {case}: DS walk covers the post");
            assert_eq!(cm, em, "case {case}: {wrs:?}");
        }
    }
}
