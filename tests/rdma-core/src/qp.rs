//! Level 2: the provider's post and poll paths on one fake QP.

use std::ffi::{c_char, CStr};
use std::ptr::NonNull;

use crate::ffi;
use crate::request::*;

/// `poll_cq` resolves a requester CQE with `wqe_counter` k to
/// `wr_id = SQ_WRID_BASE + (k mod sq_wqebbs)`: before each poll the provider's
/// `sq.wrid[slot]` table is set to `SQ_WRID_BASE + slot` (and `sq.wqe_head[slot]` to
/// `slot`, so `sq.tail` afterwards is `slot + 1` of the last requester CQE).
pub const SQ_WRID_BASE: u64 = 0x5351_0000_0000_0000;

/// As [`SQ_WRID_BASE`] for responder CQEs: `rq.wrid[slot] = RQ_WRID_BASE + slot`.
pub const RQ_WRID_BASE: u64 = 0x5251_0000_0000_0000;

/// Most SGEs or inline chunks in one WR the shim accepts.
pub const MAX_SGE: usize = 64;

/// Most WRs in one post the shim accepts.
pub const MAX_WRS: usize = 4096;

/// The BlueFlame register is filled with the ring's fill byte XOR this, so that a
/// register byte holds one of four distinguishable values (see [`OracleQp::post`]).
const BF_SALT: u8 = 0x5a;

/// One fake mlx5 QP (RC or DCI) with its own context, PD and CQ, driven through
/// rdma-core's real provider code.
///
/// Every call resets the state it uses, so calls are independent and cheap (a few
/// microseconds plus the ring copies): [`OracleQp::post`] refills the ring, the
/// doorbell record and the BlueFlame register, and sets `head = tail = 0` and
/// `cur_post` to the caller's value; [`OracleQp::poll_cq`] refills the CQ and the
/// work-request id tables. Reuse one `OracleQp` across proptest cases.
pub struct OracleQp {
    raw: NonNull<ffi::Oracle>,
    config: QpConfig,
    ring_bytes: usize,
    bf_bytes: usize,
}

// SAFETY: the C object is plain heap memory owned by this value; it has no thread
// affinity (no thread-locals, no locks held between calls: `need_lock` is 0 and the
// provider's `in_use` flags are released before each call returns), and every access
// goes through `&mut self`, so moving it to another thread is sound.
unsafe impl Send for OracleQp {}

impl std::fmt::Debug for OracleQp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OracleQp")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Drop for OracleQp {
    fn drop(&mut self) {
        // SAFETY: `raw` came from `ibgda_oracle_new` and is freed exactly once, here.
        unsafe { ffi::ibgda_oracle_free(self.raw.as_ptr()) }
    }
}

struct RawPost {
    result: ffi::PostResult,
    ring: Vec<u8>,
    dbrec: [u8; 8],
    bf: Vec<u8>,
}

struct RawPoll {
    result: ffi::PollResult,
    wcs: Vec<ffi::Wc>,
}

impl OracleQp {
    /// Builds the fake objects. Fails on an out-of-range configuration.
    pub fn new(config: QpConfig) -> Result<Self, OracleError> {
        let c = ffi::Config {
            transport: match config.transport {
                Transport::Rc => ffi::TRANSPORT_RC,
                Transport::Dci => ffi::TRANSPORT_DCI,
            },
            qpn: config.qpn,
            sq_wqebbs: config.sq_wqebbs,
            max_inline_data: config.max_inline_data,
            max_sge: config.max_sge,
            sq_sig_all: config.sq_sig_all.into(),
            rq_wqes: config.rq_wqes,
            cqes: config.cqes,
            cqe_version: match config.cqe_version {
                CqeVersion::V0 => 0,
                CqeVersion::V1 => 1,
            },
            bf_buf_size: config.bf_buf_size,
            prefer_bf: config.prefer_bf.into(),
            shut_up_bf: config.shut_up_bf.into(),
        };
        let mut err = [0 as c_char; 256];
        // SAFETY: `c` is a valid config; `err` is a writable buffer of the given length.
        let raw = unsafe { ffi::ibgda_oracle_new(&c, err.as_mut_ptr(), err.len()) };
        let Some(raw) = NonNull::new(raw) else {
            // SAFETY: on failure the shim wrote a NUL-terminated message into `err`
            // (vsnprintf always terminates; the buffer starts zeroed).
            let msg = unsafe { CStr::from_ptr(err.as_ptr()) };
            return Err(OracleError::Config(msg.to_string_lossy().into_owned()));
        };
        // SAFETY: `raw` is a live oracle object.
        let (ring_bytes, bf_bytes) = unsafe {
            (
                ffi::ibgda_oracle_ring_bytes(raw.as_ptr()),
                ffi::ibgda_oracle_bf_bytes(raw.as_ptr()),
            )
        };
        Ok(OracleQp {
            raw,
            config,
            ring_bytes,
            bf_bytes,
        })
    }

