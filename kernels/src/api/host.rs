//! The host build of the device API's planning and the device library's WQE builders
//! (`cuda/api_host.cpp`, compiled by `build.rs`): one call of an operation built into a
//! host ring, for the tests that compare every operation's WQEs with the Rust builders'
//! and execute them on the software NICs, without a GPU.

use ibgda::nic::{Backend, DeviceWindow, DeviceWindowPeer, MemoryRegion, Window};
use ibgda::queue::DeviceQueueDescriptor;
use ibgda::wqe::{
    Atomic, CompletionMode, LocalBuffer, Qpn, RdmaRead, RdmaWrite, RingSize, SendRing, Wqe,
    WqeIndex, WqeLimits, WqeSpec, MAX_SEGMENT_BYTES, WQEBB_BYTES,
};

use super::layouts::{ApiCall, ApiOp, DeviceComm, DeviceStatus, PUT_INLINE_MAX};

#[cfg(not(ibgda_no_host_engine))]
extern "C" {
    fn ibgda_api_host_build(
        comm: *const DeviceComm,
        windows: *const DeviceWindow,
        n_windows: u32,
        call: *const ApiCall,
        queue: *const DeviceQueueDescriptor,
        start: u64,
        wqebbs: *mut u32,
    ) -> i32;
}

/// Stand-in when the host build was left out (`IBGDA_SKIP_HOST_ENGINE=1`): every call
/// fails, so the tests fail rather than pass.
///
/// # Safety
///
/// None needed (it touches nothing); `unsafe` only to match the real declaration.
#[cfg(ibgda_no_host_engine)]
unsafe fn ibgda_api_host_build(
    _: *const DeviceComm,
    _: *const DeviceWindow,
    _: u32,
    _: *const ApiCall,
    _: *const DeviceQueueDescriptor,
    _: u64,
    _: *mut u32,
) -> i32 {
    i32::MIN
}

/// A send ring in host memory with the descriptor fields the builders read (QPN, size,
/// signal interval), 64-byte aligned.
#[derive(Debug)]
pub struct HostRing {
    blocks: Vec<[u128; 4]>,
    qpn: Qpn,
    size: RingSize,
    signal_interval: u32,
}

impl HostRing {
    /// A ring of `size` WQEBBs for queue `qpn`, a WQE crossing a multiple of
    /// `signal_interval` (at least 1) WQEBBs signaled, every byte `fill`.
    pub fn new(qpn: Qpn, size: RingSize, signal_interval: u32, fill: u8) -> Self {
        let mut ring = Self {
            blocks: vec![[0; 4]; size.wqebbs() as usize],
            qpn,
            size,
            signal_interval: signal_interval.max(1),
        };
        ring.fill(fill);
        ring
    }

    /// Sets every byte to `byte`.
    pub fn fill(&mut self, byte: u8) {
        let word = u128::from_ne_bytes([byte; 16]);
        self.blocks.iter_mut().for_each(|b| *b = [word; 4]);
    }

    /// The ring's bytes.
    pub fn bytes(&self) -> Vec<u8> {
        self.blocks
            .iter()
            .flat_map(|b| b.iter().flat_map(|w| w.to_ne_bytes()))
            .collect()
    }

    /// The ring's size.
    pub fn size(&self) -> RingSize {
        self.size
    }

    fn descriptor(&mut self) -> DeviceQueueDescriptor {
        DeviceQueueDescriptor {
            sq_ring: self.blocks.as_mut_ptr() as u64,
            qpn: self.qpn.get(),
            log_sq_wqebbs: self.size.wqebbs().trailing_zeros(),
            max_inline: PUT_INLINE_MAX as u32,
            signal_interval: self.signal_interval,
            ..Default::default()
        }
    }
}

const _: () = assert!(core::mem::size_of::<[u128; 4]>() == WQEBB_BYTES);

/// A communicator's fields the planning reads: the scratch word for unfetched results and
/// the inline limit.
#[derive(Clone, Copy, Debug)]
pub struct HostComm {
    comm: DeviceComm,
}

