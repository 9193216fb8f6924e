//! Level 2 differential tests of the completion side: batches of random 64-byte CQEs are
//! put in a fake CQ and polled by rdma-core's real `mlx5_poll_cq` (CQE version 0 and 1),
//! and each is parsed by ibgda's `parse_cqe(..).work_completion()`. Compared per CQE:
//! status, opcode (where the provider derives it from the CQE), byte_len, qp_num,
//! wc_flags, vendor_err, the immediate, src_qp, and the WQE counter (through the work
//! request id the provider looks up with it); per batch, how many CQEs software owns
//! (owner bit against the pass over the CQ, across laps) against
//! `Cqe64::is_software_owned`, and the consumer index after the poll.
//!
//! `ibgda::cq::WorkCompletion` has plain fields where the oracle's are `Option`: the
//! provider leaves some `ibv_wc` fields untouched (`None`), and ours are zero there by
//! contract. So a field the provider set is compared for equality, and a field it left
//! is checked to be zero (or `None` for the opcode) on our side. Deliberate differences:
//! for requester CQEs of NOP, UMR, SET_PSV and MMO the provider takes the opcode from its
//! own per-WQE table (`wr_data`), not from the CQE: ours is `None` there.
//!
//! Inputs the oracle refuses are not generated: inline-scatter bits (0x4/0x8 of `op_own`)
//! on opcodes 0..=4, and (CQE version 0) a nonzero SRQ number on responder CQEs.
//!
//! Each test prints `oracle: <name>: <n> cases, <m> CQEs compared ...`, counted.

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
    cqe_requester_success,
    cqe_errors,
    cqe_responder,
    cqe_ownership_across_laps,
);

#[cfg(ibgda_oracle)]
mod checks {
    use std::cell::{Cell, RefCell};
    use std::collections::BTreeSet;
    use std::fmt::Debug;
    use std::time::Instant;

    use ibgda::cq::{parse_cqe, Completion, Cqe64, Syndrome};
    use ibgda::wqe::{Opcode, Qpn};
    use ibgda_rdma_core_oracle::{
        verbs, CqeVersion, OracleQp, QpConfig, WorkCompletion, RQ_WRID_BASE, SQ_WRID_BASE,
    };
    use proptest::prelude::*;
    use proptest::sample::select;
    use proptest::test_runner::{Config, TestCaseError, TestRunner};
    use zerocopy::FromBytes;

    /// Batches per test (at least); each batch holds 1..=8 CQEs.
    const CASES: u32 = 2_000;
    /// The CQEs each test must have compared, at least.
    const MIN_CQES: u32 = 5_000;

    fn fail(msg: impl std::fmt::Display) -> TestCaseError {
        TestCaseError::fail(msg.to_string())
    }

    #[derive(Default)]
    struct Stats {
        cases: Cell<u32>,
        cqes: Cell<u32>,
        requester: Cell<u32>,
        errors: Cell<u32>,
        unknown_syndromes: Cell<u32>,
        responder: Cell<u32>,
        not_owned: Cell<u32>,
        lap_crossings: Cell<u32>,
        v1: Cell<u32>,
        /// Send opcodes (requester) and syndromes (errors) of the CQEs compared.
        send_opcodes: RefCell<BTreeSet<u8>>,
        syndromes: RefCell<BTreeSet<u8>>,
    }

    fn bump(c: &Cell<u32>) {
        c.set(c.get() + 1);
    }