    /// The configuration it was built with.
    pub fn config(&self) -> &QpConfig {
        &self.config
    }

    /// With [`CqeVersion::V1`]: the user index CQEs must carry in `srqn_uidx` to
    /// name this QP (the provider's `mlx5_store_uidx` hands out 0 first).
    pub fn user_index(&self) -> Option<u32> {
        // SAFETY: `raw` is a live oracle object.
        let u = unsafe { ffi::ibgda_oracle_user_index(self.raw.as_ptr()) };
        (u != u32::MAX).then_some(u)
    }

    /// [`OracleQp::post`] on [`PostPath::Classic`].
    pub fn post_classic(
        &mut self,
        cur_post: u32,
        wrs: &[SendWr],
        prefill: u8,
    ) -> Result<Posted, OracleError> {
        self.post(PostPath::Classic, cur_post, wrs, prefill)
    }

    /// [`OracleQp::post`] on [`PostPath::Extended`].
    pub fn post_extended(
        &mut self,
        cur_post: u32,
        wrs: &[SendWr],
        prefill: u8,
    ) -> Result<Posted, OracleError> {
        self.post(PostPath::Extended, cur_post, wrs, prefill)
    }

    /// Posts `wrs` in one call (one doorbell) on `path`, with the producer counter at
    /// `cur_post` (any `u32`: the WQE index is its low 16 bits, the ring slot its low
    /// bits), on a ring and doorbell record filled with `prefill`.
    ///
    /// Runs the post twice, on memory filled with `prefill` and with `!prefill`, to
    /// tell which bytes the provider wrote ([`Posted::written`]); [`Posted::ring`] is
    /// the `prefill` run's. The BlueFlame register is filled with other bytes still,
    /// so that stores of stale ring bytes are told apart from no store
    /// ([`Posted::stale_doorbell`]).
    ///
    /// `Err` only when the oracle cannot run the request; the provider's own refusals
    /// are in [`Posted::failure`].
    pub fn post(
        &mut self,
        path: PostPath,
        cur_post: u32,
        wrs: &[SendWr],
        prefill: u8,
    ) -> Result<Posted, OracleError> {
        self.check_wrs(path, wrs)?;

        // Per-WR arrays first, so the pointers in `ffi_wrs` stay valid for the calls.
        let sges: Vec<Vec<ffi::Sge>> = wrs
            .iter()
            .map(|wr| match &wr.payload {
                Payload::Sges(s) => s
                    .iter()
                    .map(|s| ffi::Sge {
                        addr: s.addr,
                        length: s.len,
                        lkey: s.lkey,
                    })
                    .collect(),
                Payload::Inline(_) => Vec::new(),
            })
            .collect();
        let bufs: Vec<Vec<ffi::Buf>> = wrs
            .iter()
            .map(|wr| match &wr.payload {
                Payload::Inline(chunks) => chunks
                    .iter()
                    .map(|c| ffi::Buf {
                        addr: c.as_ptr(),
                        length: c.len(),
                    })
                    .collect(),
                Payload::Sges(_) => Vec::new(),
            })
            .collect();
        let ffi_wrs: Vec<ffi::Wr> = wrs
            .iter()
            .zip(&sges)
            .zip(&bufs)
            .map(|((wr, sges), bufs)| ffi_wr(wr, sges, bufs))
            .collect();
        let path = match path {
            PostPath::Classic => ffi::PATH_CLASSIC,
            PostPath::Extended => ffi::PATH_EXTENDED,
        };

        // Run A fills the ring with `prefill` and the BlueFlame register with
        // `prefill ^ BF_SALT`; run B with the complements. A ring byte the provider
        // wrote is equal in both runs. A register byte is equal in both runs when the
        // provider stored a value it computed, shows the ring's fill (p, !p) when it
        // stored a copy of a ring byte nobody wrote, and the register's fill otherwise.
        let a = self.raw_post(path, cur_post, &ffi_wrs, prefill, prefill ^ BF_SALT)?;
        let b = self.raw_post(path, cur_post, &ffi_wrs, !prefill, !prefill ^ BF_SALT)?;
        assert_eq!(
            a.result, b.result,
            "the provider behaved differently on two identical posts"
        );

        let written: Vec<bool> = a.ring.iter().zip(&b.ring).map(|(x, y)| x == y).collect();
        let same = |r: std::ops::Range<usize>| a.dbrec[r.clone()] == b.dbrec[r];
        let dbrec = same(4..8).then(|| u32::from_be_bytes(a.dbrec[4..8].try_into().unwrap()));
        let computed: Vec<bool> = a.bf.iter().zip(&b.bf).map(|(x, y)| x == y).collect();
        let stored: Vec<bool> =
            a.bf.iter()
                .zip(&b.bf)
                .zip(&computed)
                .map(|((&x, &y), &c)| c || (x == prefill && y == !prefill))
                .collect();
        let stored_len = stored.iter().rposition(|&s| s).map_or(0, |i| i + 1);
        assert!(
            stored[..stored_len].iter().all(|&s| s),
            "BlueFlame register stores are not a prefix"
        );
        let doorbell = (stored_len >= 8).then(|| a.bf[..8].try_into().unwrap());
        let bf_copy = (stored_len > 8).then(|| a.bf[..stored_len].to_vec());
        let r = a.result;
        Ok(Posted {
            ring: a.ring,
            written,
            cur_post_before: cur_post,
            cur_post: r.cur_post,
            wqes_rung: r.sq_head,
            dbrec,
            rcv_dbrec_written: same(0..4),
            doorbell,
            stale_doorbell: doorbell.is_some() && !computed[..8].iter().all(|&c| c),
            bf_copy,
            bf_offset: r.bf_offset,
            failure: (r.err != 0).then(|| PostFailure {
                errno: r.err,
                bad_wr: usize::try_from(r.bad_wr).ok(),
            }),
        })
    }

