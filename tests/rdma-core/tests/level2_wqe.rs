//! Level 2 differential tests of the send side: random work requests are posted through
//! rdma-core's real mlx5 provider (`mlx5_post_send`, the "classic" path, and the
//! `ibv_wr_*` builders, the "extended" path) on a fake QP, and the same requests are
//! written by ibgda's typed builders (`RdmaWrite`, `RdmaRead`, `Atomic::*`) and by the
//! erased `AnyWqe` through `SendRing::write` at the same index into a ring of the same
//! size. Compared per case:
//!
//! * the ring bytes, under the provider's written mask (both sides post twice, on rings
//!   prefilled with complementary bytes, to know which bytes each wrote): every byte the
//!   provider writes we write, with the same value; every byte we write that the provider
//!   does not is inside the WQE's DS, is zero, and is one of the documented quirks below
//!   (the quirk set is asserted exactly, so a quirk that stops happening also fails);
//! * the DS and WQEBB counts, the producer counter after the post, the doorbell record
//!   (the next free WQEBB, 16 bits, big-endian), and the 8-byte doorbell against
//!   `ControlSegment::doorbell_bytes()` of our last WQE; a BlueFlame copy, when the
//!   provider makes one, against our WQE's bytes;
//! * our parser (`parse_wqe`) on the provider's WQE (unwritten bytes as zero) against the
//!   description it was built from (`ParsedWqe::differs_from`).
//!
//! Quirks (rdma-core 56.1), each encoded in `quirk_zeros` / `known_diffs` below:
//! * extended path: `ctrl.imm` (bytes 12..16) is not written for WRITE, READ, atomics;
//!   we write 0 there, as the classic path does;
//! * inline padding after the payload up to the octoword is never written; we zero it;
//! * `atomic.compare` is not written for fetch-and-add; we zero it;
//! * atomic data segment byte count: the classic path forces 8, the extended path passes
//!   the SGE's length through; we write 8 (the operand size), like the classic path;
//! * `IBV_SEND_FENCE` is `MLX5_WQE_CTRL_FENCE` (0x80) = our `FenceMode::SmallAndFence`;
//! * DC: only the extended path can post (the classic one has no DCI case).
//!
//! Every shape runs at least 2,000 proptest cases (on both paths where the provider has
//! both), with random QPN (24 bits), ring size (1..=1024 WQEBBs), producer counter
//! (anywhere, at the ring's end, at the 16-bit index wrap, at the u32 wrap), keys,
//! addresses, lengths, signaling (also `sq_sig_all`), solicited, fence and BlueFlame
//! register size. Each test prints `oracle: <name>: <n> cases ...` with counts taken
//! from the cases that ran.

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
    rc_write_gather,
    rc_write_imm_gather,
    rc_read_scatter,
    rc_write_inline,
    rc_inline_over_limit,
    rc_compare_swap,
    rc_fetch_add,
    rc_chain,
    dc_write_full_av,
    dc_read_full_av,
    dc_atomics_full_av,
    dc_compact_av_is_full_prefix,
);

#[cfg(ibgda_oracle)]
mod checks {
    use std::cell::Cell;
    use std::fmt::Debug;
    use std::time::Instant;