impl HostComm {
    /// `n_peers` peers, `rank`'s view, results nobody reads to the first 8 bytes of
    /// `scratch`, puts of at most `inline_max` bytes inline.
    pub fn new<B: Backend>(
        n_peers: u32,
        rank: u32,
        scratch: &MemoryRegion<B>,
        inline_max: u32,
    ) -> Self {
        Self {
            comm: DeviceComm {
                scratch: scratch.addr(),
                scratch_lkey: scratch.lkey().0,
                n_peers,
                rank,
                inline_max: inline_max.min(PUT_INLINE_MAX as u32),
                doorbell_batch: 1,
                wait_ns: 1,
                ..Default::default()
            },
        }
    }

    /// The descriptor.
    pub fn device(&self) -> &DeviceComm {
        &self.comm
    }
}

/// Plans `call` over `windows` with the device API's own code built for the host and
/// builds its WQEs into `ring` from WQEBB counter `start` on; returns the WQEBBs built, or
/// the status the device would return (no byte of the ring changed).
///
/// # Safety
///
/// Every window's local side must be host memory of this process, readable for its
/// whole length and not written while the call runs (an inline put copies its payload
/// from there; nothing else of any window is dereferenced: remote addresses, keys and
/// result addresses are only encoded).
pub unsafe fn host_build(
    comm: &HostComm,
    windows: &[&Window],
    call: &ApiCall,
    ring: &mut HostRing,
    start: u64,
) -> Result<u32, DeviceStatus> {
    let tables: Vec<Vec<DeviceWindowPeer>> = windows.iter().map(|w| w.device_peers()).collect();
    let descriptors: Vec<DeviceWindow> = windows
        .iter()
        .zip(&tables)
        .map(|(w, t)| w.device_window(t.as_ptr() as u64))
        .collect();
    let n = u32::try_from(descriptors.len()).map_err(|_| DeviceStatus::BadPeer)?;
    let queue = ring.descriptor();
    let mut wqebbs = 0u32;
    // SAFETY: every pointer is to memory owned here or borrowed for the call: the
    // communicator, the window descriptors and their peer tables (each `n_peers` records,
    // alive in `tables`), the call, the ring (2^log_sq_wqebbs WQEBBs, written only at
    // slots masked into it) and the out-parameter. The planning reads a window's local
    // side only for an inline put, within the bounds it checked against the window's
    // length (the caller's contract makes that memory readable). Remote addresses and
    // result addresses are only written into WQE bytes.
    let status = unsafe {
        ibgda_api_host_build(
            comm.device(),
            descriptors.as_ptr(),
            n,
            call,
            &queue,
            start,
            &mut wqebbs,
        )
    };
    match DeviceStatus::from_code(status) {
        DeviceStatus::Ok => Ok(wqebbs),
        other => Err(other),
    }
}

/// Whether a WQE of `wqebbs` WQEBBs at counter `at` is signaled: it crosses a multiple of
/// the signal interval (the rule of the host queues and the device library).
pub fn must_signal(at: u64, wqebbs: u32, interval: u32) -> bool {
    let i = u64::from(interval.max(1));
    (at + u64::from(wqebbs)) / i > at / i
}

/// The status a window refusal stands for on the device.
pub fn window_status(e: ibgda::nic::WindowError) -> DeviceStatus {
    match e {
        ibgda::nic::WindowError::Peer { .. } => DeviceStatus::BadPeer,
        ibgda::nic::WindowError::Bounds { .. } => DeviceStatus::WindowBounds,
        _ => DeviceStatus::BadLength,
    }
}

/// Where [`builder_wqes`] builds: the ring (a power of two of WQEBBs), its queue pair's
/// number, the signal interval, and the WQEBB counter the call starts at.
#[derive(Debug)]
pub struct BuilderRing<'a> {
    /// The ring's bytes.
    pub ring: &'a mut [u8],
    /// The queue pair number in every control segment.
    pub qpn: Qpn,
    /// A WQE crossing a multiple of this many WQEBBs is signaled.
    pub interval: u32,
    /// The counter of the call's first WQEBB.
    pub start: u64,
}