    fn run_cases<S>(
        name: &str,
        cases: u32,
        strategy: S,
        test: impl Fn(S::Value, &Stats) -> Result<(), TestCaseError>,
    ) where
        S: Strategy,
        S::Value: Debug,
    {
        let stats = Stats::default();
        let start = Instant::now();
        let mut runner = TestRunner::new(Config {
            cases,
            failure_persistence: None,
            ..Config::default()
        });
        let result = runner.run(&strategy, |input| {
            test(input, &stats)?;
            bump(&stats.cases);
            Ok(())
        });
        if let Err(e) = result {
            panic!(
                "oracle: {name}: FAILED ({} cases passed first): {e}",
                stats.cases.get()
            );
        }
        assert!(
            stats.cases.get() >= cases,
            "oracle: {name}: too few cases ran"
        );
        assert!(
            stats.cqes.get() >= MIN_CQES,
            "oracle: {name}: only {} CQEs compared (want {MIN_CQES})",
            stats.cqes.get()
        );
        // every send opcode and syndrome ibgda knows was among the CQEs compared
        let opcodes = stats.send_opcodes.borrow();
        let syndromes = stats.syndromes.borrow();
        if stats.requester.get() > 0 {
            let missing: Vec<u8> = (0..=u8::MAX)
                .filter(|&b| Opcode::from_byte(b).is_some() && !opcodes.contains(&b))
                .collect();
            assert!(
                missing.is_empty(),
                "oracle: {name}: send opcodes never compared: {missing:02x?}"
            );
        }
        if stats.errors.get() > 0 {
            let missing: Vec<u8> = (0..=u8::MAX)
                .filter(|&b| Syndrome::from_byte(b).is_some() && !syndromes.contains(&b))
                .collect();
            assert!(
                missing.is_empty(),
                "oracle: {name}: syndromes never compared: {missing:02x?}"
            );
        }
        let mut line = format!(
            "oracle: {name}: {} cases, {} CQEs compared",
            stats.cases.get(),
            stats.cqes.get()
        );
        for (what, c) in [
            ("requester", &stats.requester),
            ("error", &stats.errors),
            ("with syndromes unknown to mlx5", &stats.unknown_syndromes),
            ("responder", &stats.responder),
            ("hardware-owned entries stopping a poll", &stats.not_owned),
            ("batches crossing a CQ lap", &stats.lap_crossings),
            ("batches with CQE version 1", &stats.v1),
        ] {
            if c.get() > 0 {
                line += &format!(", {} {what}", c.get());
            }
        }
        if !opcodes.is_empty() {
            line += &format!(
                ", {} distinct send opcode bytes (every known one)",
                opcodes.len()
            );
        }
        if !syndromes.is_empty() {
            line += &format!(
                ", {} distinct syndrome bytes (every known one)",
                syndromes.len()
            );
        }
        eprintln!("{line} ({:.2?})", start.elapsed());
    }

    // ---- random CQEs -----------------------------------------------------------------------

    #[derive(Clone, Copy, Debug)]
    enum Kind {
        /// Requester success for this send opcode byte.
        Requester(u8),
        /// Requester (13) or responder (14) error with this syndrome and vendor syndrome.
        Error {
            responder: bool,
            syndrome: u8,
            vendor: u8,
            format: u8,
        },
        /// Responder success, CQE opcode 1..=4.
        Responder(u8),
        /// Opcode 15: never software's.
        Invalid,
    }

    #[derive(Clone, Debug)]
    struct Spec {
        kind: Kind,
        /// The rest of the CQE: random.
        noise: [u8; 64],
        solicited: bool,
        /// Give the entry the wrong owner bit (hardware's).
        flip_owner: bool,
    }

    #[derive(Clone, Debug)]
    struct Batch {
        qpn: u32,
        cq_log2: u32,
        sq_log2: u32,
        rq_log2: u32,
        v1: bool,
        cons_index: u32,
        specs: Vec<Spec>,
        /// Polled with `ne = len + extra - 1` (so sometimes fewer than available).
        extra: usize,
    }

    /// Every send opcode ibgda knows, and any byte at all.
    fn send_opcode() -> impl Strategy<Value = u8> {
        let known: Vec<u8> = (0..=u8::MAX)
            .filter(|&b| Opcode::from_byte(b).is_some())
            .collect();
        prop_oneof![4 => select(known), 1 => any::<u8>()]
    }

    fn syndrome() -> impl Strategy<Value = u8> {
        let known: Vec<u8> = (0..=u8::MAX)
            .filter(|&b| Syndrome::from_byte(b).is_some())
            .collect();
        prop_oneof![3 => select(known), 1 => any::<u8>()]
    }