    use ibgda::wqe::segment::{AddressVectorSegment, CompactAddressVectorSegment};
    use ibgda::wqe::{
        inline_octowords, parse_wqe, AnyData, AnyDcTarget, AnyOperation, AnyWqe, Atomic, AtomicOp,
        CompactAddressVector, CompletionMode, ControlFlags, DcTarget, FenceMode, Full,
        FullAddressVector, Grh, LKey, LinkAddress, LocalBuffer, Qpn, RKey, RdmaRead, RdmaWrite,
        RemoteAddress, SendRing, Sge, Solicited, TransportKind, Wqe, WqeError, WqeIndex, WqeLimits,
        WqeSpec,
    };
    use ibgda_rdma_core_oracle::{
        self as oracle, AddressVector, DcAddress, IbAddress, Op, OracleQp, Payload, PostPath,
        Posted, QpConfig, SendFlags, SendWr, Transport,
    };
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestCaseError, TestRunner};
    use zerocopy::{FromBytes, IntoBytes};

    const CASES: u32 = 2_000;
    /// Largest inline payload of an RC WRITE: DS 63 = ctrl + raddr + 61 octowords.
    const RC_MAX_INLINE: u32 = 61 * 16 - 4;
    /// Largest inline payload of a DC WRITE with the full AV: DS 63 = 5 + 58 octowords.
    const DC_MAX_INLINE: u32 = 58 * 16 - 4;
    /// Largest ring the cases use (log2 of WQEBBs).
    const MAX_RING_LOG2: u32 = 10;
    /// ENOMEM, the provider's "inline too long".
    const ENOMEM: i32 = 12;

    /// rdma-core's `ib_to_mlx5_rate_table` (providers/mlx5/verbs.c, 56.1): the mlx5 rate
    /// code `mlx5_create_ah` puts in `stat_rate_sl` bits 7..4 for an `enum ibv_rate`.
    const IB_TO_MLX5_RATE: [u8; 23] = [
        0, 0, 7, 8, 9, 10, 11, 12, 13, 14, 15, 11, 13, 15, 0, 9, 15, 0, 0, 9, 13, 0, 0,
    ];

    fn mlx5_rate(ibv_rate: u8) -> u8 {
        IB_TO_MLX5_RATE
            .get(usize::from(ibv_rate))
            .copied()
            .unwrap_or(0)
    }

    fn fail(msg: impl std::fmt::Display) -> TestCaseError {
        TestCaseError::fail(msg.to_string())
    }

    // ---- the runner -----------------------------------------------------------------------

    /// Per-test coverage counters, reported with the case count.
    #[derive(Default)]
    struct Stats {
        cases: Cell<u32>,
        posts: Cell<u32>,
        wqes: Cell<u32>,
        ring_wraps: Cell<u32>,
        ring_splits: Cell<u32>,
        index_wraps: Cell<u32>,
        blueflame: Cell<u32>,
        parsed: Cell<u32>,
        refusals: Cell<u32>,
    }

    fn bump(c: &Cell<u32>, by: u32) {
        c.set(c.get() + by);
    }

    fn run_cases<S>(
        name: &str,
        strategy: S,
        test: impl Fn(S::Value, &Stats) -> Result<(), TestCaseError>,
    ) where
        S: Strategy,
        S::Value: Debug,
    {
        let stats = Stats::default();
        let start = Instant::now();
        let mut runner = TestRunner::new(Config {
            cases: CASES,
            failure_persistence: None,
            ..Config::default()
        });
        let result = runner.run(&strategy, |input| {
            test(input, &stats)?;
            bump(&stats.cases, 1);
            Ok(())
        });
        if let Err(e) = result {
            panic!(
                "oracle: {name}: FAILED ({} cases passed first): {e}",
                stats.cases.get()
            );
        }
        assert!(
            stats.cases.get() >= CASES,
            "oracle: {name}: only {} of {CASES} cases ran",
            stats.cases.get()
        );
        let mut line = format!("oracle: {name}: {} cases", stats.cases.get());
        for (what, c) in [
            ("provider posts", &stats.posts),
            ("WQEs compared", &stats.wqes),
            ("WQEs reaching the ring's end", &stats.ring_wraps),
            ("of them split by it", &stats.ring_splits),
            ("WQEs reaching the 16-bit index wrap", &stats.index_wraps),
            ("BlueFlame copies", &stats.blueflame),
            ("provider WQEs parsed back", &stats.parsed),
            ("provider refusals matched", &stats.refusals),
        ] {
            if c.get() > 0 {
                line += &format!(", {} {what}", c.get());
            }
        }
        eprintln!("{line} ({:.2?})", start.elapsed());
    }

    // ---- random inputs ----------------------------------------------------------------------

    /// Where the producer counter starts, resolved once the ring size is known.
    #[derive(Clone, Copy, Debug)]
    enum At {
        Anywhere(u32),
        /// `back` WQEBBs before the ring's end (so multi-WQEBB WQEs wrap).
        RingEnd {
            lap: u32,
            back: u32,
        },
        /// `back` WQEBBs before the 16-bit WQE index wraps.
        IndexWrap {
            high: u16,
            back: u32,
        },
        /// `back` WQEBBs before the u32 counter wraps.
        CounterWrap {
            back: u32,
        },
    }

    impl At {
        fn resolve(self, ring: u32) -> u32 {
            match self {
                At::Anywhere(c) => c,
                At::RingEnd { lap, back } => {
                    lap.wrapping_mul(ring).wrapping_add(ring - 1 - back % ring)
                }
                At::IndexWrap { high, back } => (u32::from(high) << 16 | 0xffff).wrapping_sub(back),
                At::CounterWrap { back } => u32::MAX.wrapping_sub(back),
            }
        }
    }

    fn at() -> impl Strategy<Value = At> {
        prop_oneof![
            any::<u32>().prop_map(At::Anywhere),
            (any::<u32>(), 0u32..4).prop_map(|(lap, back)| At::RingEnd { lap, back }),
            (any::<u16>(), 0u32..4).prop_map(|(high, back)| At::IndexWrap { high, back }),
            (0u32..4).prop_map(|back| At::CounterWrap { back }),
        ]
    }

    /// One case: a QP configuration, where to post, and the work requests.
    #[derive(Clone, Debug)]
    struct Case {
        qpn: u32,
        ring_log2: u32,
        at: At,
        prefill: u8,
        sig_all: bool,
        bf_buf_size: u32,
        max_inline: u32,
        wrs: Vec<SendWr>,
    }

    fn case(wrs: impl Strategy<Value = (u32, Vec<SendWr>)>) -> impl Strategy<Value = Case> {
        (
            0u32..=Qpn::MAX,
            0u32..=MAX_RING_LOG2,
            at(),
            any::<u8>(),
            prop::bool::weighted(0.2),
            prop_oneof![Just(0u32), Just(64), Just(256), Just(512), Just(2048)],
            wrs,
        )
            .prop_map(
                |(qpn, ring_log2, at, prefill, sig_all, bf_buf_size, (max_inline, wrs))| Case {
                    qpn,
                    ring_log2,
                    at,
                    prefill,
                    sig_all,
                    bf_buf_size,
                    max_inline,
                    wrs,
                },
            )
    }

    fn flags() -> impl Strategy<Value = SendFlags> {
        (any::<bool>(), any::<bool>(), any::<bool>()).prop_map(|(signaled, fence, solicited)| {
            SendFlags {
                signaled,
                fence,
                solicited,
            }
        })
    }

    /// `n` SGEs whose lengths add up to at most 2 GiB (ibgda's per-WQE limit), often small.
    fn sges(n: std::ops::RangeInclusive<usize>) -> impl Strategy<Value = Vec<oracle::Sge>> {
        let one = (
            any::<u64>(),
            prop_oneof![0u32..64, any::<u32>()],
            any::<u32>(),
        );
        proptest::collection::vec(one, n).prop_map(|v| {
            let cap = 0x8000_0000 / v.len() as u32 - 1;
            v.into_iter()
                .map(|(addr, raw, lkey)| oracle::Sge {
                    addr,
                    len: 1 + raw % cap,
                    lkey,
                })
                .collect()
        })
    }

    /// An inline payload of 0..=`max` bytes (mostly 1..=max, often exactly `max`), cut
    /// into 1..=3 chunks for the provider's gather.
    fn inline_payload(max: u32) -> impl Strategy<Value = Vec<Vec<u8>>> {
        (
            0u8..5,
            any::<u32>(),
            proptest::collection::vec(any::<u8>(), max as usize),
            proptest::collection::vec(any::<u16>(), 0..3),
        )
            .prop_map(move |(sel, raw, bytes, cuts)| {
                let len = match sel {
                    0 => max,
                    1 => max - raw % max.min(16),
                    2 => (raw % 17).min(max),
                    _ => 1 + raw % max,
                } as usize;
                let mut at: Vec<usize> = cuts
                    .iter()
                    .map(|&c| usize::from(c) * len / 0x1_0000)
                    .collect();
                at.sort_unstable();
                let mut chunks = Vec::new();
                let mut from = 0;
                for cut in at.into_iter().chain([len]) {
                    chunks.push(bytes[from..cut].to_vec());
                    from = cut;
                }
                chunks
            })
    }

    fn max_inline(limit: u32) -> impl Strategy<Value = u32> {
        prop_oneof![1u32..=64, 1u32..=limit, Just(limit)]
    }

    fn write_op(imm: Option<u32>, remote_addr: u64, rkey: u32) -> Op {
        match imm {
            Some(imm) => Op::WriteImm {
                remote_addr,
                rkey,
                imm,
            },
            None => Op::Write { remote_addr, rkey },
        }
    }

    fn wr(op: Op, flags: SendFlags, payload: Payload) -> SendWr {
        SendWr {
            wr_id: 0,
            op,
            flags,
            payload,
            dc: None,
        }
    }

    /// WRITE (or WRITE_IMM when `imm`) with 1..=4 gather entries.
    fn gather_write(imm: bool) -> impl Strategy<Value = SendWr> {
        (
            any::<u64>(),
            any::<u32>(),
            any::<u32>(),
            flags(),
            sges(1..=4),
        )
            .prop_map(move |(addr, rkey, value, flags, sges)| {
                let op = write_op(imm.then_some(value), addr, rkey);
                wr(op, flags, Payload::Sges(sges))
            })
    }

    fn read() -> impl Strategy<Value = SendWr> {
        (any::<u64>(), any::<u32>(), flags(), sges(1..=4)).prop_map(
            |(remote_addr, rkey, flags, sges)| {
                wr(Op::Read { remote_addr, rkey }, flags, Payload::Sges(sges))
            },
        )
    }

    fn inline_write(max: u32) -> impl Strategy<Value = SendWr> {
        (
            any::<u64>(),
            any::<u32>(),
            proptest::option::of(any::<u32>()),
            flags(),
            inline_payload(max),
        )
            .prop_map(|(addr, rkey, imm, flags, chunks)| {
                wr(write_op(imm, addr, rkey), flags, Payload::Inline(chunks))
            })
    }

    /// The local SGE of an atomic: usually 8 bytes; other lengths show how the two
    /// provider paths differ (the classic one forces 8).
    fn atomic_sge() -> impl Strategy<Value = oracle::Sge> {
        (
            any::<u64>(),
            prop_oneof![3 => Just(8u32), 1 => 1u32..=64],
            any::<u32>(),
        )
            .prop_map(|(addr, len, lkey)| oracle::Sge { addr, len, lkey })
    }

    fn compare_swap() -> impl Strategy<Value = SendWr> {
        (
            any::<u64>(),
            any::<u32>(),
            any::<u64>(),
            any::<u64>(),
            flags(),
            atomic_sge(),
        )
            .prop_map(|(addr, rkey, compare, swap, flags, sge)| {
                let op = Op::CompareSwap {
                    remote_addr: addr & !7,
                    rkey,
                    compare,
                    swap,
                };
                wr(op, flags, Payload::Sges(vec![sge]))
            })
    }

    fn fetch_add() -> impl Strategy<Value = SendWr> {
        (
            any::<u64>(),
            any::<u32>(),
            any::<u64>(),
            flags(),
            atomic_sge(),
        )
            .prop_map(|(addr, rkey, add, flags, sge)| {
                let op = Op::FetchAdd {
                    remote_addr: addr & !7,
                    rkey,
                    add,
                };
                wr(op, flags, Payload::Sges(vec![sge]))
            })
    }

    fn single(
        max_inline: u32,
        wr: impl Strategy<Value = SendWr>,
    ) -> impl Strategy<Value = (u32, Vec<SendWr>)> {
        wr.prop_map(move |w| (max_inline, vec![w]))
    }

    fn grh() -> impl Strategy<Value = oracle::Grh> {
        (
            any::<[u8; 16]>(),
            0u32..=0xf_ffff,
            any::<u8>(),
            any::<u8>(),
            any::<u8>(),
        )
            .prop_map(|(dgid, flow_label, sgid_index, hop_limit, traffic_class)| {
                oracle::Grh {
                    dgid,
                    flow_label,
                    sgid_index,
                    hop_limit,
                    traffic_class,
                }
            })
    }

    fn ib_address(with_grh: bool) -> impl Strategy<Value = IbAddress> {
        (
            any::<u16>(),
            0u8..16,
            0u8..0x80,
            // every enum ibv_rate value, and a few past the provider's table (-> 0)
            0u8..=24,
            any::<bool>(),
            grh(),
        )
            .prop_map(move |(dlid, sl, src_path_bits, static_rate, global, grh)| {
                IbAddress {
                    dlid,
                    sl,
                    src_path_bits,
                    static_rate,
                    grh: (with_grh && global).then_some(grh),
                }
            })
    }

    /// A DC target: an InfiniBand AH the provider builds (`mlx5_create_ah`), or raw AV
    /// bytes as a hardware control plane hands them over (a stale DCT number in
    /// `dqp_dct`'s low bits is OR-ed, as the provider does).
    fn dc_address() -> impl Strategy<Value = DcAddress> {
        let raw = (any::<[u8; 48]>(), 0u32..=Qpn::MAX).prop_map(|(mut b, dqp)| {
            b[8..12].copy_from_slice(&dqp.to_be_bytes());
            AddressVector::Raw(b)
        });
        (
            0u32..=Qpn::MAX,
            any::<u64>(),
            prop_oneof![3 => ib_address(true).prop_map(AddressVector::Ib), 1 => raw],
        )
            .prop_map(|(dctn, dc_key, av)| DcAddress { dctn, dc_key, av })
    }

    fn with_dc(wr: impl Strategy<Value = SendWr>) -> impl Strategy<Value = SendWr> {
        (wr, dc_address()).prop_map(|(mut w, dc)| {
            w.dc = Some(dc);
            w
        })
    }

    // ---- our side ---------------------------------------------------------------------------

    /// Our send ring, written twice (prefilled with `p` and with `!p`) to know which bytes
    /// we wrote, with a producer counter.
    struct OurRing {
        a: Vec<u8>,
        b: Vec<u8>,
        qpn: Qpn,
        limits: WqeLimits,
        next: u32,
    }

    /// One WQE we wrote.
    #[derive(Clone, Copy, Debug)]
    struct Placed {
        start: u32,
        ds: u8,
        wqebbs: u32,
        doorbell: [u8; 8],
    }

    impl OurRing {
        fn new(wqebbs: u32, prefill: u8, qpn: u32, max_inline: u32, start: u32) -> Self {
            let bytes = wqebbs as usize * 64;
            OurRing {
                a: vec![prefill; bytes],
                b: vec![!prefill; bytes],
                qpn: Qpn::new(qpn).unwrap(),
                limits: WqeLimits {
                    max_inline: max_inline as usize,
                    max_wqebbs: WqeLimits::MAX_WQEBBS,
                },
                next: start,
            }
        }

        /// Writes `wqe` at the producer counter (`SendRing::write` into both rings) and
        /// advances the counter.
        fn put<S: WqeSpec>(&mut self, wqe: &Wqe<S>) -> Result<Placed, WqeError> {
            let index = WqeIndex(self.next as u16);
            let mut wqebbs = 0;
            for mem in [&mut self.a, &mut self.b] {
                let mut ring = SendRing::new(mem, self.limits)?;
                wqebbs = ring.write(index, self.qpn, wqe)?;
            }
            let placed = Placed {
                start: self.next,
                ds: wqe.ds(),
                wqebbs,
                doorbell: wqe.control_segment(index, self.qpn).doorbell_bytes(),
            };
            assert_eq!(wqebbs, wqe.wqebbs());
            self.next = self.next.wrapping_add(wqebbs);
            Ok(placed)
        }

        fn written(&self) -> Vec<bool> {
            self.a.iter().zip(&self.b).map(|(x, y)| x == y).collect()
        }
    }

    fn remote_of(op: &Op) -> RemoteAddress {
        let (addr, rkey) = match *op {
            Op::Write { remote_addr, rkey }
            | Op::WriteImm {
                remote_addr, rkey, ..
            }
            | Op::Read { remote_addr, rkey }
            | Op::CompareSwap {
                remote_addr, rkey, ..
            }
            | Op::FetchAdd {
                remote_addr, rkey, ..
            } => (remote_addr, rkey),
        };
        RemoteAddress::new(addr, RKey(rkey))
    }

    fn our_sges(wr: &SendWr) -> Vec<Sge> {
        match &wr.payload {
            Payload::Sges(s) => s
                .iter()
                .map(|s| Sge::new(s.addr, s.len, LKey(s.lkey)).expect("valid SGE"))
                .collect(),
            Payload::Inline(_) => Vec::new(),
        }
    }

    fn inline_bytes(wr: &SendWr) -> Option<Vec<u8>> {
        match &wr.payload {
            Payload::Inline(chunks) => Some(chunks.concat()),
            Payload::Sges(_) => None,
        }
    }

    fn result_buffer(wr: &SendWr) -> LocalBuffer {
        match &wr.payload {
            Payload::Sges(s) => LocalBuffer::new(s[0].addr, LKey(s[0].lkey)),
            Payload::Inline(_) => panic!("an atomic has one SGE"),
        }
    }

    /// What our queue would do with `flags` on a QP with `sig_all`.
    fn effective(flags: SendFlags, sig_all: bool) -> SendFlags {
        SendFlags {
            signaled: flags.signaled || sig_all,
            ..flags
        }
    }

    fn control_flags(f: SendFlags) -> ControlFlags {
        ControlFlags {
            fence: if f.fence {
                FenceMode::SmallAndFence
            } else {
                FenceMode::None
            },
            completion: if f.signaled {
                CompletionMode::Always
            } else {
                CompletionMode::OnError
            },
            solicited: if f.solicited {
                Solicited::Yes
            } else {
                Solicited::No
            },
        }
    }

    /// Our full-AV target for the provider's DC address.
    fn our_target(dc: &DcAddress) -> DcTarget<Full> {
        match dc.av {
            AddressVector::Ib(ib) => FullAddressVector {
                dct: dc.dctn,
                dc_key: dc.dc_key,
                link: LinkAddress::InfiniBand {
                    lid: ib.dlid,
                    sl: ib.sl,
                    static_rate: mlx5_rate(ib.static_rate),
                    source_path_bits: ib.src_path_bits,
                    // mlx5_create_ah never sets force-loopback
                    force_loopback: false,
                    grh: ib.grh.map(|g| Grh {
                        sgid_index: g.sgid_index,
                        flow_label: g.flow_label,
                        traffic_class: g.traffic_class,
                        hop_limit: g.hop_limit,
                        dgid: g.dgid,
                    }),
                },
            }
            .encode()
            .expect("in-range AV fields"),
            AddressVector::Raw(raw) => DcTarget::from_hardware_av(
                AddressVectorSegment::read_from_bytes(&raw).unwrap(),
                Qpn::new(dc.dctn).unwrap(),
                dc.dc_key,
            ),
        }
    }

    macro_rules! flagged {
        ($b:expr, $f:expr) => {{
            let f: SendFlags = $f;
            let mut b = $b;
            if f.signaled {
                b = b.signaled();
            }
            if f.fence {
                b = b.fence(FenceMode::SmallAndFence);
            }
            if f.solicited {
                b = b.solicited();
            }
            b
        }};
    }

    /// Builds `wr` with the typed builders for destination `$to` and puts it in `$ring`.
    macro_rules! put_typed {
        ($ring:expr, $to:expr, $wr:expr, $sig_all:expr) => {{
            let wr: &SendWr = $wr;
            let f = effective(wr.flags, $sig_all);
            let s = our_sges(wr);
            match wr.op {
                Op::Write { .. } | Op::WriteImm { .. } => {
                    let mut b = RdmaWrite::new($to);
                    if let Op::WriteImm { imm, .. } = wr.op {
                        b = b.immediate(imm);
                    }
                    let b = flagged!(b, f);
                    match inline_bytes(wr) {
                        Some(p) => $ring.put(&b.inline(&p).build()?),
                        None => match s.len() {
                            1 => $ring.put(&b.sge(s[0]).build()?),
                            2 => $ring.put(&b.gather([s[0], s[1]]).build()?),
                            3 => $ring.put(&b.gather([s[0], s[1], s[2]]).build()?),
                            4 => $ring.put(&b.gather([s[0], s[1], s[2], s[3]]).build()?),
                            n => panic!("{n} SGEs"),
                        },
                    }
                }
                Op::Read { .. } => {
                    let b = flagged!(RdmaRead::new($to), f);
                    match s.len() {
                        1 => $ring.put(&b.sge(s[0]).build()?),
                        2 => $ring.put(&b.gather([s[0], s[1]]).build()?),
                        3 => $ring.put(&b.gather([s[0], s[1], s[2]]).build()?),
                        4 => $ring.put(&b.gather([s[0], s[1], s[2], s[3]]).build()?),
                        n => panic!("{n} SGEs"),
                    }
                }
                Op::CompareSwap { compare, swap, .. } => $ring.put(
                    &flagged!(
                        Atomic::compare_swap($to, result_buffer(wr), compare, swap),
                        f
                    )
                    .build()?,
                ),
                Op::FetchAdd { add, .. } => {
                    $ring.put(&flagged!(Atomic::fetch_add($to, result_buffer(wr), add), f).build()?)
                }
            }
        }};
    }

    /// Puts `wr` into `ring` through the typed builders.
    fn put_typed(ring: &mut OurRing, wr: &SendWr, sig_all: bool) -> Result<Placed, WqeError> {
        let remote = remote_of(&wr.op);
        match &wr.dc {
            None => put_typed!(ring, remote, wr, sig_all),
            Some(dc) => put_typed!(ring, our_target(dc).at(remote), wr, sig_all),
        }
    }

    /// The erased description of `wr` (borrowing `sges` and `payload`).
    fn any_wqe<'a>(
        wr: &SendWr,
        sig_all: bool,
        sges: &'a [Sge],
        payload: Option<&'a [u8]>,
    ) -> AnyWqe<'a> {
        let remote = remote_of(&wr.op);
        let data = match payload {
            Some(p) => AnyData::Inline(p),
            None => AnyData::Sges(sges),
        };
        let op = match wr.op {
            Op::Write { .. } => AnyOperation::Write {
                remote,
                imm: None,
                data,
            },
            Op::WriteImm { imm, .. } => AnyOperation::Write {
                remote,
                imm: Some(imm),
                data,
            },
            Op::Read { .. } => AnyOperation::Read { remote, data },
            Op::CompareSwap { compare, swap, .. } => AnyOperation::Atomic {
                remote,
                result: result_buffer(wr),
                op: AtomicOp::CompareSwap { compare, swap },
            },
            Op::FetchAdd { add, .. } => AnyOperation::Atomic {
                remote,
                result: result_buffer(wr),
                op: AtomicOp::FetchAdd { add },
            },
        };
        AnyWqe {
            target: wr.dc.as_ref().map(|dc| AnyDcTarget::from(our_target(dc))),
            flags: control_flags(effective(wr.flags, sig_all)),
            stream_id: 0,
            op,
        }
    }

    // ---- where the segments are, and the quirks ----------------------------------------------

    /// The segments of `wr`'s WQE: (what, C layout to name fields by, offset, length).
    fn segments(wr: &SendWr) -> Vec<(String, Option<&'static str>, usize, usize)> {
        let mut v = vec![("ctrl".to_string(), Some("mlx5_wqe_ctrl_seg"), 0, 16)];
        let mut at = 16;
        if wr.dc.is_some() {
            v.push(("av".into(), Some("mlx5_wqe_av"), at, 48));
            at += 48;
        }
        v.push(("raddr".into(), Some("mlx5_wqe_raddr_seg"), at, 16));
        at += 16;
        match (&wr.op, &wr.payload) {
            (Op::CompareSwap { .. } | Op::FetchAdd { .. }, _) => {
                v.push(("atomic".into(), Some("mlx5_wqe_atomic_seg"), at, 16));
                v.push(("data".into(), Some("mlx5_wqe_data_seg"), at + 16, 16));
            }
            (_, Payload::Sges(s)) => {
                for i in 0..s.len() {
                    v.push((
                        format!("data[{i}]"),
                        Some("mlx5_wqe_data_seg"),
                        at + 16 * i,
                        16,
                    ));
                }
            }
            (_, Payload::Inline(c)) => {
                let len: usize = c.iter().map(Vec::len).sum();
                if len > 0 {
                    v.push(("inline".into(), Some("mlx5_wqe_inl_data_seg"), at, 4));
                    v.push(("inline payload".into(), None, at + 4, len));
                    let end = at + 16 * inline_octowords(len);
                    v.push((
                        "inline padding".into(),
                        None,
                        at + 4 + len,
                        end - at - 4 - len,
                    ));
                }
            }
        }
        v
    }

    /// "ctrl.imm+2"-style name of WQE-relative byte `rel`.
    fn describe(wr: &SendWr, rel: usize) -> String {
        for (what, layout, at, len) in segments(wr) {
            if rel < at || rel >= at + len {
                continue;
            }
            let off = rel - at;
            let field = layout.and_then(|l| {
                oracle::layout(l)?
                    .fields
                    .iter()
                    .filter(|f| f.offset <= off && off < f.offset + f.size)
                    .max_by_key(|f| f.size)
                    .map(|f| (f.name, off - f.offset))
            });
            return match field {
                Some((f, 0)) => format!("{what}.{f}"),
                Some((f, k)) => format!("{what}.{f}+{k}"),
                None => format!("{what}+{off}"),
            };
        }
        format!("past the WQE's segments (+{rel})")
    }

    fn raddr_offset(wr: &SendWr) -> usize {
        if wr.dc.is_some() {
            64
        } else {
            16
        }
    }

    /// WQE-relative bytes we write as zero and the provider does not write at all, on
    /// `path`: exactly these, nothing else.
    fn quirk_zeros(wr: &SendWr, path: PostPath) -> Vec<usize> {
        let mut v = Vec::new();
        if path == PostPath::Extended && !matches!(wr.op, Op::WriteImm { .. }) {
            v.extend(12..16); // ctrl.imm
        }
        let r = raddr_offset(wr);
        match (&wr.op, &wr.payload) {
            (Op::FetchAdd { .. }, _) => v.extend(r + 24..r + 32), // atomic.compare
            (Op::CompareSwap { .. }, _) => {}
            (_, Payload::Inline(c)) => {
                let len: usize = c.iter().map(Vec::len).sum();
                if len > 0 {
                    v.extend(r + 20 + len..r + 16 + 16 * inline_octowords(len));
                    // padding
                }
            }
            (_, Payload::Sges(_)) => {}
        }
        v
    }

    /// WQE-relative bytes both sides write with different values on `path`:
    /// (offset, ours, the provider's).
    fn known_diffs(wr: &SendWr, path: PostPath) -> Vec<(usize, u8, u8)> {
        match (&wr.op, &wr.payload, path) {
            (
                Op::CompareSwap { .. } | Op::FetchAdd { .. },
                Payload::Sges(s),
                PostPath::Extended,
            ) if s[0].len != 8 => {
                // the data segment's byte count: ours the operand size, theirs the SGE's
                let at = raddr_offset(wr) + 32;
                8u32.to_be_bytes()
                    .into_iter()
                    .zip(s[0].len.to_be_bytes())
                    .enumerate()
                    .filter(|(_, (o, t))| o != t)
                    .map(|(i, (o, t))| (at + i, o, t))
                    .collect()
            }
            _ => Vec::new(),
        }
    }

    // ---- the comparison ---------------------------------------------------------------------

    /// Compares what the provider did for `wrs` on `path` with what we wrote.
    fn compare(
        path: PostPath,
        c: &Case,
        start: u32,
        posted: &Posted,
        ours: &OurRing,
        placed: &[Placed],
        stats: &Stats,
    ) -> Result<(), TestCaseError> {
        let n = posted.ring.len();
        prop_assert_eq!(ours.a.len(), n, "ring sizes");
        if let Some(f) = posted.failure {
            return Err(fail(format!(
                "{path:?}: the provider refused the post: {f:?}"
            )));
        }

        // which WQE and which byte of it each ring byte is; the quirks
        let mut owner: Vec<Option<(usize, usize)>> = vec![None; n];
        let mut zero_ok = vec![false; n];
        let mut diff: Vec<Option<(u8, u8)>> = vec![None; n];
        for (i, (p, wr)) in placed.iter().zip(&c.wrs).enumerate() {
            let base = posted.offset_of(p.start);
            for rel in 0..p.wqebbs as usize * 64 {
                owner[(base + rel) % n] = Some((i, rel));
            }
            for rel in quirk_zeros(wr, path) {
                prop_assert!(rel < usize::from(p.ds) * 16, "quirk byte {} past DS", rel);
                zero_ok[(base + rel) % n] = true;
            }
            for (rel, o, t) in known_diffs(wr, path) {
                diff[(base + rel) % n] = Some((o, t));
            }
        }
        let name = |i: usize| match owner[i] {
            Some((w, rel)) => format!(
                "ring byte {i:#x} = WQE {w} +{rel:#04x} ({})",
                describe(&c.wrs[w], rel)
            ),
            None => format!("ring byte {i:#x} (outside every WQE)"),
        };
        let our_written = ours.written();
        let mut errors = Vec::new();
        for i in 0..n {
            let (pw, ow) = (posted.written[i], our_written[i]);
            let (pv, ov) = (posted.ring[i], ours.a[i]);
            let problem = match (pw, ow) {
                (true, false) => Some(format!("the provider writes {pv:#04x}, we write nothing")),
                (true, true) => match diff[i] {
                    Some((o, t)) if (o, t) != (ov, pv) => Some(format!(
                        "documented difference expected (ours {o:#04x}, provider {t:#04x}), \
                         got ours {ov:#04x}, provider {pv:#04x}"
                    )),
                    None if pv != ov => Some(format!("provider {pv:#04x}, ours {ov:#04x}")),
                    _ => None,
                },
                (false, true) if !zero_ok[i] => Some(format!(
                    "we write {ov:#04x}, the provider writes nothing (not a documented quirk)"
                )),
                (false, true) if ov != 0 => Some(format!("quirk byte: we write {ov:#04x}, not 0")),
                (false, false) if zero_ok[i] => {
                    Some("documented quirk byte, but neither side writes it".to_string())
                }
                (false, false) if diff[i].is_some() => {
                    Some("documented difference, but neither side writes it".to_string())
                }
                _ => None,
            };
            if let Some(p) = problem {
                errors.push(format!("{}: {p}", name(i)));
            }
        }
        if !errors.is_empty() {
            let more = errors.len().saturating_sub(12);
            errors.truncate(12);
            return Err(fail(format!(
                "{path:?} path, counter {start:#x}, ring {} WQEBBs, QPN {:#x}: {} byte(s) differ:\n  {}{}",
                posted.ring_wqebbs(),
                c.qpn,
                errors.len() + more,
                errors.join("\n  "),
                if more > 0 {
                    format!("\n  ... and {more} more")
                } else {
                    String::new()
                }
            )));
        }

        // counts, producer counter, doorbell record, doorbell
        let total: u32 = placed.iter().map(|p| p.wqebbs).sum();
        for (p, wr) in placed.iter().zip(&c.wrs) {
            let ds = posted.ring[posted.offset_of(p.start) + 7] & 0x3f;
            prop_assert_eq!(ds, p.ds, "{:?}: DS of {:?}", path, wr.op);
        }
        prop_assert_eq!(posted.posted_wqebbs(), total, "{:?}: WQEBBs", path);
        prop_assert_eq!(posted.cur_post, start.wrapping_add(total));
        prop_assert_eq!(
            posted.wqes_rung as usize,
            placed.len(),
            "{:?}: WQEs rung",
            path
        );
        let next = WqeIndex(start as u16).advance(total);
        prop_assert_eq!(
            posted.dbrec,
            Some(u32::from(next.0)),
            "{:?}: doorbell record = next free WQEBB",
            path
        );
        prop_assert!(!posted.rcv_dbrec_written);
        let last = placed.last().expect("one WQE at least");
        prop_assert_eq!(
            posted.doorbell,
            Some(last.doorbell),
            "{:?}: doorbell vs our last ControlSegment::doorbell_bytes()",
            path
        );
        prop_assert!(!posted.stale_doorbell);
        if let Some(bf) = &posted.bf_copy {
            // a BlueFlame copy of the single WQE: its bytes under the provider's mask
            prop_assert_eq!(placed.len(), 1);
            prop_assert_eq!(bf.len(), last.wqebbs as usize * 64);
            let base = posted.offset_of(last.start);
            for (k, &b) in bf.iter().enumerate() {
                let i = (base + k) % n;
                if posted.written[i] {
                    prop_assert_eq!(b, ours.a[i], "{:?}: BlueFlame byte {}", path, k);
                }
            }
            bump(&stats.blueflame, 1);
        }

        // our parser on the provider's WQEs (bytes it did not write read as zero)
        let zeroed: Vec<u8> = posted
            .ring
            .iter()
            .zip(&posted.written)
            .map(|(&b, &w)| if w { b } else { 0 })
            .collect();
        for (p, wr) in placed.iter().zip(&c.wrs) {
            if !known_diffs(wr, path).is_empty() {
                continue; // the provider's byte count is not the operand size
            }
            let kind = if wr.dc.is_some() {
                TransportKind::Dc
            } else {
                TransportKind::Rc
            };
            let parsed = parse_wqe(&zeroed, WqeIndex(p.start as u16), kind).map_err(|e| {
                fail(format!(
                    "{path:?}: our parser rejects the provider's WQE: {e}"
                ))
            })?;
            let sges = our_sges(wr);
            let payload = inline_bytes(wr);
            let built = any_wqe(wr, c.sig_all, &sges, payload.as_deref());
            prop_assert_eq!(
                parsed.differs_from(&built),
                None,
                "{:?}: parsed provider WQE differs from {:?}",
                path,
                wr
            );
            prop_assert_eq!(parsed.qpn, c.qpn);
            bump(&stats.parsed, 1);
        }
        Ok(())
    }

    /// Runs one case on `paths`: posts through the provider, writes ours (typed builders
    /// and `AnyWqe`, which must agree), compares.
    fn check(c: Case, paths: &[PostPath], stats: &Stats) -> Result<(), TestCaseError> {
        let dc = c.wrs[0].dc.is_some();
        // the ring: as large as the case asks, and large enough for the WQEs
        let mut need = 0;
        for wr in &c.wrs {
            let s = our_sges(wr);
            let p = inline_bytes(wr);
            let wqe = any_wqe(wr, c.sig_all, &s, p.as_deref())
                .build()
                .map_err(|e| fail(format!("ours refuses {wr:?}: {e}")))?;
            need += wqe.wqebbs();
        }
        let ring = (1u32 << c.ring_log2).max(need.next_power_of_two());
        let start = c.at.resolve(ring);

        let mut typed = OurRing::new(ring, c.prefill, c.qpn, c.max_inline, start);
        let mut erased = OurRing::new(ring, c.prefill, c.qpn, c.max_inline, start);
        let mut placed = Vec::new();
        for wr in &c.wrs {
            let p = put_typed(&mut typed, wr, c.sig_all)
                .map_err(|e| fail(format!("typed builders refuse {wr:?}: {e}")))?;
            let s = our_sges(wr);
            let payload = inline_bytes(wr);
            let q = erased
                .put(
                    &any_wqe(wr, c.sig_all, &s, payload.as_deref())
                        .build()
                        .unwrap(),
                )
                .map_err(|e| fail(format!("AnyWqe refuses {wr:?}: {e}")))?;
            prop_assert_eq!((p.start, p.ds, p.wqebbs), (q.start, q.ds, q.wqebbs));
            prop_assert_eq!(p.doorbell, q.doorbell);
            let slot = p.start & (ring - 1);
            if slot + p.wqebbs >= ring {
                bump(&stats.ring_wraps, 1);
            }
            if slot + p.wqebbs > ring {
                bump(&stats.ring_splits, 1);
            }
            if (p.start & 0xffff) + p.wqebbs >= 0x1_0000 {
                bump(&stats.index_wraps, 1);
            }
            placed.push(p);
        }
        prop_assert!(
            typed.a == erased.a && typed.b == erased.b,
            "the typed builders and AnyWqe write different bytes"
        );

        let mut qp = OracleQp::new(QpConfig {
            transport: if dc { Transport::Dci } else { Transport::Rc },
            sq_wqebbs: ring,
            max_inline_data: c.max_inline,
            sq_sig_all: c.sig_all,
            bf_buf_size: c.bf_buf_size,
            ..QpConfig::rc(c.qpn)
        })
        .map_err(fail)?;
        for &path in paths {
            let posted = qp.post(path, start, &c.wrs, c.prefill).map_err(fail)?;
            bump(&stats.posts, 1);
            compare(path, &c, start, &posted, &typed, &placed, stats)?;
            bump(&stats.wqes, placed.len() as u32);
        }
        Ok(())
    }

    const BOTH: [PostPath; 2] = [PostPath::Classic, PostPath::Extended];
    const EXTENDED: [PostPath; 1] = [PostPath::Extended];

    pub fn rc_write_gather() {
        run_cases(
            "rc_write_gather",
            case(single(256, gather_write(false))),
            |c, s| check(c, &BOTH, s),
        );
    }

    pub fn rc_write_imm_gather() {
        run_cases(
            "rc_write_imm_gather",
            case(single(256, gather_write(true))),
            |c, s| check(c, &BOTH, s),
        );
    }

    pub fn rc_read_scatter() {
        run_cases("rc_read_scatter", case(single(256, read())), |c, s| {
            check(c, &BOTH, s)
        });
    }

    pub fn rc_write_inline() {
        let wrs = max_inline(RC_MAX_INLINE).prop_flat_map(|max| single(max, inline_write(max)));
        run_cases("rc_write_inline", case(wrs), |c, s| check(c, &BOTH, s));
    }

    /// Inline payloads 1..=64 bytes over `max_inline`: ours refuses to write
    /// (`InlineTooLong`, ring untouched), the provider refuses to post (ENOMEM, nothing
    /// rung, counter unchanged), on both paths.
    pub fn rc_inline_over_limit() {
        let wrs = (0u32..=RC_MAX_INLINE - 64).prop_flat_map(|max| {
            (
                Just(max),
                1u32..=64,
                any::<u64>(),
                any::<u32>(),
                flags(),
                proptest::collection::vec(any::<u8>(), (max + 64) as usize),
            )
        });
        let strategy = (
            0u32..=Qpn::MAX,
            0u32..=MAX_RING_LOG2,
            at(),
            any::<u8>(),
            wrs,
        );
        run_cases(
            "rc_inline_over_limit",
            strategy,
            |(qpn, log2, at, prefill, (max, over, addr, rkey, f, bytes)), stats| {
                let len = (max + over) as usize;
                let w = wr(
                    Op::Write {
                        remote_addr: addr,
                        rkey,
                    },
                    f,
                    Payload::Inline(vec![bytes[..len].to_vec()]),
                );
                let wqe = RdmaWrite::new(RemoteAddress::new(addr, RKey(rkey)))
                    .inline(&bytes[..len])
                    .build()
                    .map_err(fail)?;
                let ring = (1u32 << log2).max(wqe.wqebbs().next_power_of_two());
                let start = at.resolve(ring);
                let mut ours = OurRing::new(ring, prefill, qpn, max, start);
                prop_assert_eq!(
                    ours.put(&wqe).map(|_| ()),
                    Err(WqeError::InlineTooLong {
                        len,
                        max: max as usize
                    })
                );
                prop_assert!(ours.a.iter().all(|&b| b == prefill), "ring untouched");
                let mut qp = OracleQp::new(QpConfig {
                    sq_wqebbs: ring,
                    max_inline_data: max,
                    ..QpConfig::rc(qpn)
                })
                .map_err(fail)?;
                for path in BOTH {
                    let p = qp
                        .post(path, start, std::slice::from_ref(&w), prefill)
                        .map_err(fail)?;
                    prop_assert_eq!(p.failure.map(|f| f.errno), Some(ENOMEM), "{:?}", path);
                    prop_assert_eq!(
                        (p.cur_post, p.wqes_rung, p.dbrec, p.doorbell),
                        (start, 0, None, None)
                    );
                    bump(&stats.posts, 1);
                    bump(&stats.refusals, 1);
                }
                Ok(())
            },
        );
    }

    pub fn rc_compare_swap() {
        run_cases(
            "rc_compare_swap",
            case(single(256, compare_swap())),
            |c, s| check(c, &BOTH, s),
        );
    }

    pub fn rc_fetch_add() {
        run_cases("rc_fetch_add", case(single(256, fetch_add())), |c, s| {
            check(c, &BOTH, s)
        });
    }

    /// 1..=4 WRs of mixed RC shapes in one post: one doorbell, the last WQE's.
    pub fn rc_chain() {
        let one = prop_oneof![
            gather_write(false),
            gather_write(true),
            read(),
            inline_write(200),
            compare_swap(),
            fetch_add(),
        ];
        let wrs = proptest::collection::vec(one, 1..=4).prop_map(|v| (200u32, v));
        run_cases("rc_chain", case(wrs), |c, s| check(c, &BOTH, s));
    }

    /// DC WRITE (gather 1..=4 or inline up to the DS limit, with or without immediate)
    /// with the full AV, extended path.
    pub fn dc_write_full_av() {
        let wrs = max_inline(DC_MAX_INLINE).prop_flat_map(|max| {
            let w = prop_oneof![gather_write(false), gather_write(true), inline_write(max)];
            single(max, with_dc(w))
        });
        run_cases("dc_write_full_av", case(wrs), |c, s| check(c, &EXTENDED, s));
    }

    pub fn dc_read_full_av() {
        run_cases(
            "dc_read_full_av",
            case(single(256, with_dc(read()))),
            |c, s| check(c, &EXTENDED, s),
        );
    }

    pub fn dc_atomics_full_av() {
        let w = with_dc(prop_oneof![compare_swap(), fetch_add()]);
        run_cases("dc_atomics_full_av", case(single(256, w)), |c, s| {
            check(c, &EXTENDED, s)
        });
    }

    /// The compact AV (IB, no GRH) is the full AV's first 16 bytes with the extended bit
    /// cleared, checked against the provider's AV (from `mlx5_create_ah` +
    /// `mlx5dv_wr_set_dc_addr`); our compact-AV DC WRITE is the provider's full-AV WQE with
    /// the AV's last 32 bytes removed, DS two less.
    pub fn dc_compact_av_is_full_prefix() {
        let strategy = (
            0u32..=Qpn::MAX,
            0u32..=Qpn::MAX,
            any::<u64>(),
            ib_address(false),
            gather_write(false),
            any::<u16>(),
        );
        run_cases(
            "dc_compact_av_is_full_prefix",
            strategy,
            |(qpn, dctn, dc_key, ib, mut w, index), _| {
                w.dc = Some(DcAddress {
                    dctn,
                    dc_key,
                    av: AddressVector::Ib(ib),
                });
                let mut qp = OracleQp::new(QpConfig {
                    sq_wqebbs: 4,
                    ..QpConfig::dci(qpn)
                })
                .map_err(fail)?;
                let start = u32::from(index);
                let p = qp
                    .post_extended(start, std::slice::from_ref(&w), 0)
                    .map_err(fail)?;
                let theirs = p.wqebbs(start, p.posted_wqebbs());
                let mask = p.written_wqebbs(start, p.posted_wqebbs());
                prop_assert!(mask[16..64].iter().all(|&m| m), "the whole AV is written");

                let compact = CompactAddressVector {
                    dct: dctn,
                    dc_key,
                    lid: ib.dlid,
                    sl: ib.sl,
                    static_rate: mlx5_rate(ib.static_rate),
                    source_path_bits: ib.src_path_bits,
                    force_loopback: false,
                }
                .encode()
                .map_err(fail)?;
                let mut prefix = theirs[16..32].to_vec();
                prefix[8] &= 0x7f; // the extended bit
                prop_assert_eq!(compact.segment().as_bytes(), &prefix[..]);
                let full = our_target(w.dc.as_ref().unwrap());
                prop_assert_eq!(full.segment().as_bytes(), &theirs[16..64]);
                prop_assert_eq!(
                    *compact.segment(),
                    CompactAddressVectorSegment::from_full(full.segment())
                );

                // a compact DC WQE: ctrl (DS - 2), compact AV, then the provider's raddr
                // and data segments
                let s = our_sges(&w);
                let remote = remote_of(&w.op);
                let f = control_flags(w.flags);
                let wqe = AnyWqe {
                    target: Some(compact.into()),
                    flags: f,
                    stream_id: 0,
                    op: AnyOperation::Write {
                        remote,
                        imm: None,
                        data: AnyData::Sges(&s),
                    },
                }
                .build()
                .map_err(fail)?;
                let mut ours = OurRing::new(4, 0, qpn, 256, start);
                let placed = ours.put(&wqe).map_err(fail)?;
                let our_bytes: Vec<u8> = (0..placed.wqebbs)
                    .flat_map(|k| {
                        let at = ((start + k) & 3) as usize * 64;
                        ours.a[at..at + 64].to_vec()
                    })
                    .collect();
                let full_ds = usize::from(theirs[7] & 0x3f);
                prop_assert_eq!(usize::from(placed.ds), full_ds - 2);
                prop_assert_eq!(&our_bytes[..7], &theirs[..7]);
                prop_assert_eq!(&our_bytes[8..12], &theirs[8..12]);
                prop_assert_eq!(&our_bytes[16..32], &prefix[..]);
                let body = 16 * (full_ds - 4);
                prop_assert_eq!(&our_bytes[32..32 + body], &theirs[64..64 + body]);
                Ok(())
            },
        );
    }
}