/// What a device API call's WQEs must be, from the Rust builders: `call` over `windows`
/// (addresses and keys resolved with [`Window::remote`], [`Window::local`] and
/// [`Window::local_result`], independently of the device planning), unfetched results to
/// `scratch`, puts of at most `inline_max` bytes inline with their payload read by
/// `payload(window, offset, len)`. Writes the WQEs into `at.ring` and returns their WQEBBs,
/// or returns the status the device must return (the ring unchanged).
pub fn builder_wqes(
    at: BuilderRing<'_>,
    windows: &[&Window],
    scratch: LocalBuffer,
    inline_max: u32,
    c: &ApiCall,
    payload: &dyn Fn(u32, u64, usize) -> Vec<u8>,
) -> Result<u32, DeviceStatus> {
    let BuilderRing {
        ring,
        qpn,
        interval,
        start,
    } = at;
    let win = |i: u32| {
        windows
            .get(i as usize)
            .copied()
            .ok_or(DeviceStatus::BadPeer)
    };
    let (dst, src, sig) = (
        win(c.dst_window)?,
        win(c.src_window)?,
        win(c.signal_window)?,
    );
    let peer = c.peer as usize;
    let mut at = start;
    {
        let mut writer =
            SendRing::new(ring, WqeLimits::default()).map_err(|_| DeviceStatus::BadLength)?;
        // Each WQE: built once unsignaled to learn its size, then at `at` with its flag.
        fn emit<S: WqeSpec>(
            writer: &mut SendRing<'_>,
            qpn: Qpn,
            at: &mut u64,
            interval: u32,
            make: impl Fn(CompletionMode) -> Wqe<S>,
        ) {
            let probe = make(CompletionMode::OnError);
            let n = probe.wqebbs();
            let mode = if must_signal(*at, n, interval) {
                CompletionMode::Always
            } else {
                CompletionMode::OnError
            };
            let n2 = writer
                .write(WqeIndex(*at as u16), qpn, &make(mode))
                .expect("write");
            assert_eq!(n, n2);
            *at += u64::from(n);
        }
        let remote8 = |w: &Window, off: u64| -> Result<ibgda::wqe::RemoteAddress, DeviceStatus> {
            let r = w.remote(peer, off, 8).map_err(window_status)?;
            Ok(r)
        };
        let op = ApiOp::ALL
            .iter()
            .find(|(_, o)| *o as u32 == c.op)
            .map(|(_, o)| *o)
            .ok_or(DeviceStatus::BadLength)?;
        // The data WQE of a put (and of put_with_signal): resolved first, emitted later.
        enum Data {
            Inline(ibgda::wqe::RemoteAddress, Vec<u8>),
            Gather(ibgda::wqe::RemoteAddress, ibgda::wqe::Sge),
        }
        let data_of = |len: u32| -> Result<Data, DeviceStatus> {
            if u64::from(len) > MAX_SEGMENT_BYTES {
                return Err(DeviceStatus::BadLength);
            }
            let remote = dst
                .remote(peer, c.dst_offset, len.into())
                .map_err(window_status)?;
            if len <= inline_max {
                let local = src.local_side();
                let off = c.src_offset;
                if !(off <= local.len && u64::from(len) <= local.len - off) {
                    return Err(DeviceStatus::WindowBounds);
                }
                Ok(Data::Inline(
                    remote,
                    payload(c.src_window, off, len as usize),
                ))
            } else {
                Ok(Data::Gather(
                    remote,
                    src.local(c.src_offset, len).map_err(window_status)?,
                ))
            }
        };
        let emit_data = |writer: &mut SendRing<'_>, at: &mut u64, d: &Data| match d {
            Data::Inline(r, bytes) => emit(writer, qpn, at, interval, |m| {
                RdmaWrite::new(*r)
                    .inline(bytes)
                    .completion(m)
                    .build()
                    .expect("inline write")
            }),
            Data::Gather(r, sge) => emit(writer, qpn, at, interval, |m| {
                RdmaWrite::new(*r)
                    .sge(*sge)
                    .completion(m)
                    .build()
                    .expect("write")
            }),
        };
        let aligned = |r: &ibgda::wqe::RemoteAddress, result: u64| -> Result<(), DeviceStatus> {
            if r.addr % 8 != 0 || result % 8 != 0 {
                Err(DeviceStatus::Misaligned)
            } else {
                Ok(())
            }
        };
        let add =
            |writer: &mut SendRing<'_>, at: &mut u64, r: ibgda::wqe::RemoteAddress, v: u64| {
                emit(writer, qpn, at, interval, |m| {
                    Atomic::fetch_add(r, scratch, v)
                        .completion(m)
                        .build()
                        .expect("fetch-add")
                })
            };
        match op {
            ApiOp::Put => {
                let d = data_of(c.len)?;
                emit_data(&mut writer, &mut at, &d);
            }
            ApiOp::PutValue => {
                let r = remote8(dst, c.dst_offset)?;
                let bytes = c.value.to_ne_bytes();
                emit(&mut writer, qpn, &mut at, interval, |m| {
                    RdmaWrite::new(r)
                        .inline(&bytes)
                        .completion(m)
                        .build()
                        .expect("value")
                });
            }
            ApiOp::Get => {
                if c.len == 0 || u64::from(c.len) > MAX_SEGMENT_BYTES {
                    return Err(DeviceStatus::BadLength);
                }
                let r = dst
                    .remote(peer, c.dst_offset, c.len.into())
                    .map_err(window_status)?;
                let s = src.local(c.src_offset, c.len).map_err(window_status)?;
                emit(&mut writer, qpn, &mut at, interval, |m| {
                    RdmaRead::new(r).sge(s).completion(m).build().expect("read")
                });
            }
            ApiOp::AtomicAdd => {
                let r = remote8(dst, c.dst_offset)?;
                aligned(&r, scratch.addr)?;
                add(&mut writer, &mut at, r, c.value);
            }
            ApiOp::FetchAdd | ApiOp::CompareSwap => {
                let result = src.local_result(c.src_offset).map_err(window_status)?;
                let r = remote8(dst, c.dst_offset)?;
                aligned(&r, result.addr)?;
                emit(&mut writer, qpn, &mut at, interval, |m| {
                    let a = if op == ApiOp::FetchAdd {
                        Atomic::fetch_add(r, result, c.value)
                    } else {
                        Atomic::compare_swap(r, result, c.compare, c.value)
                    };
                    a.completion(m).build().expect("atomic")
                });
            }
            ApiOp::PutWithSignal => {
                let d = data_of(c.len)?;
                let s = remote8(sig, c.signal_offset)?;
                aligned(&s, scratch.addr)?;
                emit_data(&mut writer, &mut at, &d);
                add(&mut writer, &mut at, s, c.value);
            }
            ApiOp::Signal => {
                let s = remote8(sig, c.signal_offset)?;
                aligned(&s, scratch.addr)?;
                add(&mut writer, &mut at, s, c.value);
            }
        }
    }
    Ok((at - start) as u32)
}