    fn vendor() -> impl Strategy<Value = u8> {
        prop_oneof![Just(0u8), Just(0x93), any::<u8>()]
    }

    fn error_kind() -> impl Strategy<Value = Kind> {
        (any::<bool>(), syndrome(), vendor(), 0u8..4).prop_map(
            |(responder, syndrome, vendor, format)| Kind::Error {
                responder,
                syndrome,
                vendor,
                format,
            },
        )
    }

    fn spec(kind: impl Strategy<Value = Kind>, flip: f64) -> impl Strategy<Value = Spec> {
        (
            kind,
            any::<[u8; 64]>(),
            any::<bool>(),
            prop::bool::weighted(flip),
        )
            .prop_map(|(kind, noise, solicited, flip_owner)| Spec {
                kind,
                noise,
                solicited,
                flip_owner,
            })
    }

    /// The consumer index: anywhere, or just before a lap boundary of the CQ.
    fn batch(specs: impl Strategy<Value = Vec<Spec>>) -> impl Strategy<Value = Batch> {
        (
            0u32..=Qpn::MAX,
            3u32..=8,
            0u32..=10,
            0u32..=10,
            prop::bool::weighted(0.25),
            (any::<bool>(), any::<u32>(), 0u32..8),
            specs,
            0usize..3,
        )
            .prop_map(
                |(qpn, cq_log2, sq_log2, rq_log2, v1, (near_lap, raw, back), specs, extra)| {
                    let cqes = 1u32 << cq_log2;
                    let cons_index = if near_lap {
                        (raw & !(cqes - 1)).wrapping_sub(back)
                    } else {
                        raw
                    };
                    Batch {
                        qpn,
                        cq_log2,
                        sq_log2,
                        rq_log2,
                        v1,
                        cons_index,
                        specs,
                        extra,
                    }
                },
            )
    }

    /// The 64 bytes of CQE `spec` at CQ position `n` (free-running).
    fn raw_cqe(b: &Batch, user_index: Option<u32>, spec: &Spec, n: u32) -> [u8; 64] {
        let cqes = 1u32 << b.cq_log2;
        let mut c = spec.noise;
        let owner = u8::from(n & cqes != 0) ^ u8::from(spec.flip_owner);
        let se = u8::from(spec.solicited) << 1;
        let put32 =
            |c: &mut [u8; 64], at: usize, v: u32| c[at..at + 4].copy_from_slice(&v.to_be_bytes());
        // how the CQE names its QP: by QPN (v0), or by user index (v1; top byte noise)
        let name_qp = |c: &mut [u8; 64], resp: bool| {
            let noise = u32::from(c[32]) << 24;
            match user_index {
                Some(u) => put32(c, 32, noise | u),
                // a nonzero SRQ number would make a responder CQE an SRQ completion
                None if resp => put32(c, 32, 0),
                None => {}
            }
        };
        match spec.kind {
            Kind::Requester(op) => {
                put32(&mut c, 56, u32::from(op) << 24 | b.qpn);
                name_qp(&mut c, false);
                c[63] = se | owner;
            }
            Kind::Error {
                responder,
                syndrome,
                vendor,
                format,
            } => {
                let send_opcode = u32::from(c[56]);
                put32(&mut c, 56, send_opcode << 24 | b.qpn);
                name_qp(&mut c, responder);
                c[54] = vendor;
                c[55] = syndrome;
                c[63] = (if responder { 14 } else { 13 }) << 4 | format << 2 | se | owner;
            }
            Kind::Responder(op) => {
                let send_opcode = u32::from(c[56]);
                put32(&mut c, 56, send_opcode << 24 | b.qpn);
                name_qp(&mut c, true);
                c[63] = op << 4 | se | owner;
            }
            Kind::Invalid => c[63] = 0xf0 | se | owner,
        }
        c
    }

