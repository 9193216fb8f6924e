//! The host send queue's post path against rdma-core's `mlx5_post_send`: a WQE posted on
//! a `QueuePair` (encoded straight into the ring's words, then the doorbell record and
//! the 8-byte doorbell) leaves exactly the bytes the provider writes for the same work
//! request at the same producer counter, on a ring of the same size without BlueFlame (as
//! in the host-post benchmark). Counters are chosen so that WQEs end exactly at the ring's
//! end, wrap to its start, and cross the 16-bit WQE index's wrap.
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

oracle_test!(queue_posts_write_the_providers_bytes_at_the_end_across_the_wrap_and_the_index_wrap);

#[cfg(ibgda_oracle)]
mod checks {
    use std::sync::Arc;

    use ibgda::cq::CqMode;
    use ibgda::queue::{
        CompletionQueueMemory, CompletionQueueNicAccess, QpConfig as OurQpConfig, QueuePair,
        Registered, SendQueueMemory,
    };
    use ibgda::wqe::{
        Atomic, LKey, LocalBuffer, Nop, Qpn, RKey, Rc, RdmaRead, RdmaWrite, RemoteAddress,
        RingSize, Sge, Wqe, WqeSpec,
    };
    use ibgda_rdma_core_oracle::{
        self as oracle, Op, OracleQp, Payload, QpConfig, SendFlags, SendWr,
    };

    const QPN: u32 = 0x00_0b_e0;
    const RING_WQEBBS: u32 = 16;
    const REMOTE: u64 = 0x7000_0000_1234_5678;
    const RKEY: u32 = 0x99aa_bbcc;
    const LKEY: u32 = 0x42;
    /// `sop_drop_qpn` opcode byte of a NOP's requester CQE.
    const CQE_OPCODE_NOP: u8 = 0x00;

    /// Local memory the WQEs name: covers everything.
    struct Everything;
    // SAFETY: the test plays the NIC (rdma-core's provider encodes, nothing executes), so
    // no memory is reached through the key.
    unsafe impl Registered for Everything {
        fn lkey(&self) -> LKey {
            LKey(LKEY)
        }
        fn covers(&self, _: u64, _: u64) -> bool {
            true
        }
    }

    /// Our queue pair, with the NIC's access to its collapsed CQ (the test plays the NIC).
    struct Ours {
        qp: QueuePair<Rc>,
        nic_cq: CompletionQueueNicAccess,
    }

    impl Ours {
        fn new() -> Self {
            let sq =
                SendQueueMemory::allocate(RingSize::new(RING_WQEBBS as usize).unwrap()).unwrap();
            let cq = CompletionQueueMemory::allocate(1).unwrap();
            let config = OurQpConfig {
                cq_mode: CqMode::Collapsed,
                ..OurQpConfig::default()
            };
            let qp = QueuePair::new(Qpn::new(QPN).unwrap(), sq, cq, config).unwrap();
            // SAFETY: this test is the only NIC of the queue pair and uses the capability
            // while `qp` lives; its CQEs complete signaled NOPs, which name no memory.
            let executor = ibgda::queue::Executor::new("the oracle test playing the NIC");
            let nic_cq =
                unsafe { qp.cq().memory().nic_access_unchecked(&executor) }.expect("no other NIC");
            Self { qp, nic_cq }
        }

        /// Completes the WQE starting at `index` (writes its requester CQE) and polls it.
        fn complete(&mut self, index: u64, opcode: u8) {
            let mut cqe = [0u8; 64];
            cqe[56..60].copy_from_slice(&(u32::from(opcode) << 24 | QPN).to_be_bytes());
            cqe[60..62].copy_from_slice(&(index as u16).to_be_bytes());
            self.nic_cq.write_cqe(0, &cqe);
            assert!(self.qp.poll().unwrap().is_some(), "CQE for {index}");
        }

        /// Posts and completes signaled NOPs until the producer counter is `target`.
        fn advance_to(&mut self, target: u64) {
            let nop = Nop::<Rc>::new().signaled().build().unwrap();
            while self.qp.sq().producer() < target {
                let at = self.qp.sq().producer();
                self.qp.post(&nop, &[]).unwrap();
                self.complete(at, CQE_OPCODE_NOP);
            }
            assert!(self.qp.sq().is_idle());
        }
    }