    /// Posts `wr` `count` times through the provider's `mlx5_post_send` (the classic
    /// path, one WR and one doorbell per call), after resetting the send queue, and
    /// frees the ring after every `retire_every` posts (at least 1) by moving the
    /// provider's `sq.tail` to `sq.head`, as a polled completion would (above
    /// `sq_wqebbs` the ring fills and the provider refuses with ENOMEM). Nothing is
    /// captured or reset between posts: this is the provider's post path alone, for
    /// measuring its rate. Returns the producer counter after the last post.
    ///
    /// `Err` for a request the oracle cannot run, a zero `retire_every`, or the
    /// provider's own refusal ([`OracleError::Provider`] with its errno).
    pub fn post_loop(
        &mut self,
        wr: &SendWr,
        count: u64,
        retire_every: u32,
    ) -> Result<u32, OracleError> {
        self.check_wrs(PostPath::Classic, std::slice::from_ref(wr))?;
        if retire_every == 0 {
            return Err(OracleError::Config("retire_every 0: at least 1".into()));
        }
        let sges: Vec<ffi::Sge> = match &wr.payload {
            Payload::Sges(s) => s
                .iter()
                .map(|s| ffi::Sge {
                    addr: s.addr,
                    length: s.len,
                    lkey: s.lkey,
                })
                .collect(),
            Payload::Inline(_) => Vec::new(),
        };
        let bufs: Vec<ffi::Buf> = match &wr.payload {
            Payload::Inline(chunks) => chunks
                .iter()
                .map(|c| ffi::Buf {
                    addr: c.as_ptr(),
                    length: c.len(),
                })
                .collect(),
            Payload::Sges(_) => Vec::new(),
        };
        let raw_wr = ffi_wr(wr, &sges, &bufs);
        let mut result = ffi::PostResult::default();
        // SAFETY: `raw` is live and exclusively borrowed; `raw_wr`'s SGE and inline
        // pointers point into `sges`, `bufs` and `wr`, alive for the call, with the
        // counts given; `result` is writable.
        let rc = unsafe {
            ffi::ibgda_oracle_post_loop(
                self.raw.as_ptr(),
                &raw_wr,
                count,
                retire_every,
                &mut result,
            )
        };
        if rc != 0 {
            return Err(OracleError::Shim(-rc));
        }
        if result.err != 0 {
            return Err(OracleError::Provider(result.err));
        }
        Ok(result.cur_post)
    }