    // ---- the comparison ---------------------------------------------------------------------

    /// Send opcodes whose completion opcode the provider takes from its own table.
    const OPCODE_FROM_TABLE: [Opcode; 4] = [Opcode::Nop, Opcode::Umr, Opcode::SetPsv, Opcode::Mmo];

    fn check(b: Batch, stats: &Stats) -> Result<(), TestCaseError> {
        let cqes = 1u32 << b.cq_log2;
        let sq = 1u32 << b.sq_log2;
        let rq = 1u32 << b.rq_log2;
        let mut qp = OracleQp::new(QpConfig {
            cqes,
            sq_wqebbs: sq,
            rq_wqes: rq,
            cqe_version: if b.v1 { CqeVersion::V1 } else { CqeVersion::V0 },
            ..QpConfig::rc(b.qpn)
        })
        .map_err(fail)?;
        let user_index = if b.v1 {
            bump(&stats.v1);
            Some(qp.user_index().expect("v1 QPs have a user index"))
        } else {
            None
        };
        let specs = &b.specs[..b.specs.len().min(cqes as usize)];
        let raw: Vec<[u8; 64]> = specs
            .iter()
            .enumerate()
            .map(|(i, s)| raw_cqe(&b, user_index, s, b.cons_index.wrapping_add(i as u32)))
            .collect();
        if (b.cons_index & (cqes - 1)) + raw.len() as u32 > cqes {
            bump(&stats.lap_crossings);
        }

        // ours: how many entries are software's, in order
        let owned = raw
            .iter()
            .enumerate()
            .take_while(|(i, r)| {
                Cqe64::read_from_bytes(&r[..])
                    .unwrap()
                    .is_software_owned(b.cons_index.wrapping_add(*i as u32), cqes)
            })
            .count();
        if owned < raw.len() {
            bump(&stats.not_owned);
        }
        let ne = (raw.len() + b.extra).saturating_sub(1).max(1);
        let expect = owned.min(ne);

        let polled = qp.poll_cq(b.cons_index, &raw, ne).map_err(fail)?;
        prop_assert!(!polled.poll_error, "the provider failed the poll");
        prop_assert_eq!(
            polled.completions.len(),
            expect,
            "completions: ours says {} of {} entries are software's (ne {})",
            owned,
            raw.len(),
            ne
        );
        prop_assert_eq!(polled.cons_index, b.cons_index.wrapping_add(expect as u32));
        for (i, (theirs, r)) in polled.completions.iter().zip(&raw).enumerate() {
            compare_one(&b, sq, rq, theirs, r, stats)
                .map_err(|e| fail(format!("CQE {i} of the batch ({:02x?}): {e}", &r[..])))?;
            bump(&stats.cqes);
        }
        Ok(())
    }