    /// Posts `wqe` on our queue at counter `at` and `wr` through the provider at the same
    /// counter, and compares every ring byte the provider wrote, the doorbell record and
    /// the doorbell; our post changes no byte the provider leaves alone.
    fn compare<W: WqeSpec<Transport = Rc>>(
        ours: &mut Ours,
        theirs: &mut OracleQp,
        at: u64,
        wqe: &Wqe<W>,
        wr: SendWr,
    ) -> Placement {
        ours.advance_to(at);
        let before = ours.qp.sq().memory().ring_bytes();
        let registrations: [Arc<dyn Registered>; 1] = [Arc::new(Everything)];
        let ticket = ours.qp.post(wqe, &registrations).unwrap();
        let after = ours.qp.sq().memory().ring_bytes();
        let posted = theirs.post_classic(at as u32, &[wr], 0xa5).unwrap();
        assert!(posted.failure.is_none(), "{:?}", posted.failure);
        assert_eq!(
            u64::from(posted.cur_post),
            ticket.end() & 0xffff_ffff,
            "counter {at}"
        );
        // The WQE's DS octowords, from its slot, wrapping at the ring's end.
        let ring_bytes = after.len();
        let start = (at % u64::from(RING_WQEBBS)) as usize * 64;
        let in_wqe = |i: usize| (i + ring_bytes - start) % ring_bytes < usize::from(wqe.ds()) * 16;
        for (i, &written) in posted.written.iter().enumerate() {
            let place = format!(
                "counter {at}: ring byte {i} (slot {}, byte {})",
                i / 64,
                i % 64
            );
            if written {
                assert!(in_wqe(i), "{place}: the provider wrote outside the WQE");
                assert_eq!(after[i], posted.ring[i], "{place}");
            } else if in_wqe(i) {
                // The zero padding after an inline payload, which the provider skips.
                assert_eq!(after[i], 0, "{place}: padding");
            } else {
                assert_eq!(after[i], before[i], "{place}: not the WQE's");
            }
        }
        let dbrec =
            u32::from_be_bytes(ours.qp.sq().memory().dbrec_bytes()[4..].try_into().unwrap());
        assert_eq!(posted.dbrec, Some(dbrec), "counter {at}");
        assert_eq!(
            posted.doorbell,
            ours.qp.sq().memory().doorbell_bytes(),
            "counter {at}"
        );
        // Retire it so the next case has the whole ring.
        ours.complete(at, wqe.opcode().byte());
        let (slot, wqebbs) = (at % u64::from(RING_WQEBBS), u64::from(wqe.wqebbs()));
        Placement {
            ends_at_ring_end: slot + wqebbs == u64::from(RING_WQEBBS),
            wraps: slot + wqebbs > u64::from(RING_WQEBBS),
            crosses_index_wrap: (at & 0xffff) + wqebbs > 1 << 16,
        }
    }

    /// Where a compared WQE lay.
    struct Placement {
        ends_at_ring_end: bool,
        wraps: bool,
        crosses_index_wrap: bool,
    }

    fn inline_wr(payload: &[u8]) -> SendWr {
        SendWr {
            flags: SendFlags::SIGNALED,
            payload: Payload::Inline(vec![payload.to_vec()]),
            ..SendWr::new(
                1,
                Op::Write {
                    remote_addr: REMOTE,
                    rkey: RKEY,
                },
                oracle::Sge {
                    addr: 0,
                    len: 0,
                    lkey: 0,
                },
            )
        }
    }