    fn check_wrs(&self, path: PostPath, wrs: &[SendWr]) -> Result<(), OracleError> {
        if wrs.len() > MAX_WRS {
            return Err(OracleError::TooLarge(format!(
                "{} WRs (at most {MAX_WRS})",
                wrs.len()
            )));
        }
        let dci = self.config.transport == Transport::Dci;
        if dci && path == PostPath::Classic {
            return Err(OracleError::ClassicDc);
        }
        for (i, wr) in wrs.iter().enumerate() {
            if wr.dc.is_some() != dci {
                return Err(OracleError::DcMismatch { wr: i });
            }
            let n = match &wr.payload {
                Payload::Sges(s) => s.len(),
                Payload::Inline(c) => {
                    if c.iter().any(|c| u32::try_from(c.len()).is_err()) {
                        return Err(OracleError::TooLarge(format!(
                            "WR {i}: inline chunk over 4 GiB"
                        )));
                    }
                    c.len()
                }
            };
            if n > MAX_SGE {
                return Err(OracleError::TooLarge(format!(
                    "WR {i}: {n} SGEs/chunks (at most {MAX_SGE})"
                )));
            }
        }
        Ok(())
    }

    fn raw_post(
        &mut self,
        path: u32,
        cur_post: u32,
        wrs: &[ffi::Wr],
        prefill: u8,
        bf_prefill: u8,
    ) -> Result<RawPost, OracleError> {
        let mut ring = vec![0u8; self.ring_bytes];
        let mut dbrec = [0u8; 8];
        let mut bf = vec![0u8; self.bf_bytes];
        let cap = ffi::Capture {
            ring: ring.as_mut_ptr(),
            dbrec: dbrec.as_mut_ptr(),
            bf: bf.as_mut_ptr(),
        };
        let mut result = ffi::PostResult::default();
        let nwr = u32::try_from(wrs.len()).expect("checked against MAX_WRS");
        // SAFETY: `raw` is live and exclusively borrowed; `wrs` holds `nwr` WRs whose SGE,
        // inline and buffer pointers point into vectors the caller keeps alive for this
        // call, with the counts given; `cap` points to buffers of the sizes the shim
        // reported for this object (ring_bytes, 8, bf_bytes); `result` is writable.
        let rc = unsafe {
            ffi::ibgda_oracle_post(
                self.raw.as_ptr(),
                path,
                cur_post,
                wrs.as_ptr(),
                nwr,
                prefill,
                bf_prefill,
                &cap,
                &mut result,
            )
        };
        if rc != 0 {
            return Err(OracleError::Shim(-rc));
        }
        Ok(RawPost {
            result,
            ring,
            dbrec,
            bf,
        })
    }

