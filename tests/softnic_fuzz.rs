//! Whatever bytes the ring, the doorbell record, the doorbell and the CQ doorbell record
//! hold, the software NIC never panics and never touches memory outside registered
//! regions: every region sits in the middle of a larger buffer whose guard bytes must stay
//! intact, regions without write rights must stay intact, an unregistered buffer whose
//! address the WQEs name must stay intact, and the NIC never writes the send queue's
//! memory. Every CQE it writes parses.
//!
//! The ring is filled with a mix of fully random blocks and WQEs built from random recipes
//! (real and made-up keys, addresses in, near and outside regions, both transports, both
//! address-vector forms), then randomly mutated.

mod softnic_support;

use std::sync::Arc;

use ibgda::cq::{parse_cqe, Completion};
use ibgda::memory::DmaBuffer;
use ibgda::queue::{CompletionQueueMemory, SendQueueMemory};
use ibgda::softnic::{Access, CqMode, DctConfig, DctNumber, DoorbellWatch, Fabric, ReceiveConfig};
use ibgda::wqe::*;
use proptest::prelude::*;
use softnic_support::recipe::{recipe_operation, recipe_target};
use softnic_support::*;

const RING: usize = 8;

/// Where an address points: an area (see [`World::areas`]; past the list, the
/// unregistered buffer), an offset in it, and the key: the area's own key (`None`), or
/// another area's key or a made-up one.
#[derive(Clone, Copy, Debug)]
struct Place {
    area: u8,
    offset: i64,
    key: Option<u8>,
}

#[derive(Clone, Debug)]
struct Recipe {
    kind: u8,
    flags: u8,
    remote: Place,
    local: Vec<(Place, u32)>,
    payload: Vec<u8>,
    words: [u64; 4],
    /// Full form, and picks of LID, DCT and key (0 is the right one).
    av: (bool, u8, u8, u8),
}

#[derive(Clone, Debug)]
enum Block {
    Random(Vec<u8>),
    Wqe(Recipe),
}

fn place(area: BoxedStrategy<u8>) -> impl Strategy<Value = Place> {
    (
        area,
        prop_oneof![12 => 0i64..24, 1 => -8i64..80, 1 => any::<i64>()],
        any::<bool>(),
        prop_oneof![10 => Just(None), 1 => (0u8..8).prop_map(Some)],
    )
        .prop_map(|(area, offset, align, key)| Place {
            area,
            // Atomics want aligned addresses; most places are.
            offset: if align { offset & !7 } else { offset },
            key,
        })
}

fn recipe() -> impl Strategy<Value = Recipe> {
    // Remote places favour the responder's writable areas, local ones the requester's.
    let remote = prop_oneof![4 => Just(4u8), 3 => Just(2), 1 => Just(1), 1 => 0u8..8].boxed();
    let local = || prop_oneof![4 => Just(5u8), 3 => Just(3), 1 => Just(0), 1 => 0u8..8].boxed();
    let len = prop_oneof![8 => 1u32..16, 1 => 1u32..96];
    let av = prop_oneof![
        6 => any::<bool>().prop_map(|full| (full, 0, 0, 0)),
        1 => (any::<bool>(), 0u8..4, 0u8..4, 0u8..4),
    ];
    (
        (0u8..9, any::<u8>()),
        place(remote),
        prop::collection::vec((place(local()), len), 0..4),
        prop::collection::vec(any::<u8>(), 0..40),
        any::<[u64; 4]>(),
        av,
    )
        .prop_map(
            |((kind, flags), remote, local, payload, words, av)| Recipe {
                kind,
                flags,
                remote,
                local,
                payload,
                words,
                av,
            },
        )
}

fn block() -> impl Strategy<Value = Block> {
    prop_oneof![
        1 => prop::collection::vec(any::<u8>(), 64).prop_map(Block::Random),
        7 => recipe().prop_map(Block::Wqe),
    ]
}

#[derive(Clone, Debug)]
struct Case {
    dc: bool,
    blocks: Vec<Block>,
    mutations: Vec<(usize, u8)>,
    /// Added to the producer counter to make the doorbell record (mostly 0).
    record_offset: u16,
    doorbell: u64,
    cq_record: u64,
    delay: u32,
    doorbell_only: bool,
}

fn case() -> impl Strategy<Value = Case> {
    (
        any::<bool>(),
        prop::collection::vec(block(), 1..=RING),
        prop_oneof![3 => Just(vec![]), 1 => prop::collection::vec((0..RING * 64, any::<u8>()), 1..6)],
        prop_oneof![6 => Just(0u16), 2 => prop_oneof![0u16..=3, 0xfffdu16..=0xffff], 1 => any::<u16>()],
        any::<u64>(),
        prop_oneof![3 => Just(0u64), 1 => any::<u64>()],
        0u32..3,
        any::<bool>(),
    )
        .prop_map(
            |(dc, blocks, mutations, record_offset, doorbell, cq_record, delay, doorbell_only)| {
                Case {
                    dc,
                    blocks,
                    mutations,
                    record_offset,
                    doorbell,
                    cq_record,
                    delay,
                    doorbell_only,
                }
            },
        )
}