    pub fn queue_posts_write_the_providers_bytes_at_the_end_across_the_wrap_and_the_index_wrap() {
        let mut ours = Ours::new();
        let mut theirs = OracleQp::new(QpConfig {
            sq_wqebbs: RING_WQEBBS,
            bf_buf_size: 0,
            ..QpConfig::rc(QPN)
        })
        .unwrap();
        let remote = RemoteAddress::new(REMOTE, RKey(RKEY));
        let payload: Vec<u8> = (0..=255u8).map(|b| b.wrapping_mul(97) ^ 0x3c).collect();
        let ring = u64::from(RING_WQEBBS);
        // Counters: the ring's first lap (a WQE ending at its end, then wrapping), and the
        // same around the 16-bit index wrap.
        let mut counters = Vec::new();
        for base in [0, (1 << 16) - 2 * ring] {
            counters.extend(base..base + 3 * ring + 5);
        }
        let (mut ends_at_ring_end, mut wraps, mut crosses_index_wrap) = (false, false, false);
        for &counter in &counters {
            // Past a counter that a multi-block WQE covered, the next one free.
            let at = counter.max(ours.qp.sq().producer());
            let k = (at % 7) as usize;
            // The last index below the 16-bit wrap gets a 4-block WQE, which crosses it.
            let case = if at & 0xffff == 0xffff { 1 } else { at % 5 };
            let placed = match case {
                // The benchmark's request: an 8-byte inline WRITE.
                0 => {
                    let bytes = &payload[k..k + 8];
                    let wqe = RdmaWrite::new(remote)
                        .inline(bytes)
                        .signaled()
                        .build()
                        .unwrap();
                    compare(&mut ours, &mut theirs, at, &wqe, inline_wr(bytes))
                }
                // Inline payloads of 1 to 4 blocks, every split of the last octoword.
                1 => {
                    let len = if at & 0xffff == 0xffff {
                        200
                    } else {
                        [1, 12, 13, 28, 29, 44, 60, 61, 77, 200][(at as usize / 5) % 10]
                    };
                    let bytes = &payload[k..k + len];
                    let wqe = RdmaWrite::new(remote)
                        .inline(bytes)
                        .signaled()
                        .build()
                        .unwrap();
                    compare(&mut ours, &mut theirs, at, &wqe, inline_wr(bytes))
                }
                // Two gather entries (2 blocks), with an immediate.
                2 => {
                    let sges = [
                        Sge::new(0x1000 + at, 0x40, LKey(LKEY)).unwrap(),
                        Sge::new(0x9000, 0x1234, LKey(LKEY)).unwrap(),
                    ];
                    let wqe = RdmaWrite::new(remote)
                        .gather(sges)
                        .immediate(0xfeed_0000 | at as u32)
                        .signaled()
                        .build()
                        .unwrap();
                    let wr = SendWr {
                        flags: SendFlags::SIGNALED,
                        payload: Payload::Sges(
                            sges.iter()
                                .map(|s| oracle::Sge {
                                    addr: s.addr(),
                                    len: s.len(),
                                    lkey: s.lkey().0,
                                })
                                .collect(),
                        ),
                        ..SendWr::new(
                            2,
                            Op::WriteImm {
                                remote_addr: REMOTE,
                                rkey: RKEY,
                                imm: 0xfeed_0000 | at as u32,
                            },
                            oracle::Sge {
                                addr: 0,
                                len: 0,
                                lkey: 0,
                            },
                        )
                    };
                    compare(&mut ours, &mut theirs, at, &wqe, wr)
                }
                // A READ into one entry.
                3 => {
                    let sge = Sge::new(0x2000 + at, 0x80, LKey(LKEY)).unwrap();
                    let wqe = RdmaRead::new(remote).sge(sge).signaled().build().unwrap();
                    let wr = SendWr {
                        flags: SendFlags::SIGNALED,
                        ..SendWr::new(
                            3,
                            Op::Read {
                                remote_addr: REMOTE,
                                rkey: RKEY,
                            },
                            oracle::Sge {
                                addr: sge.addr(),
                                len: sge.len(),
                                lkey: LKEY,
                            },
                        )
                    };
                    compare(&mut ours, &mut theirs, at, &wqe, wr)
                }
                // A fetch-and-add (its atomic segment written as bytes).
                _ => {
                    let target = RemoteAddress::new(0x5000_0008, RKey(RKEY));
                    let result = LocalBuffer::new(0x3000 + 8 * at, LKey(LKEY));
                    let wqe = Atomic::fetch_add(target, result, 0x0102_0304_0506_0708 + at)
                        .signaled()
                        .build()
                        .unwrap();
                    let wr = SendWr {
                        flags: SendFlags::SIGNALED,
                        ..SendWr::new(
                            4,
                            Op::FetchAdd {
                                remote_addr: 0x5000_0008,
                                rkey: RKEY,
                                add: 0x0102_0304_0506_0708 + at,
                            },
                            oracle::Sge {
                                addr: result.addr,
                                len: 8,
                                lkey: LKEY,
                            },
                        )
                    };
                    compare(&mut ours, &mut theirs, at, &wqe, wr)
                }
            };
            ends_at_ring_end |= placed.ends_at_ring_end;
            wraps |= placed.wraps;
            crosses_index_wrap |= placed.crosses_index_wrap;
        }
        assert!(ends_at_ring_end, "no WQE ended at the ring's end");
        assert!(wraps, "no WQE wrapped");
        assert!(crosses_index_wrap, "no WQE crossed the 16-bit index wrap");
    }
}