/// The calls of the memory-effect checks (the same on the CPU software NIC and on the
/// GPU): rank 0 to rank 1 (peer 1) and to itself (peer 0), window 0 the data, window 1
/// the signal words, each call's counter `counter` on the calls marked so. Rank 1's
/// signal words 64 and 72 hold 40 and 7 (big-endian) before ([`EFFECT_WORDS`]).
pub fn effect_calls(counter: u32) -> Vec<ApiCall> {
    let (data, signals) = (0, 1);
    let call = |op: ApiOp| ApiCall {
        op: op as u32,
        dst_window: data,
        src_window: data,
        signal_window: signals,
        counter: super::NO_COUNTER,
        ..ApiCall::default()
    };
    vec![
        // Inline and gathered puts to peer 1, counted.
        ApiCall {
            peer: 1,
            len: 20,
            dst_offset: 100,
            src_offset: 0,
            counter,
            ..call(ApiOp::Put)
        },
        ApiCall {
            peer: 1,
            len: 600,
            dst_offset: 1000,
            src_offset: 2000,
            counter,
            ..call(ApiOp::Put)
        },
        ApiCall {
            peer: 1,
            dst_offset: 3000,
            value: 0x1122_3344_5566_7788,
            ..call(ApiOp::PutValue)
        },
        // A get of peer 1's bytes 256..320 (the remote side) into rank 0's 3500..3564.
        ApiCall {
            peer: 1,
            len: 64,
            dst_offset: 256,
            src_offset: 3500,
            counter,
            ..call(ApiOp::Get)
        },
        ApiCall {
            peer: 1,
            dst_window: signals,
            dst_offset: 64,
            value: 2,
            ..call(ApiOp::AtomicAdd)
        },
        ApiCall {
            peer: 1,
            dst_window: signals,
            dst_offset: 64,
            src_offset: 3600,
            value: 5,
            ..call(ApiOp::FetchAdd)
        },
        ApiCall {
            peer: 1,
            dst_window: signals,
            dst_offset: 72,
            src_offset: 3608,
            compare: 7,
            value: 99,
            ..call(ApiOp::CompareSwap)
        },
        ApiCall {
            peer: 1,
            len: 300,
            dst_offset: 1700,
            src_offset: 10,
            signal_offset: 0,
            value: 1,
            ..call(ApiOp::PutWithSignal)
        },
        ApiCall {
            peer: 1,
            signal_offset: 8,
            value: 9,
            ..call(ApiOp::Signal)
        },
        // Loopback: to rank 0 itself.
        ApiCall {
            peer: 0,
            len: 16,
            dst_offset: 3800,
            src_offset: 50,
            ..call(ApiOp::Put)
        },
    ]
}