    fn compare_one(
        b: &Batch,
        sq: u32,
        rq: u32,
        theirs: &WorkCompletion,
        raw: &[u8; 64],
        stats: &Stats,
    ) -> Result<(), TestCaseError> {
        let parsed = parse_cqe(raw).map_err(|e| fail(format!("ours rejects it: {e}")))?;
        let ours = parsed.work_completion();

        prop_assert_eq!(theirs.status, Some(ours.status as u32), "status");
        prop_assert_eq!(theirs.qp_num, Some(ours.qp_num), "qp_num");
        prop_assert_eq!(ours.qp_num, b.qpn);
        prop_assert_eq!(theirs.wc_flags, Some(ours.wc_flags), "wc_flags");
        // a field the provider left must be zero on our side
        let set_or_zero = |what: &str, t: Option<u32>, o: u32| -> Result<(), TestCaseError> {
            match t {
                Some(t) => prop_assert_eq!(t, o, "{}", what),
                None => prop_assert_eq!(o, 0, "{} (left by the provider)", what),
            }
            Ok(())
        };
        set_or_zero("byte_len", theirs.byte_len, ours.byte_len)?;
        set_or_zero("vendor_err", theirs.vendor_err, ours.vendor_err.into())?;
        set_or_zero("src_qp", theirs.src_qp, ours.src_qp)?;
        // (requester WRITE_IMM/SEND_IMM completions have the flag but no immediate)
        let responder = matches!(parsed, Completion::Responder(_));
        if responder && ours.wc_flags & verbs::WC_WITH_IMM != 0 {
            prop_assert_eq!(theirs.imm_data, Some(ours.imm_data), "imm_data");
            prop_assert_eq!(theirs.immediate(), Some(u32::from_be(ours.imm_data)));
        } else {
            set_or_zero("imm_data", theirs.imm_data, ours.imm_data)?;
        }
        match (ours.opcode, theirs.opcode) {
            (Some(o), t) => prop_assert_eq!(t, Some(o as u32), "opcode"),
            (None, None) => {}
            (None, Some(t)) => {
                let Completion::Requester(c) = parsed else {
                    return Err(fail(format!("opcode: the provider sets {t}, ours none")));
                };
                let op = Opcode::from_byte(c.send_opcode);
                prop_assert!(
                    op.is_some_and(|op| OPCODE_FROM_TABLE.contains(&op)),
                    "opcode: the provider sets {} from the CQE for send opcode {:#04x}, ours none",
                    t,
                    c.send_opcode
                );
            }
        }

        // the WQE counter, as the provider uses it to find the work request
        let (base, slots) = match parsed {
            Completion::Requester(_) => (SQ_WRID_BASE, sq),
            Completion::Error(e) if e.requester => (SQ_WRID_BASE, sq),
            _ => (RQ_WRID_BASE, rq),
        };
        let counter = parsed.wqe_counter();
        prop_assert_eq!(
            theirs.wr_id,
            Some(base + u64::from(counter & (slots - 1) as u16)),
            "wqe_counter"
        );
        prop_assert_eq!(parsed.qpn(), b.qpn);

        match parsed {
            Completion::Requester(c) => {
                bump(&stats.requester);
                stats.send_opcodes.borrow_mut().insert(c.send_opcode);
            }
            Completion::Responder(_) => bump(&stats.responder),
            Completion::Error(e) => {
                bump(&stats.errors);
                stats.syndromes.borrow_mut().insert(e.syndrome_byte);
                if e.syndrome.is_none() {
                    bump(&stats.unknown_syndromes);
                    prop_assert_eq!(theirs.status, Some(verbs::WC_GENERAL_ERR));
                }
                prop_assert_eq!(theirs.opcode, None, "error completions leave the opcode");
            }
        }
        Ok(())
    }

    fn specs(kind: impl Strategy<Value = Kind>, flip: f64) -> impl Strategy<Value = Vec<Spec>> {
        proptest::collection::vec(spec(kind, flip), 1..=8)
    }

    pub fn cqe_requester_success() {
        let kinds = send_opcode().prop_map(Kind::Requester);
        run_cases(
            "cqe_requester_success",
            CASES,
            batch(specs(kinds, 0.0)),
            check,
        );
    }

    pub fn cqe_errors() {
        run_cases("cqe_errors", CASES, batch(specs(error_kind(), 0.0)), check);
    }

    pub fn cqe_responder() {
        let kinds = (1u8..=4).prop_map(Kind::Responder);
        run_cases("cqe_responder", CASES, batch(specs(kinds, 0.0)), check);
    }

    /// Mixed CQEs, some with the wrong owner bit or the invalid opcode, around lap
    /// boundaries: the provider stops exactly where `is_software_owned` says.
    pub fn cqe_ownership_across_laps() {
        let kinds = prop_oneof![
            4 => send_opcode().prop_map(Kind::Requester),
            2 => error_kind(),
            1 => (1u8..=4).prop_map(Kind::Responder),
            1 => Just(Kind::Invalid),
        ];
        // polls stop early here: more batches for as many CQEs
        run_cases(
            "cqe_ownership_across_laps",
            2 * CASES,
            batch(specs(kinds, 0.1)),
            check,
        );
    }
}