    /// Puts `cqes[i]` into CQ entry `(cons_index + i) mod cqes` (every other entry is
    /// 0xff: opcode INVALID), sets the consumer index to `cons_index` and calls the
    /// provider's `mlx5_poll_cq` (or `mlx5_poll_cq_v1`) for up to `ne` completions.
    ///
    /// Ownership is the provider's rule: entry n is the software's when its owner bit
    /// equals `(n / cqes) & 1`, so the caller sets each CQE's owner bit from
    /// `cons_index + i`. Work-request ids resolve through the tables described at
    /// [`SQ_WRID_BASE`] and [`RQ_WRID_BASE`].
    ///
    /// Polls twice (into arrays filled with 0x00 and with 0xff) to tell which
    /// `ibv_wc` fields the provider stored.
    pub fn poll_cq(
        &mut self,
        cons_index: u32,
        cqes: &[[u8; 64]],
        ne: usize,
    ) -> Result<Polled, OracleError> {
        if cqes.len() > self.config.cqes as usize {
            return Err(OracleError::TooManyCqes);
        }
        if let Some(index) = cqes
            .iter()
            .position(|c| c[63] >> 4 <= 4 && c[63] & 0x0c != 0)
        {
            return Err(OracleError::ScatterCqe { index });
        }
        if ne > 1 << 16 {
            return Err(OracleError::TooLarge(format!("ne = {ne} (at most 65536)")));
        }
        let a = self.raw_poll(cons_index, cqes, ne, 0x00)?;
        let b = self.raw_poll(cons_index, cqes, ne, 0xff)?;
        let key = |r: &ffi::PollResult| (r.ret, r.cons_index, r.sq_tail, r.rq_tail);
        assert_eq!(
            key(&a.result),
            key(&b.result),
            "the provider behaved differently on two identical polls"
        );

        let r = a.result;
        let poll_error = r.ret < 0;
        let count = if poll_error {
            // the failing CQE was consumed too, and the entries before it are lost
            r.cons_index.wrapping_sub(cons_index).saturating_sub(1) as usize
        } else {
            r.ret as usize
        }
        .min(ne);
        let completions = a.wcs[..count]
            .iter()
            .zip(&b.wcs[..count])
            .map(|(x, y)| merge_wc(x, y))
            .collect();
        // Each run prefilled the doorbell record differently: the words equal in both
        // runs are exactly the stored ones.
        let same_db = |rg: std::ops::Range<usize>| r.cq_dbrec[rg.clone()] == b.result.cq_dbrec[rg];
        Ok(Polled {
            completions,
            poll_error,
            cons_index: r.cons_index,
            ci_dbrec: same_db(0..4)
                .then(|| u32::from_be_bytes(r.cq_dbrec[0..4].try_into().unwrap())),
            arm_dbrec_written: same_db(4..8),
            sq_tail: r.sq_tail,
            rq_tail: r.rq_tail,
        })
    }

    fn raw_poll(
        &mut self,
        cons_index: u32,
        cqes: &[[u8; 64]],
        ne: usize,
        prefill: u8,
    ) -> Result<RawPoll, OracleError> {
        let mut wcs = vec![ffi::Wc::default(); ne];
        let mut result = ffi::PollResult::default();
        let ncqes = u32::try_from(cqes.len()).expect("checked against the CQ size");
        let max_wc = u32::try_from(ne).expect("checked against 65536");
        // SAFETY: `raw` is live and exclusively borrowed; `cqes` is `ncqes * 64`
        // contiguous readable bytes; `wcs` has room for `max_wc` entries; `result` is
        // writable.
        let rc = unsafe {
            ffi::ibgda_oracle_poll(
                self.raw.as_ptr(),
                cons_index,
                cqes.as_ptr().cast::<u8>(),
                ncqes,
                SQ_WRID_BASE,
                RQ_WRID_BASE,
                prefill,
                wcs.as_mut_ptr(),
                max_wc,
                &mut result,
            )
        };
        if rc != 0 {
            return Err(OracleError::Shim(-rc));
        }
        Ok(RawPoll { result, wcs })
    }
}