/// Rank 1's signal words (offset, value) before [`effect_calls`], stored big-endian.
pub const EFFECT_WORDS: [(usize, u64); 2] = [(64, 40), (72, 7)];

/// How many of [`effect_calls`] name their counter.
pub const EFFECT_COUNTED: u64 = 3;

fn word_be(bytes: &[u8], off: usize) -> u64 {
    u64::from_be_bytes(bytes[off..off + 8].try_into().expect("8 bytes"))
}

/// Whether [`effect_calls`] had exactly their memory effects: rank 0's data before and
/// after (`before0`, `got0`), rank 1's (`before1`, `got1`) and rank 1's signal words
/// after (`signals1`); the first difference otherwise.
pub fn check_effects(
    before0: &[u8],
    before1: &[u8],
    got0: &[u8],
    got1: &[u8],
    signals1: &[u8],
) -> Result<(), String> {
    let same = |what: &str, a: &[u8], b: &[u8]| {
        if a == b {
            Ok(())
        } else {
            Err(format!("{what}: {a:02x?} instead of {b:02x?}"))
        }
    };
    let word = |what: &str, got: u64, want: u64| {
        if got == want {
            Ok(())
        } else {
            Err(format!("{what}: {got} instead of {want}"))
        }
    };
    same("inline put", &got1[100..120], &before0[0..20])?;
    same("gathered put", &got1[1000..1600], &before0[2000..2600])?;
    same(
        "put_value",
        &got1[3000..3008],
        &0x1122_3344_5566_7788u64.to_ne_bytes(),
    )?;
    same(
        "get (the remote side is dst)",
        &got0[3500..3564],
        &before1[256..320],
    )?;
    word(
        "atomic_add then fetch_add",
        word_be(signals1, 64),
        40 + 2 + 5,
    )?;
    word("fetch_add's original value", word_be(got0, 3600), 42)?;
    word("compare_swap swapped", word_be(signals1, 72), 99)?;
    word("compare_swap's original value", word_be(got0, 3608), 7)?;
    same(
        "put_with_signal's data",
        &got1[1700..2000],
        &before0[10..310],
    )?;
    word("put_with_signal's signal", word_be(signals1, 0), 1)?;
    word("signal", word_be(signals1, 8), 9)?;
    same("loopback put", &got0[3800..3816], &before0[50..66])?;
    let touched = |i: usize| {
        [(100, 120), (1000, 1600), (3000, 3008), (1700, 2000)]
            .iter()
            .any(|&(a, b)| (a..b).contains(&i))
    };
    match (0..got1.len()).find(|&i| !touched(i) && got1[i] != before1[i]) {
        Some(i) => Err(format!("rank 1's byte {i}, which no call names, changed")),
        None => Ok(()),
    }
}