/// Everything the NIC may and may not touch.
struct World {
    fabric: Fabric,
    requester: Side,
    /// The responders' receive CQs (RC queue pair, DCT).
    receive_cqs: Vec<Consumer>,
    areas: Vec<Area>,
    /// Registered nowhere; WQEs name its address anyway.
    stranger: Arc<DmaBuffer>,
    dct: DctNumber,
    dc_key: u64,
}

fn world(case: &Case) -> World {
    let fabric = Fabric::new();
    let transport = if case.dc {
        TransportKind::Dc
    } else {
        TransportKind::Rc
    };
    let setup = Setup {
        ring_wqebbs: RING,
        cq_entries: 16,
        region_len: 64,
        response_delay: case.delay,
        watch: if case.doorbell_only {
            DoorbellWatch::DoorbellOnly
        } else {
            DoorbellWatch::PollRecord
        },
        ..Setup::default()
    };
    let requester = side(&fabric, 1, 1, transport, &setup);
    // The responders take a few WRITE_WITH_IMMs into small receive CQs, which overrun.
    let receiving = Setup {
        receive: true,
        receive_cq_entries: 2,
        ..setup.clone()
    };
    let mut responder = side(&fabric, 2, 2, TransportKind::Rc, &receiving);
    if !case.dc {
        fabric.connect(requester.qpn, responder.qpn).unwrap();
    }
    fabric.post_receives(responder.qpn, 3).unwrap();
    let dc_key = 0x5623_ceaf;
    let dct_cq = CompletionQueueMemory::allocate(2).unwrap();
    let dct = fabric
        .create_dct(
            responder.node,
            DctConfig {
                dc_key,
                receive: Some(ReceiveConfig {
                    cq: &dct_cq,
                    cq_mode: CqMode::Ring,
                }),
            },
        )
        .unwrap();
    fabric.post_receives(dct, 3).unwrap();
    let receive_cqs = vec![responder.rcq.take().unwrap(), Consumer::new(dct_cq)];
    let read_only = Access::REMOTE_READ;
    let areas = vec![
        Area::new(&fabric, requester.node, 64, read_only, 3),
        Area::new(&fabric, responder.node, 64, read_only, 4),
        Area::new(&fabric, responder.node, 48, Access::all(), 5),
        Area::new(&fabric, requester.node, 40, Access::LOCAL_WRITE, 6),
    ];
    let stranger = Arc::new(DmaBuffer::zeroed(256, 64).unwrap());
    stranger.fill(0, 256, GUARD).unwrap();
    let mut world = World {
        fabric,
        requester,
        receive_cqs,
        areas,
        stranger,
        dct,
        dc_key,
    };
    // The responder's and the requester's own areas join the list (indices 4 and 5);
    // indices past the list name the stranger.
    world.areas.push(responder.area);
    let own = &world.requester.area;
    world.areas.push(Area {
        buffer: own.buffer.clone(),
        region: own.region.clone(),
        seed: own.seed,
    });
    world
}

impl World {
    fn address(&self, place: Place) -> u64 {
        match self.areas.get(usize::from(place.area)) {
            Some(a) => a.region.addr().wrapping_add(place.offset as u64),
            None => self.stranger.addr().wrapping_add(place.offset as u64),
        }
    }

    fn key(&self, place: Place, remote: bool, words: &[u64; 4]) -> u32 {
        let key_of = |a: &Area| {
            if remote {
                a.region.rkey().0
            } else {
                a.region.lkey().0
            }
        };
        let pick = place.key.unwrap_or(place.area);
        match self.areas.get(usize::from(pick)) {
            Some(a) => key_of(a),
            None => words[usize::from(pick) % 4] as u32,
        }
    }

    fn target(&self, recipe: &Recipe) -> Option<AnyDcTarget> {
        let (full, lid, dct, key) = recipe.av;
        let lid = [2, 1, 99, recipe.words[0] as u16][usize::from(lid)];
        let dct = [
            self.dct.get(),
            self.requester.qpn.get(),
            0x42,
            recipe.words[1] as u32 & 0xff_ffff,
        ][usize::from(dct)];
        let dc_key = [self.dc_key, self.dc_key, 0, recipe.words[2]][usize::from(key)];
        recipe_target(full, lid, dct, dc_key)
    }
}