fn ffi_wr(wr: &SendWr, sges: &[ffi::Sge], bufs: &[ffi::Buf]) -> ffi::Wr {
    let (opcode, remote_addr, rkey, imm, compare_add, swap) = match wr.op {
        Op::Write { remote_addr, rkey } => (ffi::OP_RDMA_WRITE, remote_addr, rkey, 0, 0, 0),
        Op::WriteImm {
            remote_addr,
            rkey,
            imm,
        } => (ffi::OP_RDMA_WRITE_WITH_IMM, remote_addr, rkey, imm, 0, 0),
        Op::Read { remote_addr, rkey } => (ffi::OP_RDMA_READ, remote_addr, rkey, 0, 0, 0),
        Op::CompareSwap {
            remote_addr,
            rkey,
            compare,
            swap,
        } => (
            ffi::OP_ATOMIC_CMP_AND_SWP,
            remote_addr,
            rkey,
            0,
            compare,
            swap,
        ),
        Op::FetchAdd {
            remote_addr,
            rkey,
            add,
        } => (ffi::OP_ATOMIC_FETCH_AND_ADD, remote_addr, rkey, 0, add, 0),
    };
    let flags = (if wr.flags.signaled {
        ffi::FLAG_SIGNALED
    } else {
        0
    }) | (if wr.flags.fence { ffi::FLAG_FENCE } else { 0 })
        | (if wr.flags.solicited {
            ffi::FLAG_SOLICITED
        } else {
            0
        });
    let mut dc = ffi::Dc::default();
    if let Some(t) = &wr.dc {
        dc.dctn = t.dctn;
        dc.dc_key = t.dc_key;
        match t.av {
            AddressVector::Ib(ib) => {
                dc.av_kind = ffi::AV_IB;
                dc.dlid = ib.dlid;
                dc.sl = ib.sl;
                dc.src_path_bits = ib.src_path_bits;
                dc.static_rate = ib.static_rate;
                if let Some(g) = ib.grh {
                    dc.is_global = 1;
                    dc.dgid = g.dgid;
                    dc.flow_label = g.flow_label;
                    dc.sgid_index = g.sgid_index;
                    dc.hop_limit = g.hop_limit;
                    dc.traffic_class = g.traffic_class;
                }
            }
            AddressVector::Raw(raw) => {
                dc.av_kind = ffi::AV_RAW;
                dc.raw = raw;
            }
        }
    }
    let is_inline = matches!(wr.payload, Payload::Inline(_));
    ffi::Wr {
        wr_id: wr.wr_id,
        opcode,
        flags,
        remote_addr,
        rkey,
        imm,
        compare_add,
        swap,
        sges: sges.as_ptr(),
        num_sge: sges.len() as u32,
        is_inline: is_inline.into(),
        inl: bufs.as_ptr(),
        num_inl: bufs.len() as u32,
        pad0: 0,
        dc,
    }
}

fn merge_wc(a: &ffi::Wc, b: &ffi::Wc) -> WorkCompletion {
    fn same<T: PartialEq + Copy>(x: T, y: T) -> Option<T> {
        (x == y).then_some(x)
    }
    WorkCompletion {
        wr_id: same(a.wr_id, b.wr_id),
        status: same(a.status, b.status),
        opcode: same(a.opcode, b.opcode),
        vendor_err: same(a.vendor_err, b.vendor_err),
        byte_len: same(a.byte_len, b.byte_len),
        imm_data: same(a.imm_data, b.imm_data),
        qp_num: same(a.qp_num, b.qp_num),
        src_qp: same(a.src_qp, b.src_qp),
        wc_flags: same(a.wc_flags, b.wc_flags),
        pkey_index: same(a.pkey_index, b.pkey_index),
        slid: same(a.slid, b.slid),
        sl: same(a.sl, b.sl),
        dlid_path_bits: same(a.dlid_path_bits, b.dlid_path_bits),
    }
}