fn encode(world: &World, recipe: &Recipe, dc: bool, producer: &mut Producer) -> bool {
    let remote = RemoteAddress::new(
        world.address(recipe.remote),
        RKey(world.key(recipe.remote, true, &recipe.words)),
    );
    let sges: Vec<Sge> = recipe
        .local
        .iter()
        .filter_map(|&(place, len)| {
            Sge::new(
                world.address(place),
                len,
                LKey(world.key(place, false, &recipe.words)),
            )
            .ok()
        })
        .collect();
    let result = match recipe.local.first() {
        Some(&(place, _)) => LocalBuffer::new(
            world.address(place),
            LKey(world.key(place, false, &recipe.words)),
        ),
        None => world.areas[5].region.local(0),
    };
    let op = recipe_operation(
        recipe.kind,
        recipe.words,
        remote,
        result,
        &sges,
        &recipe.payload,
    );
    let flags =
        ControlFlags::from_byte(recipe.flags & !ControlFlags::RESERVED_BITS).unwrap_or_default();
    let wqe = AnyWqe {
        target: if dc { world.target(recipe) } else { None },
        flags,
        stream_id: 0,
        op,
    };
    let Ok(wqe) = wqe.build() else {
        return false;
    };
    if producer.counter + u64::from(wqe.wqebbs()) > RING as u64 {
        return false;
    }
    producer.post(&wqe);
    true
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    #[test]
    fn arbitrary_queue_memory_never_escapes_registered_regions(case in case()) {
        let mut world = world(&case);
        let dc = case.dc;
        // Fill the ring (the producer leaves the world so that recipes can read it).
        let placeholder = Producer::new(
            SendQueueMemory::allocate(RingSize::new(1).unwrap()).unwrap(),
            world.requester.qpn,
        );
        let mut producer = std::mem::replace(&mut world.requester.sq, placeholder);
        for block in &case.blocks {
            if producer.counter as usize >= RING {
                break;
            }
            let built = match block {
                Block::Wqe(recipe) => encode(&world, recipe, dc, &mut producer),
                Block::Random(_) => false,
            };
            if let (false, Block::Random(bytes)) = (built, block) {
                producer.post_raw(bytes);
            }
        }
        for &(at, byte) in &case.mutations {
            producer.xor_ring_byte(at, byte);
        }
        let record = (producer.counter as u16).wrapping_add(case.record_offset);
        producer.publish_value(record);
        producer.memory.store_doorbell(case.doorbell.to_ne_bytes());
        world.requester.cq.memory.store_dbrec(case.cq_record.to_ne_bytes());
        if case.doorbell_only {
            producer.ring();
        }

        let sq_memory = producer.memory.memory();
        let sq_before = (
            sq_memory.ring_bytes(),
            sq_memory.dbrec_bytes(),
            sq_memory.doorbell_bytes(),
        );
        let areas: Vec<&Area> = world.areas.iter().collect();
        let initial: Vec<Vec<u8>> = areas.iter().map(|a| a.initial_image()).collect();
        world.fabric.run_until_idle();

        // Guards intact everywhere; read-only regions intact entirely.
        for (k, area) in areas.iter().enumerate() {
            let image = area.image();
            let len = area.region.len();
            prop_assert_eq!(&image[..GUARD_LEN], &initial[k][..GUARD_LEN], "area {} guard before", k);
            prop_assert_eq!(&image[GUARD_LEN + len..], &initial[k][GUARD_LEN + len..], "area {} guard after", k);
            let writable = area.region.access().contains(Access::LOCAL_WRITE);
            if !writable {
                prop_assert_eq!(&image, &initial[k], "read-only area {} changed", k);
            }
        }
        prop_assert!(world.stranger.to_vec().iter().all(|&b| b == GUARD), "unregistered memory changed");
        let sq_after = (
            sq_memory.ring_bytes(),
            sq_memory.dbrec_bytes(),
            sq_memory.doorbell_bytes(),
        );
        prop_assert_eq!(sq_before, sq_after, "the NIC wrote the send queue");
        // Every CQE written parses, and names this queue.
        for slot in 0..16 {
            let cqe = world.requester.cq.entry(slot);
            if cqe[63] == 0xf1 && cqe[..63].iter().all(|&b| b == 0) {
                continue;
            }
            match parse_cqe(&cqe) {
                Ok(Completion::Requester(c)) => prop_assert_eq!(c.qpn, world.requester.qpn.get()),
                Ok(Completion::Error(e)) => prop_assert_eq!(e.qpn, world.requester.qpn.get()),
                other => prop_assert!(false, "slot {}: {:?}", slot, other),
            }
        }
        for cq in &world.receive_cqs {
            for slot in 0..2 {
                let cqe = cq.entry(slot);
                if cqe[63] == 0xf1 && cqe[..63].iter().all(|&b| b == 0) {
                    continue;
                }
                prop_assert!(
                    matches!(parse_cqe(&cqe), Ok(Completion::Responder(r)) if r.source_qpn == world.requester.qpn.get()),
                    "receive CQ slot {}: {:?}", slot, parse_cqe(&cqe)
                );
            }
        }
        // The NIC never consumes more than the record published.
        let status = world.fabric.qp_status(world.requester.qpn).unwrap();
        prop_assert!(status.consumer <= u64::from(record));
    }
}
